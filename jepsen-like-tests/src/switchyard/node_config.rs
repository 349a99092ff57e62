//! Each replica's config file: the operator's base config (optional) with the parts the
//! suite owns laid over it: cluster membership (static, every node a voter, peers reached at
//! their advertised address, i.e. their fault proxy), admin keys of the workload's principals,
//! one tenant per workload caller with its budget, and the simulated workers.

use std::collections::BTreeMap;
use switchyard_core::QuotaScope;
use toml::{Table, Value};

use super::credentials::Credentials;
use crate::cluster::{ClusterLayout, NodeInfo};

fn table(pairs: impl IntoIterator<Item = (&'static str, Value)>) -> Value {
    Value::Table(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

fn text(s: impl Into<String>) -> Value {
    Value::String(s.into())
}

fn int(n: u64) -> Value {
    Value::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// The `[section]` table of `root`, created if missing.
fn section<'t>(root: &'t mut Table, name: &str) -> Result<&'t mut Table, String> {
    root.entry(name.to_owned())
        .or_insert_with(|| Value::Table(Table::new()))
        .as_table_mut()
        .ok_or_else(|| format!("`{name}` in the base config is not a table"))
}

/// What a replica's config is made from besides its place in the cluster.
#[derive(Clone, Copy, Debug)]
pub struct ConfigInputs<'a> {
    pub base: Option<&'a str>,
    pub credentials: &'a Credentials,
    pub budgets: &'a BTreeMap<QuotaScope, u64>,
    pub model: &'a str,
    pub routing_policy: &'a str,
}

pub fn render(
    node: &NodeInfo,
    layout: &ClusterLayout<'_>,
    inputs: &ConfigInputs<'_>,
) -> Result<String, String> {
    let mut root: Table = match inputs.base {
        Some(text) => text
            .parse()
            .map_err(|e| format!("the base config is not valid TOML: {e}"))?,
        None => Table::new(),
    };
    let routing = section(&mut root, "routing")?;
    routing
        .entry("policy")
        .or_insert_with(|| text(inputs.routing_policy));

    let members = layout
        .nodes
        .iter()
        .map(|n| {
            table([
                ("id", int(u64::from(n.id))),
                ("addr", text(n.advertised_raft_addr.to_string())),
            ])
        })
        .collect();
    let cluster = section(&mut root, "cluster")?;
    cluster.insert("secret".into(), text(layout.secret));
    cluster.insert(
        "advertise_addr".into(),
        text(node.advertised_raft_addr.to_string()),
    );
    cluster.insert("members".into(), Value::Array(members));

    let keys = inputs
        .credentials
        .admins
        .iter()
        .map(|(name, key)| table([("name", text(name)), ("key", text(key))]))
        .collect();
    section(&mut root, "admin")?.insert("keys".into(), Value::Array(keys));

    let tenants = inputs
        .credentials
        .tenants
        .iter()
        .enumerate()
        .map(|(index, (caller, key))| {
            // One core caller, so the survival degradation level ("core callers only") can
            // take effect rather than fail its must-succeed action.
            let mut tenant = vec![
                ("api_key", text(key)),
                ("caller", text(caller)),
                ("max_priority", text("P0")),
                ("allow_warmup", Value::Boolean(true)),
                ("core", Value::Boolean(index == 0)),
            ];
            if let Some(budget) = inputs.budgets.get(&QuotaScope::caller(caller.as_str())) {
                tenant.push(("tokens_per_day", int(*budget)));
            }
            table(tenant)
        })
        .collect();
    section(&mut root, "admission")?.insert("tenants".into(), Value::Array(tenants));

    let workers = layout
        .workers
        .iter()
        .map(|w| {
            table([
                ("name", text(&w.name)),
                ("url", text(w.url())),
                ("models", Value::Array(vec![text(inputs.model)])),
            ])
        })
        .collect();
    root.insert("workers".into(), Value::Array(workers));
    toml::to_string(&root).map_err(|e| format!("cannot render the node config: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::WorkerInfo;
    use crate::workload::MixConfig;
    use std::net::SocketAddr;
    use std::path::PathBuf;

    fn node(id: u32) -> NodeInfo {
        let addr = |port: u16| SocketAddr::from(([10, 213, 1, id as u8], port));
        NodeInfo {
            id,
            client_addr: addr(8080),
            raft_addr: addr(7000),
            advertised_raft_addr: SocketAddr::from(([10, 213, 1, 254], 17_000 + id as u16)),
            data_dir: PathBuf::from("/tmp/d"),
            dir: PathBuf::from("/tmp"),
            log_path: PathBuf::from("/tmp/l"),
        }
    }

    #[test]
    fn the_suite_owns_membership_keys_tenants_and_workers() {
        let nodes = vec![node(1), node(2), node(3)];
        let workers = vec![WorkerInfo {
            name: "sim-1".into(),
            addr: SocketAddr::from(([10, 213, 1, 254], 19_001)),
            log_path: PathBuf::from("/tmp/w"),
        }];
        let layout = ClusterLayout {
            nodes: &nodes,
            workers: &workers,
            secret: "s3cret",
        };
        let mix = MixConfig::default();
        let credentials = Credentials::for_mix(&mix);
        let budgets = BTreeMap::from([(QuotaScope::caller("alice"), 900)]);
        let base = "[routing]\npolicy = \"round_robin\"\n[cluster]\nsecret = \"old\"\n";
        let inputs = ConfigInputs {
            base: Some(base),
            credentials: &credentials,
            budgets: &budgets,
            model: "sim-llama",
            routing_policy: "cache_aware",
        };
        let text = render(&nodes[1], &layout, &inputs).unwrap();
        let parsed: Table = text.parse().unwrap();
        assert_eq!(
            parsed["routing"]["policy"].as_str(),
            Some("round_robin"),
            "the base wins"
        );
        let cluster = &parsed["cluster"];
        assert_eq!(cluster["secret"].as_str(), Some("s3cret"));
        assert_eq!(
            cluster["advertise_addr"].as_str(),
            Some("10.213.1.254:17002")
        );
        let members = cluster["members"].as_array().unwrap();
        assert_eq!(members.len(), 3);
        assert_eq!(members[2]["addr"].as_str(), Some("10.213.1.254:17003"));
        let keys = parsed["admin"]["keys"].as_array().unwrap();
        assert_eq!(
            keys.len(),
            mix.principals.len() + 1,
            "principals and the runner"
        );
        let tenants = parsed["admission"]["tenants"].as_array().unwrap();
        let alice = tenants
            .iter()
            .find(|t| t["caller"].as_str() == Some("alice"))
            .unwrap();
        assert_eq!(alice["tokens_per_day"].as_integer(), Some(900));
        assert_eq!(alice["core"].as_bool(), Some(true));
        let bob = tenants
            .iter()
            .find(|t| t["caller"].as_str() == Some("bob"))
            .unwrap();
        assert!(bob.get("tokens_per_day").is_none() && bob["core"].as_bool() == Some(false));
        assert_eq!(
            parsed["workers"][0]["url"].as_str(),
            Some("http://10.213.1.254:19001")
        );
        assert!(
            render(
                &nodes[0],
                &layout,
                &ConfigInputs {
                    base: Some("routing = 3"),
                    ..inputs
                }
            )
            .is_err()
        );
    }
}
