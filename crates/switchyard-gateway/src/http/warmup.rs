//! Admin API of warmup and degradation: the warmup report and plan, reading and forcing the
//! degradation level (audited, with who and why), and drills.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use std::sync::Arc;
use switchyard_warmup::{DegradationError, Level};

use super::admin::{Right, authenticate};
use crate::error::ApiError;
use crate::state::SharedState;

/// `GET /admin/warmup`: tiers, limits, the plan against the budget (with the over-plan
/// report and its options), cost ratio, hit rates, demotion candidates, the running wave,
/// and where each resource's last warmup landed.
pub async fn warmup(
    State(state): State<SharedState>,
    headers: HeaderMap,
) -> Result<Json<serde_json::Value>, ApiError> {
    authenticate(&state, &headers)?.require(Right::Read)?;
    let manager = &state.warmup.manager;
    let report = manager.report();
    let configured: Vec<Arc<str>> = report.resources.iter().map(|r| r.name.clone()).collect();
    let mut body = serde_json::to_value(&report).map_err(|e| ApiError::internal(e.to_string()))?;
    body["landings"] = json!(state.warmup.landings.snapshot(&configured));
    Ok(Json(body))
}

/// `GET /admin/degradation`: the level in force, its effects, a failed or forced level,
/// the signals and target, when recovery may next step, and the audit trail.
pub async fn degradation(
    State(state): State<SharedState>,
    headers: HeaderMap,
) -> Result<Json<serde_json::Value>, ApiError> {
    authenticate(&state, &headers)?.require(Right::Read)?;
    let status = state.warmup.controller.status().await;
    Ok(Json(
        serde_json::to_value(status).map_err(|e| ApiError::internal(e.to_string()))?,
    ))
}

/// `{"level": 3, "reason": "..."}` pins a level; `{"release": true, "reason": "..."}` lets the
/// signals drive again.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ForceRequest {
    #[serde(default)]
    level: Option<Level>,
    #[serde(default)]
    release: bool,
    reason: String,
}

/// `PUT /admin/degradation`. A level that could not be entered (a must-succeed action
/// failed) answers 500 with the report of every action: it is not in force.
pub async fn force_degradation(
    State(state): State<SharedState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let who = authenticate(&state, &headers)?.require(Right::Operate)?;
    let request: ForceRequest = json_body(
        &body,
        r#"{"level": 0-3, "reason": "..."} or {"release": true, "reason": "..."}"#,
    )?;
    if request.reason.trim().is_empty() {
        return Err(ApiError::bad_request(
            "invalid_request",
            "a forced level or release needs a reason (it is audited)",
        ));
    }
    let controller = &state.warmup.controller;
    match (request.level, request.release) {
        (Some(level), false) => {
            let report = controller
                .force(level, &who, &request.reason)
                .await
                .map_err(degradation_error)?;
            let status = if report.ok {
                StatusCode::OK
            } else {
                StatusCode::INTERNAL_SERVER_ERROR
            };
            Ok((status, Json(json!({"forced": report}))).into_response())
        }
        (None, true) => {
            let released = controller
                .release(&who, &request.reason)
                .await
                .map_err(degradation_error)?;
            Ok(Json(json!({"released": released})).into_response())
        }
        _ => Err(ApiError::bad_request(
            "invalid_request",
            "give either `level` or `release: true`",
        )),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DrillRequest {
    level: Level,
}

/// `POST /admin/degradation/drill {"level": N}`: runs the level through the production
/// detection and action path, reports every action, detection and entry time, and recovers
/// to the previous level without a restart. 409 while a level is forced.
pub async fn drill(
    State(state): State<SharedState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    let who = authenticate(&state, &headers)?.require(Right::Operate)?;
    let request: DrillRequest = json_body(&body, r#"{"level": 0-3}"#)?;
    let report = state
        .warmup
        .controller
        .drill(request.level, &who)
        .await
        .map_err(degradation_error)?;
    Ok(Json(json!({"drill": report})))
}

fn json_body<T: DeserializeOwned>(body: &[u8], shape: &str) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request("invalid_request", format!("expected {shape}: {e}")))
}

fn degradation_error(error: DegradationError) -> ApiError {
    match error {
        DegradationError::Forced => ApiError::conflict("degradation_forced", error.to_string()),
        DegradationError::Anonymous(_) | DegradationError::Config(_) => {
            ApiError::bad_request("invalid_request", error.to_string())
        }
        DegradationError::Metrics(_) => ApiError::internal(error.to_string()),
    }
}
