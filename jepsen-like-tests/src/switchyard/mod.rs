//! The suite wired to real Switchyard replicas (`switchyard serve`, crate
//! `switchyard-gateway`) and simulated workers (`switchyard-sim worker`):
//!
//! * [`SwitchyardNodeApi`]: each replica's generated config, readiness and role
//!   (`GET /admin/cluster`), its locally applied ledger state (`GET /admin/ledger/local`);
//! * [`SwitchyardTransport`]: the workload's operations as business requests
//!   (`POST /v1/chat/completions` with a tenant key) and admin calls by named principals;
//! * [`Credentials`]: the tenant and admin keys the suite makes up for the workload's
//!   callers and principals, written into every replica's config;
//! * [`check_config`]: the gateway's error codes the checkers accept as clear.

mod http;
mod local_state;
mod node_api;
mod node_config;
mod transport;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::checker::CheckConfig;
use crate::workload::MixConfig;

pub use self::http::{CallError, HttpClient, Reply};
pub use local_state::LocalState;
pub use node_api::{NODE_CONFIG_FILE, SwitchyardNodeApi};
pub use transport::SwitchyardTransport;

/// Spend reports the workload writes use ledger reporter ids from here up (one reporter per
/// report), far above any replica's node id.
pub const CHAOS_REPORTER_BASE: u64 = 1 << 40;
/// The `reporter` of the workload's `report_spend` operations.
pub const CHAOS_REPORTER: &str = "chaos-client";

/// `[switchyard]` in the cluster file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SwitchyardSettings {
    /// The model the simulated workers serve and the workload asks for.
    pub model: String,
    /// Routing policy when the base config names none (`cache_aware` applies affinity).
    pub routing_policy: String,
    /// An operator config to start from; the suite overrides cluster, admin keys, tenants
    /// and workers in it.
    pub base_config: Option<PathBuf>,
}

impl Default for SwitchyardSettings {
    fn default() -> Self {
        Self {
            model: "sim-llama".into(),
            routing_policy: "cache_aware".into(),
            base_config: None,
        }
    }
}

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

fn push_all(list: &mut Vec<String>, items: &[&str]) {
    for item in items {
        if !list.iter().any(|known| known == item) {
            list.push((*item).to_owned());
        }
    }
}

/// The checkers' parameters for a real cluster: the gateway's refusal codes count as clear
/// errors (budget and override refusals as correct answers), and spends carry no override
/// attribution (the gateway does not tell the client which pool paid).
pub fn check_config(mut config: CheckConfig) -> CheckConfig {
    push_all(
        &mut config.clear_error_reasons,
        &[
            "budget_exhausted",
            "budget_soft_limit",
            "budget_hard_limit",
            "degraded_unavailable",
            "ledger_unavailable",
            "quota_lease_pending",
            "quota_ledger_unreachable",
            "quota_ledger_outcome_unknown",
            "outcome_unknown",
            "rate_limited",
            "concurrency_limit",
            "p2_paused",
            "queue_full",
            "queue_timeout",
            "retry_deferred",
            "no_routable_worker",
            "upstream_error",
            "upstream_timeout",
        ],
    );
    push_all(
        &mut config.policy_rejections,
        &[
            "budget_exhausted",
            "budget_soft_limit",
            "budget_hard_limit",
            "degraded_unavailable",
            "p2_paused",
            "retry_deferred",
        ],
    );
    config.override_attribution = false;
    config
}
