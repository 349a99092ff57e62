#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Property tests of `PUT /admin/config`'s path: any dotted path and any JSON value is
//! either refused with a field-naming error or applied whole; nothing panics, a refused
//! change leaves the config as it was, and no secret appears in what is recorded.

use proptest::prelude::*;
use serde_json::{Value, json};
use std::sync::Arc;
use switchyard_gateway::Config;
use switchyard_gateway::reload::{AuditLog, LiveConfig, set_path};

const TENANT_KEY: &str = "sk-props-tenant-key-0001";
const CLUSTER_SECRET: &str = "props-cluster-secret-0002";

fn base_config() -> Config {
    let mut config = Config {
        admission: serde_json::from_value(
            json!({"tenants": [{"api_key": TENANT_KEY, "caller": "a"}]}),
        )
        .unwrap(),
        ..Config::default()
    };
    config.cluster.secret = CLUSTER_SECRET.into();
    config
}

/// Real leaf paths of the config, plus made-up ones.
fn paths() -> Vec<String> {
    let tree =
        switchyard_core::with_secrets_exposed(|| serde_json::to_value(base_config())).unwrap();
    let mut out = Vec::new();
    collect("", &tree, &mut out);
    out.extend(
        [
            "retry.nope",
            "nope",
            "",
            ".",
            "retry..max_retries",
            "admission.tenants.0",
        ]
        .map(String::from),
    );
    out
}

fn collect(path: &str, node: &Value, out: &mut Vec<String>) {
    if let Value::Object(fields) = node {
        for (name, value) in fields {
            let child = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            collect(&child, value, out);
            out.push(child);
        }
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn any_change_is_applied_whole_or_refused_and_no_secret_is_recorded(
        index in any::<prop::sample::Index>(),
        value in json_value(),
    ) {
        let paths = paths();
        let path = &paths[index.index(paths.len())];
        let live = LiveConfig::new(base_config(), Vec::new(), AuditLog::in_memory());
        let before = live.get().as_ref().clone();
        match set_path(&before, path, value) {
            Err(error) => prop_assert!(!error.to_string().is_empty()),
            Ok(next) => {
                let outcome = live.apply(next.clone(), "prop", "api", None);
                let current = live.get();
                if outcome.is_ok() {
                    prop_assert_eq!(current.as_ref(), &next);
                } else {
                    prop_assert_eq!(current.as_ref(), &before);
                }
            }
        }
        let recorded = serde_json::to_string(&live.audit().entries()).unwrap();
        prop_assert!(!recorded.contains(TENANT_KEY) && !recorded.contains(CLUSTER_SECRET));
        // Secrets survive every accepted edit.
        let after = Arc::clone(&live.get());
        prop_assert_eq!(after.cluster.secret.expose(), CLUSTER_SECRET);
    }
}
