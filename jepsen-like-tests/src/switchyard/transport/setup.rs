//! Before the clients start: every budget the checkers judge against is set in the ledger,
//! and every replica has applied it and holds a lease on it (so the first requests are not
//! refused as `quota_lease_pending`, which would only blur the availability figures).

use http::Method;
use std::collections::BTreeMap;
use std::time::Duration;
use switchyard_core::QuotaScope;
use tokio::time::Instant;

use super::client::GatewayClient;
use crate::cluster::Endpoint;
use crate::switchyard::local_state::LocalState;
use crate::workload::{Completion, WorkloadError};

const SETUP_TIMEOUT: Duration = Duration::from_secs(60);

async fn set_budgets(
    client: &GatewayClient,
    endpoints: &[Endpoint],
    budgets: &BTreeMap<QuotaScope, u64>,
) -> Result<(), WorkloadError> {
    let deadline = Instant::now() + SETUP_TIMEOUT;
    let runner = client.credentials.runner.clone();
    for (attempt, (scope, limit)) in budgets.iter().enumerate() {
        let body = serde_json::json!({
            "caller": &*scope.caller,
            "purpose": scope.purpose,
            "tokens_per_day": limit,
        });
        let mut turn = attempt;
        loop {
            let endpoint = &endpoints[turn % endpoints.len()];
            turn += 1;
            let outcome = client
                .admin(
                    endpoint,
                    &runner,
                    Method::PUT,
                    "/admin/quota",
                    Some(body.clone()),
                )
                .await;
            let problem = match outcome {
                Ok(reply) if reply.status == 200 => break,
                Ok(reply) => format!("{} {:?}", reply.status, reply.error()),
                Err(Completion::Fail(e) | Completion::Info(e)) => e.reason,
                Err(Completion::Ok(_)) => "unexpected".into(),
            };
            if Instant::now() >= deadline {
                return Err(WorkloadError::Setup(format!(
                    "setting the budget of {scope} failed: {problem}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    Ok(())
}

/// Whether `endpoint` has applied every budget at its limit and holds a lease on each.
async fn node_ready(
    client: &GatewayClient,
    endpoint: &Endpoint,
    budgets: &BTreeMap<QuotaScope, u64>,
) -> Result<(), String> {
    let runner = client.credentials.runner.clone();
    let reply = client
        .admin(endpoint, &runner, Method::GET, "/admin/ledger/local", None)
        .await
        .map_err(|_| "no answer".to_owned())?;
    let local: LocalState = reply
        .json()
        .and_then(|json| serde_json::from_value(json).ok())
        .ok_or_else(|| format!("unexpected answer {}", reply.status))?;
    let state = local.to_node_state()?;
    for (scope, limit) in budgets {
        match state.budgets.get(scope) {
            Some(budget) if budget.limit == *limit => {}
            other => return Err(format!("{scope}: budget {other:?}")),
        }
        let held = state
            .leases
            .get(scope)
            .is_some_and(|leases| leases.contains_key(&endpoint.node));
        if !held {
            return Err(format!("{scope}: no lease yet"));
        }
    }
    Ok(())
}

pub(super) async fn prepare(
    client: &GatewayClient,
    endpoints: &[Endpoint],
    budgets: &BTreeMap<QuotaScope, u64>,
) -> Result<(), WorkloadError> {
    if endpoints.is_empty() {
        return Err(WorkloadError::Setup("the cluster has no endpoints".into()));
    }
    set_budgets(client, endpoints, budgets).await?;
    let deadline = Instant::now() + SETUP_TIMEOUT;
    for endpoint in endpoints {
        loop {
            match node_ready(client, endpoint, budgets).await {
                Ok(()) => break,
                Err(problem) if Instant::now() >= deadline => {
                    tracing::warn!(node = endpoint.node, %problem, "node not fully ready; starting anyway");
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
    Ok(())
}
