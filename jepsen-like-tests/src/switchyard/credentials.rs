//! The identities the suite invents for a run: tenant and admin keys ([`Credentials`]) and
//! the ledger reporter ids of the workload's spend reports. The node API, the transport and
//! the local-state reader all use them, so they live in a file of their own rather than in
//! the module root that re-exports them.

use std::collections::BTreeMap;

use crate::workload::MixConfig;

/// Spend reports the workload writes use ledger reporter ids from here up (one reporter per
/// report), far above any replica's node id.
pub const CHAOS_REPORTER_BASE: u64 = 1 << 40;
/// The `reporter` of the workload's `report_spend` operations.
pub const CHAOS_REPORTER: &str = "chaos-client";

/// Keys the suite invents for one run: a tenant key per caller, an admin key per principal
/// (the principal is the key's name, so the two-person rule sees distinct people), and the
/// runner's own admin key for reads and setup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    pub tenants: BTreeMap<String, String>,
    pub admins: BTreeMap<String, String>,
    pub runner: String,
}

impl Credentials {
    pub const RUNNER: &'static str = "chaos-runner";

    pub fn for_mix(mix: &MixConfig) -> Self {
        let tenants = mix
            .callers
            .iter()
            .map(|c| (c.clone(), format!("sk-chaos-{c}")))
            .collect();
        let mut admins: BTreeMap<String, String> = mix
            .principals
            .iter()
            .map(|p| (p.clone(), format!("chaos-admin-key-{p}")))
            .collect();
        admins.insert(Self::RUNNER.into(), "chaos-admin-key-runner".into());
        Self {
            tenants,
            admins,
            runner: Self::RUNNER.into(),
        }
    }

    pub fn tenant_auth(&self, caller: &str) -> Option<String> {
        self.tenants.get(caller).map(|key| format!("Bearer {key}"))
    }

    pub fn admin_auth(&self, principal: &str) -> Option<String> {
        self.admins
            .get(principal)
            .map(|key| format!("Bearer {key}"))
    }

    pub fn runner_auth(&self) -> String {
        self.admin_auth(&self.runner).unwrap_or_default()
    }
}
