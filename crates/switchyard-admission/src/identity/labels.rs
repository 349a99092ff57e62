//! Bounded caller labels for metrics.

use std::collections::HashSet;
use std::sync::Arc;

use super::reserved::{ANONYMOUS, OTHER, UNKNOWN};
use crate::config::TenantConfig;

/// The first `top_n` configured tenants keep their caller name as a label; every other
/// caller folds into `other`. `anonymous` and `unknown` are always their own label.
pub struct CallerLabels {
    labelled: HashSet<Arc<str>>,
}

impl CallerLabels {
    pub fn new(tenants: &[TenantConfig], top_n: usize) -> Self {
        let labelled = tenants
            .iter()
            .take(top_n)
            .map(|tenant| Arc::from(tenant.caller.as_str()))
            .collect();
        Self { labelled }
    }

    pub fn label<'a>(&'a self, caller: &str) -> &'a str {
        match self.labelled.get(caller) {
            Some(name) => name,
            None if caller == ANONYMOUS => ANONYMOUS,
            None if caller == UNKNOWN => UNKNOWN,
            None => OTHER,
        }
    }

    /// Every label value this can return.
    pub fn all(&self) -> impl Iterator<Item = &str> {
        self.labelled
            .iter()
            .map(|name| &**name)
            .chain([ANONYMOUS, UNKNOWN, OTHER])
    }
}
