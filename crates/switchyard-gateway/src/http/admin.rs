//! Control-plane endpoints, guarded by the admin API key.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::json;
use switchyard_workers::{DrainOutcome, RegistryError, WorkerHandle, WorkerSpec};

use crate::config::AdminRole;
use crate::error::ApiError;
use crate::reload::{ReloadError, set_path};
use crate::state::{AppState, SharedState};

/// What a handler needs its caller to be allowed to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Right {
    /// Read status, config, quotas, overrides and audit logs.
    Read,
    /// Set quotas, propose overrides, add and drain workers, change the live config.
    Operate,
    /// Approve or revoke overrides.
    Approve,
    /// Cluster membership, fault injection, and anything not mapped to a narrower right.
    Administer,
}

impl Right {
    fn as_str(self) -> &'static str {
        match self {
            Right::Read => "read",
            Right::Operate => "operate",
            Right::Approve => "approve",
            Right::Administer => "administer",
        }
    }
}

/// Whether `role` carries `right`.
pub(crate) fn allows(role: AdminRole, right: Right) -> bool {
    match role {
        AdminRole::Admin => true,
        AdminRole::Viewer => right == Right::Read,
        AdminRole::Operator => matches!(right, Right::Read | Right::Operate),
        AdminRole::Approver => matches!(right, Right::Read | Right::Approve),
    }
}

/// The holder of a valid admin key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Principal {
    pub name: String,
    pub role: AdminRole,
}

impl Principal {
    /// The principal's name if its role carries `right`, else 403.
    pub(crate) fn require(self, right: Right) -> Result<String, ApiError> {
        if allows(self.role, right) {
            return Ok(self.name);
        }
        Err(ApiError::forbidden(
            "insufficient_role",
            format!(
                "principal `{}` has role `{}`, which may not {} here",
                self.name,
                self.role.as_str(),
                right.as_str()
            ),
        ))
    }
}

/// Checks `Authorization: Bearer <key>` (or `x-api-key`) against the admin keys and answers
/// who holds it and with which role: named keys carry their configured role, the unnamed key
/// (`admin.api_key` or `SWITCHYARD_ADMIN_API_KEY`) is `admin`.
pub(crate) fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<Principal, ApiError> {
    if state.admin_keys.is_empty() {
        return Err(ApiError::forbidden(
            "admin_disabled",
            "the admin API is disabled: set admin.api_key, admin.keys or SWITCHYARD_ADMIN_API_KEY",
        ));
    }
    let presented = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| {
            headers
                .get(crate::headers::API_KEY)
                .and_then(|v| v.to_str().ok())
        });
    let Some(key) = presented else {
        return Err(ApiError::unauthorized(
            "the admin API needs `Authorization: Bearer <admin key>`",
        ));
    };
    let Some((name, role)) = state.admin_keys.holder(key) else {
        return Err(ApiError::unauthorized("the admin API key is not valid"));
    };
    Ok(Principal { name, role })
}

/// `authenticate` for handlers not mapped to a narrower right: only `admin` passes.
pub(crate) fn authorize(state: &AppState, headers: &HeaderMap) -> Result<String, ApiError> {
    authenticate(state, headers)?.require(Right::Administer)
}

/// Compares secrets without an early exit that would leak the matching prefix length.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn worker_json(worker: &WorkerHandle) -> serde_json::Value {
    json!({
        "id": worker.id().0,
        "name": worker.name(),
        "url": worker.base_url(),
        "models": worker.models().map(|m| m.as_ref().clone()),
        "in_flight": worker.in_flight(),
    })
}

pub async fn list_workers(
    State(state): State<SharedState>,
    headers: HeaderMap,
) -> Result<Json<serde_json::Value>, ApiError> {
    authenticate(&state, &headers)?.require(Right::Read)?;
    Ok(Json(json!({"workers": state.stack.registry.snapshot()})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddWorker {
    url: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    models: Option<Vec<String>>,
    #[serde(default)]
    health_path: Option<String>,
    #[serde(default)]
    engine: Option<switchyard_workers::EngineKind>,
}

pub async fn add_worker(
    State(state): State<SharedState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    authenticate(&state, &headers)?.require(Right::Operate)?;
    let request: AddWorker = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(
            "invalid_request",
            format!("invalid worker description: {e}"),
        )
    })?;
    let mut spec = WorkerSpec::parse_flag(&request.url)
        .map_err(|e| ApiError::bad_request("invalid_worker", e.to_string()))?;
    if let Some(name) = request.name {
        spec.name = name;
    }
    spec.models = request.models;
    spec.health_path = request.health_path;
    spec.engine = request.engine;
    let worker = state
        .stack
        .registry
        .add(spec)
        .await
        .map_err(registry_error)?;
    Ok((StatusCode::CREATED, Json(worker_json(&worker))).into_response())
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub struct RemoveQuery {
    /// Wait until the drain has finished and the worker is gone.
    wait: bool,
}

/// Drains the worker: no new requests from now on, in-flight ones finish (up to
/// `health.drain.timeout_ms`), then it leaves the registry. 202 at once, or 200 with the
/// outcome when `?wait=true`.
pub async fn remove_worker(
    State(state): State<SharedState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(query): Query<RemoveQuery>,
) -> Result<Response, ApiError> {
    authenticate(&state, &headers)?.require(Right::Operate)?;
    let drain = state
        .stack
        .registry
        .drain(&name)
        .await
        .map_err(registry_error)?;
    if !query.wait {
        return Ok((StatusCode::ACCEPTED, Json(json!({"draining": name}))).into_response());
    }
    let outcome = match drain.finished().await {
        DrainOutcome::Idle => json!({"outcome": "idle"}),
        DrainOutcome::TimedOut { in_flight } => {
            json!({"outcome": "timed_out", "in_flight": in_flight})
        }
        DrainOutcome::Interrupted => json!({"outcome": "interrupted"}),
    };
    Ok(Json(json!({"removed": name, "drain": outcome})).into_response())
}

fn registry_error(error: RegistryError) -> ApiError {
    match error {
        RegistryError::AlreadyExists(_) => ApiError::conflict("worker_exists", error.to_string()),
        RegistryError::NotFound(_) => ApiError::not_found("worker_not_found", error.to_string()),
        RegistryError::InvalidSpec(_) => ApiError::bad_request("invalid_worker", error.to_string()),
        RegistryError::InvalidConfig(_) => {
            ApiError::bad_request("invalid_config", error.to_string())
        }
        RegistryError::Unavailable(_) | RegistryError::Metrics(_) => {
            ApiError::internal(error.to_string())
        }
    }
}

pub async fn get_config(
    State(state): State<SharedState>,
    headers: HeaderMap,
) -> Result<Json<serde_json::Value>, ApiError> {
    authenticate(&state, &headers)?.require(Right::Read)?;
    // Every secret field (tenant keys, admin keys, the cluster secret) is a `Secret`, which
    // serialises as `<redacted>`: viewers read this, and must not be able to act as a holder.
    let config = serde_json::to_value(state.config().as_ref())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(Json(config))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigChange {
    /// Dotted field path → new value, e.g. `{"retry.max_retries": 1}`.
    set: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    reason: Option<String>,
}

pub async fn put_config(
    State(state): State<SharedState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    let who = authenticate(&state, &headers)?.require(Right::Operate)?;
    let change: ConfigChange = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(
            "invalid_request",
            format!("expected {{\"set\": {{\"path\": value}}, \"reason\": \"...\"}}: {e}"),
        )
    })?;
    let mut next = state.config().as_ref().clone();
    for (path, value) in change.set {
        next = set_path(&next, &path, value)
            .map_err(|e| ApiError::bad_request("invalid_config", e.to_string()))?;
    }
    let changes = state
        .live
        .apply(next, &who, "api", change.reason.as_deref())
        .map_err(|e| match e {
            ReloadError::Invalid(e) => ApiError::bad_request("invalid_config", e.to_string()),
            ReloadError::RestartRequired(_) => {
                ApiError::conflict("restart_required", e.to_string())
            }
        })?;
    Ok(Json(json!({"applied": changes})))
}

pub async fn admission(
    State(state): State<SharedState>,
    headers: HeaderMap,
) -> Result<Json<serde_json::Value>, ApiError> {
    authenticate(&state, &headers)?.require(Right::Read)?;
    let snapshot = serde_json::to_value(state.stack.admission.snapshot())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(Json(snapshot))
}

pub async fn config_audit(
    State(state): State<SharedState>,
    headers: HeaderMap,
) -> Result<Json<serde_json::Value>, ApiError> {
    authenticate(&state, &headers)?.require(Right::Read)?;
    Ok(Json(json!({"entries": state.live.audit().entries()})))
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn constant_time_eq_matches_only_equal_keys() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
    }
}
