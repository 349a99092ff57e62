//! Body: the whole request body, read within `server.max_body_bytes` (413),
//! `listener.body_read_timeout_ms` (408) and the gateway's budget for bodies held before
//! admission (503, `listener.max_pending_body_bytes`).

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use http_body_util::BodyExt;
use std::sync::Arc;
use std::time::Duration;

use super::body_budget::{BodyBudget, BodyHold};
use super::context::RequestContext;
use crate::error::ApiError;

/// Seconds a client refused for the body budget is told to wait.
const BUDGET_RETRY_AFTER_SECS: u64 = 1;

/// The client's body under the limits in force. The hold is kept until the response's
/// headers are out: the body waits for admission inside it.
pub(super) async fn read_request(
    ctx: &RequestContext<'_>,
    budget: &Arc<BodyBudget>,
    body: Body,
) -> Result<(Bytes, BodyHold), ApiError> {
    let (limit, deadline) = {
        let config = ctx.stack.config();
        (
            config.server.max_body_bytes,
            config.listener.body_read_timeout(),
        )
    };
    read(ctx.client_headers, body, limit, budget, deadline).await
}

/// Reads the whole request body within `deadline`, refusing with 413 as soon as it is known
/// to exceed `limit` (from `content-length` before reading, or while reading), with 503 when
/// the bytes would pass the gateway's budget for held bodies, and with 408 when it arrives
/// too slowly. The returned hold keeps the body's bytes counted until it is dropped.
pub async fn read(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    budget: &Arc<BodyBudget>,
    deadline: Duration,
) -> Result<(Bytes, BodyHold), ApiError> {
    let declared = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64) {
        budget.count_refusal("too_large");
        return Err(ApiError::payload_too_large(limit));
    }
    let Some(mut hold) = budget.hold(declared.unwrap_or(0)) else {
        return Err(over_budget(budget));
    };
    let collect = async {
        let mut body = body;
        let mut bytes = BytesMut::with_capacity(declared.map_or(0, |d| d as usize));
        let mut held = declared.unwrap_or(0);
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|error| {
                ApiError::bad_request(
                    "body_read_failed",
                    format!("could not read the request body: {error}"),
                )
            })?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if bytes.len() + data.len() > limit {
                budget.count_refusal("too_large");
                return Err(ApiError::payload_too_large(limit));
            }
            bytes.extend_from_slice(&data);
            let now = bytes.len() as u64;
            if now > held {
                if !hold.grow(now - held) {
                    return Err(over_budget(budget));
                }
                held = now;
            }
        }
        Ok(bytes.freeze())
    };
    match tokio::time::timeout(deadline, collect).await {
        Ok(Ok(bytes)) => Ok((bytes, hold)),
        Ok(Err(error)) => Err(error),
        Err(_) => {
            budget.count_refusal("timeout");
            Err(ApiError::request_timeout(format!(
                "the request body did not arrive within {} ms",
                deadline.as_millis()
            )))
        }
    }
}

fn over_budget(budget: &BodyBudget) -> ApiError {
    budget.count_refusal("budget");
    ApiError::unavailable(
        "request_bodies_over_budget",
        "the gateway holds too many request bytes awaiting admission; retry shortly",
        BUDGET_RETRY_AFTER_SECS,
    )
}
