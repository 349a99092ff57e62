//! Control-plane endpoints of the replicated ledger: cluster membership, budgets and
//! two-person quota overrides. Writes are accepted by any replica and forwarded to the
//! leader; reads that must be current use the linearizable read path.

use axum::Json;
use axum::extract::{Path, State};
use bytes::Bytes;
use http::HeaderMap;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::{Purpose, QuotaScope};
use switchyard_ledger::{BudgetSpec, BudgetStatus, LedgerError, LedgerNode, ReadAnswer, ReadQuery};

use super::admin::{Right, authenticate, authorize};
use crate::error::ApiError;
use crate::state::{AppState, SharedState};

type JsonResult = Result<Json<serde_json::Value>, ApiError>;

/// The longest a quota override may last: 2 h, no renewal, so an emergency grant cannot
/// quietly become a standing budget.
const MAX_OVERRIDE: Duration = Duration::from_secs(2 * 3600);

fn node(state: &AppState) -> Result<&Arc<LedgerNode>, ApiError> {
    state.cluster.as_ref().ok_or_else(|| {
        ApiError::not_found(
            "cluster_disabled",
            "the replicated ledger is off (cluster.enabled = false)",
        )
    })
}

/// How a ledger failure reaches an operator. Unavailability is a 503 with `Retry-After`,
/// split by what the caller may assume: `quota_ledger_unreachable` changed nothing (no
/// leader, no quorum, a read), `outcome_unknown` was sent to a leader that did not confirm in
/// time (it may have applied; a read shows which).
pub(crate) fn ledger_error(error: LedgerError) -> ApiError {
    match error {
        LedgerError::Rejected(reason) => ApiError::conflict("rejected_by_ledger", reason),
        LedgerError::OutcomeUnknown(_) => ApiError::unavailable(
            "outcome_unknown",
            format!(
                "the quota ledger did not confirm the change in time; it may or may not have applied: {error}"
            ),
            1,
        ),
        LedgerError::NoLeader | LedgerError::Unreachable(_) | LedgerError::Raft(_) => {
            ApiError::unavailable(
                "quota_ledger_unreachable",
                format!("the quota ledger has no reachable leader: {error}"),
                1,
            )
        }
        other => ApiError::internal(other.to_string()),
    }
}

fn parse<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request("invalid_request", format!("invalid body: {e}")))
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<serde_json::Value, ApiError> {
    serde_json::to_value(value).map_err(|e| ApiError::internal(e.to_string()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScopeBody {
    caller: String,
    #[serde(default)]
    purpose: Option<Purpose>,
}

impl ScopeBody {
    fn scope(&self) -> QuotaScope {
        QuotaScope {
            caller: Arc::from(self.caller.as_str()),
            purpose: self.purpose,
        }
    }
}

pub async fn cluster_status(State(state): State<SharedState>, headers: HeaderMap) -> JsonResult {
    authenticate(&state, &headers)?.require(Right::Read)?;
    let status = node(&state)?.status();
    Ok(Json(json!({
        "node_id": status.node_id,
        "role": status.role,
        "leader": status.leader,
        "term": status.term,
        "last_applied": status.last_applied,
        "voters": status.voters,
        "members": status.members,
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddMember {
    id: u64,
    addr: String,
    /// Promote to voter once caught up (keep 3 or 5 voters; others stay learners).
    #[serde(default)]
    voter: bool,
}

pub async fn add_member(
    State(state): State<SharedState>,
    headers: HeaderMap,
    body: Bytes,
) -> JsonResult {
    authorize(&state, &headers)?;
    let request: AddMember = parse(&body)?;
    let node = node(&state)?;
    node.add_learner(request.id, &request.addr)
        .await
        .map_err(ledger_error)?;
    if request.voter {
        node.promote(request.id).await.map_err(ledger_error)?;
    }
    Ok(Json(json!({"added": request.id, "voter": request.voter})))
}

pub async fn promote_member(
    State(state): State<SharedState>,
    headers: HeaderMap,
    Path(id): Path<u64>,
) -> JsonResult {
    authorize(&state, &headers)?;
    node(&state)?.promote(id).await.map_err(ledger_error)?;
    Ok(Json(json!({"promoted": id})))
}

pub async fn remove_member(
    State(state): State<SharedState>,
    headers: HeaderMap,
    Path(id): Path<u64>,
) -> JsonResult {
    authorize(&state, &headers)?;
    node(&state)?.remove(id).await.map_err(ledger_error)?;
    Ok(Json(json!({"removed": id})))
}

pub async fn quota(State(state): State<SharedState>, headers: HeaderMap) -> JsonResult {
    authenticate(&state, &headers)?.require(Right::Read)?;
    let node = node(&state)?;
    let budgets = match node.read(ReadQuery::Budgets).await.map_err(ledger_error)? {
        ReadAnswer::Budgets(budgets) => budgets,
        _ => return Err(ApiError::internal("unexpected ledger answer")),
    };
    let ratios = match node.read(ReadQuery::Ratios).await.map_err(ledger_error)? {
        ReadAnswer::Ratios(ratios) => to_json(&ratios)?,
        _ => serde_json::Value::Null,
    };
    let budgets: Vec<serde_json::Value> = budgets
        .iter()
        .map(budget_with_utilisation)
        .collect::<Result<_, _>>()?;
    Ok(Json(json!({"budgets": budgets, "spend_ratios": ratios})))
}

/// A budget as the ledger reports it, plus what an operator asks first: how much of the
/// period is left, what share is spent, and how much of each replica's lease is used.
fn budget_with_utilisation(budget: &BudgetStatus) -> Result<serde_json::Value, ApiError> {
    let mut value = to_json(budget)?;
    let limit = budget.spec.limit_tokens.max(1) as f64;
    value["remaining_tokens"] = json!(budget.spec.limit_tokens.saturating_sub(budget.spent));
    value["utilisation"] = json!(budget.spent as f64 / limit);
    value["held_by_leases_tokens"] = json!(budget.committed.saturating_sub(budget.spent));
    if let Some(leases) = value["leases"].as_array_mut() {
        for (json_lease, lease) in leases.iter_mut().zip(&budget.leases) {
            let granted = lease.granted_total.max(1) as f64;
            json_lease["utilisation"] = json!(lease.used_reported as f64 / granted);
        }
    }
    Ok(value)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetBudget {
    #[serde(flatten)]
    scope: ScopeBody,
    tokens_per_day: u64,
    /// Fleet-wide token rate and concurrency (0 = none), split among replicas by demand.
    #[serde(default)]
    tokens_per_second: u64,
    #[serde(default)]
    max_concurrency: u64,
}

pub async fn set_quota(
    State(state): State<SharedState>,
    headers: HeaderMap,
    body: Bytes,
) -> JsonResult {
    let who = authenticate(&state, &headers)?.require(Right::Operate)?;
    let request: SetBudget = parse(&body)?;
    let spec = BudgetSpec {
        max_lease_tokens: 0,
        max_debt_tokens: request.tokens_per_day / 1000,
        rate_tokens_per_s: request.tokens_per_second,
        max_concurrency: request.max_concurrency,
        ..BudgetSpec::daily(request.tokens_per_day)
    };
    node(&state)?
        .set_budget(request.scope.scope(), spec, &who)
        .await
        .map_err(ledger_error)?;
    Ok(Json(
        json!({"set": request.scope.scope().to_string(), "tokens_per_day": request.tokens_per_day, "by": who}),
    ))
}

pub async fn list_overrides(State(state): State<SharedState>, headers: HeaderMap) -> JsonResult {
    authenticate(&state, &headers)?.require(Right::Read)?;
    match node(&state)?
        .read(ReadQuery::Overrides)
        .await
        .map_err(ledger_error)?
    {
        ReadAnswer::Overrides(list) => Ok(Json(json!({"overrides": to_json(&list)?}))),
        _ => Err(ApiError::internal("unexpected ledger answer")),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProposeOverride {
    #[serde(flatten)]
    scope: ScopeBody,
    extra_tokens: u64,
    reason: String,
    /// At most 2 h (the default); no renewal — propose again when it lapses.
    #[serde(default)]
    duration_secs: Option<u64>,
}

pub async fn propose_override(
    State(state): State<SharedState>,
    headers: HeaderMap,
    body: Bytes,
) -> JsonResult {
    let who = authenticate(&state, &headers)?.require(Right::Operate)?;
    let request: ProposeOverride = parse(&body)?;
    let duration = request
        .duration_secs
        .map(Duration::from_secs)
        .unwrap_or(MAX_OVERRIDE);
    if duration > MAX_OVERRIDE || duration.is_zero() {
        return Err(ApiError::bad_request(
            "invalid_override",
            "duration_secs must be between 1 and 7200",
        ));
    }
    if request.reason.trim().is_empty() {
        return Err(ApiError::bad_request(
            "invalid_override",
            "a reason is required",
        ));
    }
    let id = node(&state)?
        .propose_override(
            request.scope.scope(),
            request.extra_tokens,
            &request.reason,
            duration,
            &who,
        )
        .await
        .map_err(ledger_error)?;
    Ok(Json(json!({"proposed": id, "requester": who})))
}

pub async fn approve_override(
    State(state): State<SharedState>,
    headers: HeaderMap,
    Path(id): Path<u64>,
) -> JsonResult {
    let who = authenticate(&state, &headers)?.require(Right::Approve)?;
    node(&state)?
        .approve_override(id, &who)
        .await
        .map_err(ledger_error)?;
    Ok(Json(json!({"approved": id, "approver": who})))
}

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct Revoke {
    reason: String,
}

pub async fn revoke_override(
    State(state): State<SharedState>,
    headers: HeaderMap,
    Path(id): Path<u64>,
    body: Bytes,
) -> JsonResult {
    let who = authenticate(&state, &headers)?.require(Right::Approve)?;
    let request: Revoke = if body.is_empty() {
        Revoke::default()
    } else {
        parse(&body)?
    };
    node(&state)?
        .revoke_override(id, &who, &request.reason)
        .await
        .map_err(ledger_error)?;
    Ok(Json(json!({"revoked": id, "by": who})))
}

pub async fn audit(State(state): State<SharedState>, headers: HeaderMap) -> JsonResult {
    authenticate(&state, &headers)?.require(Right::Read)?;
    match node(&state)?
        .read(ReadQuery::Audit { after_seq: 0 })
        .await
        .map_err(ledger_error)?
    {
        // The ledger keeps only the newest entries: the first seq says what was evicted.
        ReadAnswer::Audit(entries) => Ok(Json(json!({
            "oldest_retained_seq": entries.first().map(|e| e.seq),
            "entries": to_json(&entries)?
        }))),
        _ => Err(ApiError::internal("unexpected ledger answer")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::StatusCode;

    fn answer(error: LedgerError) -> (StatusCode, String, Option<u64>) {
        let api = ledger_error(error);
        (api.status, api.code.to_owned(), api.retry_after)
    }

    #[test]
    fn ledger_failures_answer_clear_openai_shaped_errors() {
        let unavailable = [
            LedgerError::NoLeader,
            LedgerError::Unreachable("timeout".into()),
            LedgerError::Raft("not enough for a quorum".into()),
        ];
        for error in unavailable {
            assert_eq!(
                answer(error),
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "quota_ledger_unreachable".into(),
                    Some(1)
                )
            );
        }
        assert_eq!(
            answer(LedgerError::OutcomeUnknown("no commit in 3s".into())),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "outcome_unknown".into(),
                Some(1)
            )
        );
        assert_eq!(
            answer(LedgerError::Rejected("two-person rule".into())),
            (StatusCode::CONFLICT, "rejected_by_ledger".into(), None)
        );
    }
}

#[cfg(test)]
mod utilisation_tests {
    use super::*;
    use switchyard_ledger::node::reads::LeaseStatus;

    #[test]
    fn quota_listing_shows_remaining_budget_and_lease_utilisation() {
        let budget = BudgetStatus {
            scope: QuotaScope::caller("acme"),
            spec: BudgetSpec::daily(1_000),
            spent: 250,
            committed: 400,
            leases: vec![LeaseStatus {
                node: 2,
                epoch: 1,
                granted_total: 200,
                used_reported: 50,
                expires_at_ms: 0,
            }],
        };
        let value = budget_with_utilisation(&budget).unwrap();
        assert_eq!(value["remaining_tokens"], 750);
        assert_eq!(value["utilisation"], 0.25);
        assert_eq!(value["held_by_leases_tokens"], 150);
        assert_eq!(value["leases"][0]["utilisation"], 0.25);
        assert_eq!(value["leases"][0]["node"], 2);
    }
}
