//! Warmups through the gateway's own front door. Instance and cache warmups are real
//! 1-token chat completions: tagged with the resource's tags (`purpose=warmup`, the warmup
//! caller and priority), admitted by the same gates, routed by the same policy with the
//! same routing-key inputs a business request for the resource has (session header, `user`,
//! prompt head), retried and metered like any request. Connection warmups open a pooled
//! connection with a cheap GET of the worker's health path; context warmups re-read what
//! the gateway holds (every worker's `/v1/models`). Each reports where it landed and which
//! workers business traffic could reach, so misdirected warmups are caught.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_warmup::{
    ResourceKind, Verdict, ViewReader, WarmupError, WarmupExecutor, WarmupOutcome, WarmupResource,
};
use switchyard_workers::Routability;

use super::business_latency::WarmupTtfts;
use super::landings::Landings;
use crate::error::ApiError;
use crate::headers;
use crate::openai::{self, Route};
use crate::proxy;
use crate::state::Stack;

/// Bound on a warmup answer read back (a 1-token completion is far smaller).
const MAX_ANSWER_BYTES: usize = 1 << 20;
/// A connection or context warmup that takes longer than this failed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) struct GatewayWarmupExecutor {
    stack: Arc<Stack>,
    /// The degradation level in force: a level that allows no warmup refuses them here.
    level: ViewReader,
    landings: Arc<Landings>,
    ttfts: Arc<WarmupTtfts>,
}

impl GatewayWarmupExecutor {
    pub(crate) fn new(
        stack: Arc<Stack>,
        level: ViewReader,
        landings: Arc<Landings>,
        ttfts: Arc<WarmupTtfts>,
    ) -> Self {
        Self {
            stack,
            level,
            landings,
            ttfts,
        }
    }
}

impl WarmupExecutor for GatewayWarmupExecutor {
    async fn warm(&self, resource: &WarmupResource) -> Result<WarmupOutcome, WarmupError> {
        let stack = &self.stack;
        let outcome = match resource.kind {
            ResourceKind::Instance | ResourceKind::Cache => {
                through_front_door(stack, &self.level, resource, &self.ttfts).await
            }
            ResourceKind::Connection => open_connection(stack, resource).await,
            ResourceKind::Context => refresh_models(stack).await,
        };
        self.landings.record(&resource.name, &outcome);
        outcome
    }
}

/// The chat body of an instance or cache warmup. A cache warmup's prompt is the head prefix
/// business chats start with (typically their system prompt), so it is sent as the system
/// message: routing sees the same leading text as those chats. An instance warmup sends its
/// prompt (or a one-word ping) as the user message.
pub(crate) fn warmup_body(resource: &WarmupResource, model: &str) -> Value {
    let target = &resource.target;
    let message = match (resource.kind, target.prompt.as_deref()) {
        (ResourceKind::Cache, Some(prompt)) => json!({"role": "system", "content": prompt}),
        (_, Some(prompt)) => json!({"role": "user", "content": prompt}),
        (_, None) => json!({"role": "user", "content": "ping"}),
    };
    let mut body = json!({
        "model": model,
        "stream": false,
        "max_tokens": 1,
        "messages": [message],
    });
    if let Some(user) = &target.user {
        body["user"] = json!(user);
    }
    body
}

async fn through_front_door(
    stack: &Stack,
    level: &ViewReader,
    resource: &WarmupResource,
    ttfts: &WarmupTtfts,
) -> Result<WarmupOutcome, WarmupError> {
    let model = resource
        .target
        .model
        .as_deref()
        .ok_or_else(|| WarmupError::Failed("the resource names no model".into()))?;
    if level.load().allows(&resource.tags) == Verdict::Fallback {
        return Err(WarmupError::Refused(
            "the degradation level in force allows no warmup".into(),
        ));
    }
    let config = stack.config();
    let mut routing_headers = HeaderMap::new();
    if let Some(session) = &resource.target.session_id {
        let name = HeaderName::try_from(config.routing.routing_key.session_header.as_str())
            .map_err(|e| WarmupError::Failed(format!("session header: {e}")))?;
        let value = HeaderValue::from_str(session)
            .map_err(|e| WarmupError::Failed(format!("session id: {e}")))?;
        routing_headers.insert(name, value);
    }
    let request_timeout = config.upstream.request_timeout();
    drop(config);
    let body = serde_json::to_vec(&warmup_body(resource, model))
        .map_err(|e| WarmupError::Failed(e.to_string()))?;
    let bytes = Bytes::from(body);
    let parsed = openai::parse(Route::ChatCompletions, &bytes)
        .map_err(|e| WarmupError::Failed(e.message))?;
    let reachable = business_reachable(stack, Some(model));
    let request_id = format!("warmup-{}", uuid::Uuid::new_v4());
    let started = Instant::now();
    let tags = &resource.tags;
    let response = proxy::dispatch_warmup(
        stack,
        tags,
        &parsed,
        bytes,
        &routing_headers,
        &request_id,
        started,
    )
    .await
    .map_err(front_door_error)?;
    let status = response.status();
    let landed_on = response
        .headers()
        .get(headers::WORKER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let read = async {
        let mut body = http_body_util::Limited::new(response.into_body(), MAX_ANSWER_BYTES);
        let (mut answer, mut first_frame_seen) = (Vec::new(), false);
        while let Some(frame) = body.frame().await {
            if let Some(data) = frame?.data_ref() {
                if !first_frame_seen {
                    // The moment the gateway's TTFT histogram counted this warmup.
                    first_frame_seen = true;
                    ttfts.record(started.elapsed());
                }
                answer.extend_from_slice(data);
            }
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(answer)
    };
    let answer = match tokio::time::timeout(request_timeout, read).await {
        Err(_) => return Err(WarmupError::TimedOut),
        Ok(Err(error)) => return Err(WarmupError::Failed(format!("answer unreadable: {error}"))),
        Ok(Ok(answer)) => answer,
    };
    if !status.is_success() {
        let excerpt: String = String::from_utf8_lossy(&answer).chars().take(200).collect();
        return Err(WarmupError::Failed(format!(
            "worker `{}` answered {status}: {excerpt}",
            landed_on.as_deref().unwrap_or("?")
        )));
    }
    Ok(WarmupOutcome {
        landed_on,
        business_reachable: reachable,
        tokens_spent: total_tokens(&answer),
    })
}

/// The workers business traffic for `model` can reach now: those serving it that pass the
/// prefilters (`None`: any model).
fn business_reachable(stack: &Stack, model: Option<&str>) -> Vec<String> {
    stack
        .registry
        .directory()
        .snapshot()
        .iter()
        .filter(|w| model.is_none_or(|m| w.serves(m)))
        .filter(|w| w.routability() == Routability::Routable)
        .map(|w| w.name().to_string())
        .collect()
}

/// Refusals by the front door (gates, queues, budgets) are `Refused`; nothing to route to is
/// `Unroutable`; the rest failed on the way to or at the worker.
fn front_door_error(error: ApiError) -> WarmupError {
    let message = format!("{} ({})", error.message, error.code);
    match error.code {
        "no_workers" | "no_routable_worker" | "model_not_found" => WarmupError::Unroutable(message),
        "upstream_timeout" => WarmupError::TimedOut,
        _ if error.kind == "upstream_error" || error.kind == "internal_error" => {
            WarmupError::Failed(message)
        }
        _ => WarmupError::Refused(message),
    }
}

fn total_tokens(answer: &[u8]) -> u64 {
    let Ok(body) = serde_json::from_slice::<Value>(answer) else {
        return 0;
    };
    let usage = &body["usage"];
    usage["total_tokens"].as_u64().unwrap_or_else(|| {
        usage["prompt_tokens"].as_u64().unwrap_or(0)
            + usage["completion_tokens"].as_u64().unwrap_or(0)
    })
}

/// A cheap GET through the pooled client leaves a keep-alive connection to the worker.
/// No quota is spent, so it does not pass the admission gates.
async fn open_connection(
    stack: &Stack,
    resource: &WarmupResource,
) -> Result<WarmupOutcome, WarmupError> {
    let name = resource.target.worker.as_deref().unwrap_or_default();
    let worker = stack.registry.directory().find(name).ok_or_else(|| {
        WarmupError::Unroutable(format!("no worker named `{name}` is registered"))
    })?;
    let path = match worker.health_path() {
        Some(path) => path.to_string(),
        None => stack.registry.health_config().health.path.clone(),
    };
    get(stack, &worker, &path).await?;
    Ok(WarmupOutcome {
        landed_on: Some(worker.name().to_string()),
        business_reachable: business_reachable(stack, None),
        tokens_spent: 0,
    })
}

/// Re-reads every worker's `/v1/models`. The gateway routes by the models a worker
/// announced when it joined; a worker that now announces others is an error to act on
/// (re-add it), not something to paper over.
async fn refresh_models(stack: &Stack) -> Result<WarmupOutcome, WarmupError> {
    let workers = stack.registry.directory().snapshot();
    let mut drifted = Vec::new();
    for worker in workers.iter().filter(|w| w.routability().is_routable()) {
        let answer = get(stack, worker, "/v1/models").await?;
        let body: Value = serde_json::from_slice(&answer).map_err(|e| {
            WarmupError::Failed(format!("`{}` /v1/models is not JSON: {e}", worker.name()))
        })?;
        let mut announced: Vec<String> = body["data"]
            .as_array()
            .map(|models| {
                models
                    .iter()
                    .filter_map(|m| m["id"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        announced.sort();
        if let Some(known) = worker.models() {
            let mut known = known.as_ref().clone();
            known.sort();
            if known != announced {
                drifted.push(format!(
                    "`{}` announces {announced:?}, the gateway routes by {known:?}",
                    worker.name()
                ));
            }
        }
    }
    if !drifted.is_empty() {
        return Err(WarmupError::Failed(format!(
            "model lists changed: {}",
            drifted.join("; ")
        )));
    }
    Ok(WarmupOutcome::default())
}

async fn get(
    stack: &Stack,
    worker: &switchyard_workers::WorkerHandle,
    path: &str,
) -> Result<Bytes, WarmupError> {
    let name = worker.name();
    let uri = worker
        .uri_for(path)
        .map_err(|e| WarmupError::Failed(format!("`{name}`: {e}")))?;
    let request = Request::builder()
        .method(Method::GET)
        .uri(uri)
        .body(Full::new(Bytes::new()))
        .map_err(|e| WarmupError::Failed(e.to_string()))?;
    let exchange = async {
        let response = stack
            .client
            .request(request)
            .await
            .map_err(|e| WarmupError::Failed(format!("`{name}` {path}: {e}")))?;
        let status = response.status();
        let body = http_body_util::Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| WarmupError::Failed(format!("`{name}` {path}: {e}")))?
            .to_bytes();
        if status.is_success() {
            Ok(body)
        } else {
            Err(WarmupError::Failed(format!(
                "`{name}` {path} answered {status}"
            )))
        }
    };
    tokio::time::timeout(PROBE_TIMEOUT, exchange)
        .await
        .map_err(|_| WarmupError::TimedOut)?
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_router::RoutingKeyConfig;
    use switchyard_warmup::{ResourceConfig, Tier, WarmupConfig};

    #[test]
    fn cache_warmups_send_their_prefix_as_the_system_message() {
        let mut config = ResourceConfig::new("sys", ResourceKind::Cache, Tier::L2);
        config.target.model = Some("m".into());
        config.target.prompt = Some("You are terse.".into());
        config.target.user = Some("u-7".into());
        let keys = RoutingKeyConfig::default();
        let resource = WarmupResource::from_config(&config, &keys, &WarmupConfig::default());
        let body = warmup_body(&resource, "m");
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(body["messages"][0]["content"], "You are terse.");
        assert_eq!(
            (body["max_tokens"].as_u64(), body["user"].as_str()),
            (Some(1), Some("u-7"))
        );
        let parsed = openai::parse(Route::ChatCompletions, body.to_string().as_bytes()).unwrap();
        assert!(parsed.prompt.starts_with("<|system|>You are terse."));
    }

    #[test]
    fn usage_and_errors_are_read_as_the_manager_needs_them() {
        assert_eq!(total_tokens(br#"{"usage":{"total_tokens":9}}"#), 9);
        assert_eq!(
            total_tokens(br#"{"usage":{"prompt_tokens":4,"completion_tokens":1}}"#),
            5
        );
        assert_eq!(total_tokens(b"nope"), 0);
        let unroutable = ApiError::unavailable("no_routable_worker", "none", 1);
        assert!(matches!(
            front_door_error(unroutable),
            WarmupError::Unroutable(_)
        ));
        let refused = ApiError::unavailable("p2_paused", "paused", 1);
        assert!(matches!(front_door_error(refused), WarmupError::Refused(_)));
        let upstream = ApiError::bad_gateway("upstream_error", "500");
        assert!(matches!(front_door_error(upstream), WarmupError::Failed(_)));
    }
}
