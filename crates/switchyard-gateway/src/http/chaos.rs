//! Endpoints for the chaos suite (`jepsen-like-tests/`). The read is always on (admin key):
//! `GET /admin/ledger/local` answers this replica's *locally applied* ledger state, without
//! the linearizable read barrier, so the suite can compare replicas with each other after a
//! run. The two writes (a spend report and an affinity record straight into the log) exist
//! only to let the suite record those operations in its history; they answer 404 unless the
//! process runs with `SWITCHYARD_CHAOS_ENDPOINTS=1`.
//!
//! The third test-only write, `PUT /admin/chaos/clock {"offset_ms": N}`, skews the wall clock
//! this replica anchors ledger time to (lease and override expiry) at the start of each term
//! it leads. Lease deadlines on the hot path use the monotonic clock, which skew never moves.
//!
//! `PUT /admin/chaos/flush-stall {"stall_ms": N, "for_ms": M}` makes every Raft log flush of
//! this replica that starts within the next `M` ms (no `for_ms`: until cleared) sleep `N` ms
//! before its fsync, a disk whose fsync stalls; `{"stall_ms": 0}` clears it.

use axum::Json;
use axum::extract::State;
use bytes::Bytes;
use http::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use switchyard_core::{Priority, Purpose, QuotaScope};
use switchyard_ledger::command::{SpendReport, SpendTotals, SplitKey};
use switchyard_ledger::state::LedgerState;
use switchyard_ledger::{Command, CommandResponse, LedgerNode, PoolId};

use super::admin::{Right, authenticate};
use super::cluster::ledger_error;
use crate::error::ApiError;
use crate::state::{AppState, SharedState};

type JsonResult = Result<Json<Value>, ApiError>;

const CHAOS_ENV: &str = "SWITCHYARD_CHAOS_ENDPOINTS";

fn writes_enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var(CHAOS_ENV).is_ok_and(|v| v == "1"))
}

fn node(state: &AppState) -> Result<&Arc<LedgerNode>, ApiError> {
    state.cluster.as_ref().ok_or_else(|| {
        ApiError::not_found(
            "cluster_disabled",
            "the replicated ledger is off (cluster.enabled = false)",
        )
    })
}

fn scope_json(scope: &QuotaScope) -> Value {
    json!({"caller": &*scope.caller, "purpose": scope.purpose})
}

fn pools_json(state: &LedgerState) -> Vec<Value> {
    state
        .pools
        .iter()
        .map(|(id, pool)| {
            let (kind, scope, override_id) = match id {
                PoolId::Budget(scope) => ("budget", Some(scope_json(scope)), None),
                PoolId::Override(id) => ("override", None, Some(*id)),
                PoolId::Period(scope, _) => ("period_budget", Some(scope_json(scope)), None),
            };
            let leases: Vec<Value> = pool
                .leases
                .iter()
                .map(|(node, lease)| {
                    json!({
                        "node": node,
                        "epoch": lease.epoch,
                        "granted_total": lease.granted_total,
                        "used_reported": lease.used_reported,
                        "expires_at_ms": lease.expires_at_ms,
                    })
                })
                .collect();
            json!({
                "kind": kind,
                "scope": scope,
                "override_id": override_id,
                "limit": pool.spec.limit_tokens,
                "spent": pool.spent,
                "committed": pool.committed(),
                "closed": pool.closed,
                "leases": leases,
            })
        })
        .collect()
}

fn local_json(state: &LedgerState) -> Value {
    let overrides: Vec<Value> = state
        .overrides
        .records
        .values()
        .map(|r| {
            json!({
                "id": r.id,
                "scope": scope_json(&r.scope),
                "extra_tokens": r.extra_tokens,
                "duration_ms": r.duration_ms,
                "requester": r.requester,
                "approver": r.approver,
                "status": format!("{:?}", r.status).to_lowercase(),
                "until_ms": r.until_ms,
            })
        })
        .collect();
    let affinity: Vec<Value> = state
        .affinity
        .by_prefix
        .values()
        .map(|r| json!({"prefix_key": r.prefix_key, "worker": r.worker, "log_index": r.log_index}))
        .collect();
    let batches: Vec<Value> = state
        .spend
        .applied_batches()
        .map(|(node, boot_id, seq)| json!({"node": node, "boot_id": boot_id, "seq": seq}))
        .collect();
    json!({
        "applied_index": state.last_index,
        "now_ms": state.now_ms,
        "pools": pools_json(state),
        "overrides": overrides,
        "affinity": affinity,
        "spend_batches": batches,
    })
}

/// `GET /admin/ledger/local`: this replica's applied state and Raft role, read locally.
pub async fn local_state(State(state): State<SharedState>, headers: HeaderMap) -> JsonResult {
    authenticate(&state, &headers)?.require(Right::Administer)?;
    let node = node(&state)?;
    let status = node.status();
    let mut body = node.with_applied_state(local_json);
    if let Some(object) = body.as_object_mut() {
        object.insert("node_id".into(), json!(status.node_id));
        object.insert("role".into(), json!(status.role));
        object.insert("leader".into(), json!(status.leader));
        object.insert("term".into(), json!(status.term));
    }
    Ok(Json(body))
}

fn enabled_node<'s>(
    state: &'s AppState,
    headers: &HeaderMap,
) -> Result<&'s Arc<LedgerNode>, ApiError> {
    if !writes_enabled() {
        return Err(ApiError::not_found(
            "chaos_endpoints_disabled",
            format!("test-only endpoint; start the replica with {CHAOS_ENV}=1"),
        ));
    }
    authenticate(state, headers)?.require(Right::Administer)?;
    node(state)
}

fn parse<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request("invalid_request", format!("invalid body: {e}")))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClockBody {
    /// Milliseconds added to this replica's ledger wall clock (negative: behind; 0 resets).
    offset_ms: i64,
}

/// Longest skew the endpoint accepts: a day, far beyond any lease or override.
const MAX_SKEW_MS: i64 = 24 * 3600 * 1000;

/// `PUT /admin/chaos/clock` (test-only): skews the wall clock this replica stamps ledger
/// entries with.
pub async fn skew_clock(
    State(state): State<SharedState>,
    headers: HeaderMap,
    body: Bytes,
) -> JsonResult {
    let node = enabled_node(&state, &headers)?;
    let request: ClockBody = parse(&body)?;
    if request.offset_ms.abs() > MAX_SKEW_MS {
        return Err(ApiError::bad_request(
            "invalid_request",
            format!("offset_ms must be within ±{MAX_SKEW_MS}"),
        ));
    }
    node.wall_clock().set_offset_ms(request.offset_ms);
    tracing::warn!(
        offset_ms = request.offset_ms,
        "ledger wall clock skewed (chaos)"
    );
    Ok(Json(json!({"offset_ms": request.offset_ms})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FlushStallBody {
    /// How long each Raft log flush sleeps before its fsync (0 clears the stall).
    stall_ms: u64,
    /// Only flushes that start within this long from now sleep; absent: until cleared.
    #[serde(default)]
    for_ms: Option<u64>,
    /// Also stall the spend journal's syncs the same way (`false`: Raft log flushes only).
    #[serde(default)]
    journal: bool,
}

/// Longest stall (and window) the endpoint accepts: far beyond any Raft timeout, short
/// enough that a forgotten call cannot wedge a test replica for long.
const MAX_FLUSH_STALL_MS: u64 = 60_000;
const MAX_FLUSH_STALL_WINDOW_MS: u64 = 600_000;

/// `PUT /admin/chaos/flush-stall` (test-only): every Raft log flush of this replica that
/// starts within `for_ms` sleeps `stall_ms` before its fsync, standing in for a disk whose
/// fsync stalls; with `"journal": true` the spend journal's syncs too; `{"stall_ms": 0}`
/// clears both.
pub async fn flush_stall(
    State(state): State<SharedState>,
    headers: HeaderMap,
    body: Bytes,
) -> JsonResult {
    let node = enabled_node(&state, &headers)?;
    let request: FlushStallBody = parse(&body)?;
    if request.stall_ms > MAX_FLUSH_STALL_MS {
        return Err(ApiError::bad_request(
            "invalid_request",
            format!("stall_ms must be at most {MAX_FLUSH_STALL_MS}"),
        ));
    }
    match request.for_ms {
        Some(_) if request.stall_ms == 0 => {
            return Err(ApiError::bad_request(
                "invalid_request",
                "for_ms needs a stall_ms above 0 (send {\"stall_ms\": 0} alone to clear)",
            ));
        }
        Some(0) => {
            return Err(ApiError::bad_request(
                "invalid_request",
                "for_ms must be at least 1 (omit it to stall until cleared)",
            ));
        }
        Some(ms) if ms > MAX_FLUSH_STALL_WINDOW_MS => {
            return Err(ApiError::bad_request(
                "invalid_request",
                format!("for_ms must be at most {MAX_FLUSH_STALL_WINDOW_MS}"),
            ));
        }
        _ => {}
    }
    let stall = Duration::from_millis(request.stall_ms);
    let window = request.for_ms.map(Duration::from_millis);
    node.test_log_flush_stall().set(stall, window);
    // Without `journal` a call clears a journal stall an earlier call set.
    let journal_stall = if request.journal {
        stall
    } else {
        Duration::ZERO
    };
    node.test_journal_sync_stall().set(journal_stall, window);
    tracing::warn!(
        stall_ms = request.stall_ms,
        for_ms = request.for_ms,
        journal = request.journal,
        "Raft log flushes stalled before their fsync (chaos)"
    );
    Ok(Json(
        json!({"stall_ms": request.stall_ms, "for_ms": request.for_ms, "journal": request.journal}),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpendReportBody {
    /// Reporter identity in the ledger's `(node, boot, seq)` idempotency key.
    reporter_node: u64,
    boot_id: u64,
    seq: u64,
    caller: String,
    #[serde(default)]
    purpose: Option<Purpose>,
    #[serde(default)]
    priority: Option<Priority>,
    tokens: u64,
}

/// `POST /admin/ledger/spend-report` (test-only): one idempotent spend batch of one line.
pub async fn spend_report(
    State(state): State<SharedState>,
    headers: HeaderMap,
    body: Bytes,
) -> JsonResult {
    let node = enabled_node(&state, &headers)?;
    let request: SpendReportBody = parse(&body)?;
    let minute = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() / 60)
        .unwrap_or(0);
    let line = (
        SplitKey {
            caller: Arc::from(request.caller.as_str()),
            purpose: request.purpose.unwrap_or(Purpose::Business),
            priority: request.priority.unwrap_or(Priority::P1),
            under_override: false,
        },
        SpendTotals {
            tokens: request.tokens,
            requests: 1,
        },
    );
    let command = Command::ReportSpend(SpendReport {
        node: request.reporter_node,
        boot_id: request.boot_id,
        seq: request.seq,
        minute,
        lines: vec![line],
    });
    match node.write(command).await.map_err(ledger_error)? {
        CommandResponse::Spend { accepted } => Ok(Json(json!({"accepted": accepted}))),
        CommandResponse::Rejected { reason } => {
            Err(ApiError::conflict("rejected_by_ledger", reason))
        }
        other => Err(ApiError::internal(format!(
            "unexpected ledger answer {other:?}"
        ))),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AffinityBody {
    prefix_key: u64,
    worker: String,
}

/// `POST /admin/ledger/affinity` (test-only): a prefix-affinity record, as a migration
/// would append it; every replica's router applies it.
pub async fn record_affinity(
    State(state): State<SharedState>,
    headers: HeaderMap,
    body: Bytes,
) -> JsonResult {
    let node = enabled_node(&state, &headers)?;
    let request: AffinityBody = parse(&body)?;
    node.record_affinity(request.prefix_key, "", &request.worker, &[], "chaos")
        .await
        .map_err(ledger_error)?;
    Ok(Json(
        json!({"recorded": request.prefix_key, "worker": request.worker}),
    ))
}
