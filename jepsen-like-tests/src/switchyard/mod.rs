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

mod credentials;
mod http;
mod local_state;
mod node_api;
mod node_config;
mod settings;
mod transport;

use crate::checker::CheckConfig;

pub use self::http::{CallError, HttpClient, Reply};
pub use credentials::{CHAOS_REPORTER, CHAOS_REPORTER_BASE, Credentials};
pub use local_state::LocalState;
pub use node_api::{NODE_CONFIG_FILE, SwitchyardNodeApi};
pub use settings::SwitchyardSettings;
pub use transport::SwitchyardTransport;

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
