//! Choosing a worker: the model's workers, minus those the prefilter chain drops
//! (draining, unhealthy, circuit-open, hung, latency-overloaded) and those already tried for this
//! request, then the routing policy. Each filter reason and each cache outcome is counted.

use std::sync::Arc;
use switchyard_core::WorkerId;
use switchyard_router::{Candidate, Decision, ReportedLoad, RouteRequest};
use switchyard_workers::{Routability, WorkerHandle};

use super::context::RequestContext;
use super::context_fit;
use crate::config::Fallback;
use crate::error::ApiError;
use crate::openai::{ParsedRequest, Route};
use crate::state::Stack;

/// Seconds a client should wait before retrying when nothing can serve it.
const NO_WORKER_RETRY_AFTER: u64 = 1;

fn reason_label(routability: Routability) -> &'static str {
    match routability {
        Routability::Routable => "routable",
        Routability::Draining => "draining",
        Routability::Unhealthy => "unhealthy",
        Routability::CircuitOpen => "circuit_open",
        Routability::Hung => "hung",
        Routability::Overloaded => "overloaded",
    }
}

/// The selection stage for one request: asked for a worker again on every retry, each time
/// without those already tried.
pub(super) struct Selector<'a> {
    stack: &'a Stack,
    route: Route,
    request: &'a ParsedRequest,
    /// The client's session id (`routing.routing_key.session_header`), a routing-key input.
    session_id: Option<&'a str>,
}

impl<'a> Selector<'a> {
    pub(super) fn new(ctx: &RequestContext<'a>, request: &'a ParsedRequest) -> Self {
        let session_id = ctx
            .client_headers
            .get(
                ctx.stack
                    .config()
                    .routing
                    .routing_key
                    .session_header
                    .as_str(),
            )
            .and_then(|v| v.to_str().ok());
        Self {
            stack: ctx.stack,
            route: ctx.route,
            request,
            session_id,
        }
    }

    pub(super) fn next(
        &self,
        exclude: &[WorkerId],
    ) -> Result<(Arc<WorkerHandle>, Decision), ApiError> {
        select_worker(
            self.stack,
            self.route,
            self.request,
            self.session_id,
            exclude,
        )
    }
}

/// Picks the worker for a request. Answers 404 for a model no worker serves, 400 for a request
/// no worker's context holds, and 503 (with `Retry-After`) when none can take it.
pub fn select_worker(
    stack: &Stack,
    route: Route,
    request: &ParsedRequest,
    session_id: Option<&str>,
    exclude: &[WorkerId],
) -> Result<(Arc<WorkerHandle>, Decision), ApiError> {
    let workers = stack.registry.directory().snapshot();
    if workers.is_empty() {
        return Err(ApiError::unavailable(
            "no_workers",
            "no inference workers are registered",
            NO_WORKER_RETRY_AFTER,
        ));
    }
    let serving: Vec<&Arc<WorkerHandle>> = workers
        .iter()
        .filter(|w| w.serves(&request.model))
        .collect();
    if serving.is_empty() {
        return Err(ApiError::model_not_found(&request.model));
    }
    let serving = fitting(stack, request, route, serving)?;
    let metrics = &stack.metrics;
    let mut candidates = Vec::with_capacity(serving.len());
    let mut filtered: Vec<(&Arc<WorkerHandle>, Routability)> = Vec::new();
    for worker in serving.iter().filter(|w| !exclude.contains(&w.id())) {
        match worker.routability() {
            Routability::Routable => candidates.push(Candidate {
                id: worker.id(),
                in_flight: worker.in_flight(),
                reported: reported_load(worker),
            }),
            reason => filtered.push((worker, reason)),
        }
    }
    count_filtered(stack, &filtered);
    if candidates.is_empty() {
        return fallback(stack, &filtered);
    }
    let route_request = RouteRequest {
        prompt: &request.prompt,
        session_id,
        user: request.user.as_deref(),
    };
    let decision = stack
        .policy
        .select(&route_request, &candidates)
        .ok_or_else(|| ApiError::internal("routing policy returned no worker"))?;
    metrics
        .routing_decisions
        .with_label_values(&[stack.policy.name(), decision.branch])
        .inc();
    count_cache_outcome(stack, &decision);
    let worker = serving
        .into_iter()
        .find(|w| w.id() == decision.worker)
        .cloned()
        .ok_or_else(|| {
            ApiError::internal("routing policy chose a worker that is not a candidate")
        })?;
    Ok((worker, decision))
}

/// The serving workers whose stated context holds the request (all of them for routes where
/// fit is not judged); a 400 when none does.
fn fitting<'w>(
    stack: &Stack,
    request: &ParsedRequest,
    route: Route,
    serving: Vec<&'w Arc<WorkerHandle>>,
) -> Result<Vec<&'w Arc<WorkerHandle>>, ApiError> {
    if !context_fit::applies(route) {
        return Ok(serving);
    }
    let needed = request.context_needed();
    if let Some(longest) = context_fit::longest_if_none_fits(&serving, needed) {
        stack
            .metrics
            .routing_decisions
            .with_label_values(&["prefilter", "context_too_long"])
            .inc();
        return Err(request.context_refusal(longest));
    }
    let before = serving.len();
    let fitting: Vec<_> = serving
        .into_iter()
        .filter(|w| context_fit::fits(w, needed))
        .collect();
    let dropped = before - fitting.len();
    if dropped > 0 {
        stack
            .metrics
            .workers_filtered
            .with_label_values(&["context_too_short"])
            .inc_by(dropped as u64);
    }
    Ok(fitting)
}

/// The worker's own load gauges from the last scrape; None unless it reports both the running
/// batch and the queue (an engine reporting neither says nothing about saturation).
fn reported_load(worker: &WorkerHandle) -> Option<ReportedLoad> {
    let load = worker.engine_load()?;
    let count = |value: f64| value.max(0.0).round() as u64;
    Some(ReportedLoad {
        running: count(load.running?),
        queued: count(load.queued?),
    })
}

/// One counter update per reason present, not per filtered worker: label lookups hash.
fn count_filtered(stack: &Stack, filtered: &[(&Arc<WorkerHandle>, Routability)]) {
    let metrics = &stack.metrics;
    metrics.filtered_per_request.observe(filtered.len() as f64);
    if filtered.is_empty() {
        return;
    }
    let mut counts = [0u64; 5];
    for (_, reason) in filtered {
        let slot = match reason {
            Routability::Draining => 0,
            Routability::Unhealthy => 1,
            Routability::CircuitOpen => 2,
            Routability::Overloaded | Routability::Routable => 3,
            Routability::Hung => 4,
        };
        counts[slot] += 1;
    }
    for (slot, label) in [
        "draining",
        "unhealthy",
        "circuit_open",
        "overloaded",
        "hung",
    ]
    .iter()
    .enumerate()
    {
        if counts[slot] > 0 {
            metrics
                .workers_filtered
                .with_label_values(&[label])
                .inc_by(counts[slot]);
        }
    }
}

/// A *logical* hit (the prompt's prefix is cached on some worker) becomes a
/// *physical* hit only if the request lands there; a *virtual* hit is a logical hit whose
/// holder was filtered out — the hidden cost of overload filtering, made visible.
fn count_cache_outcome(stack: &Stack, decision: &Decision) {
    let Some(found) = decision.prefix_match else {
        return;
    };
    let threshold = stack.config().routing.cache_aware.match_threshold;
    if found.matched_ratio <= threshold {
        return;
    }
    let hits = &stack.metrics.prefix_hits;
    hits.with_label_values(&["logical"]).inc();
    if found.holder == decision.worker {
        hits.with_label_values(&["physical"]).inc();
    }
    if !found.holder_is_candidate {
        hits.with_label_values(&["virtual"]).inc();
    }
}

fn fallback(
    stack: &Stack,
    filtered: &[(&Arc<WorkerHandle>, Routability)],
) -> Result<(Arc<WorkerHandle>, Decision), ApiError> {
    let reasons: Vec<String> = filtered
        .iter()
        .map(|(w, r)| format!("{} {}", w.name(), reason_label(*r)))
        .collect();
    let refuse = || {
        ApiError::unavailable(
            "no_routable_worker",
            if reasons.is_empty() {
                "no worker can take this request now".to_string()
            } else {
                format!(
                    "no worker can take this request now ({})",
                    reasons.join(", ")
                )
            },
            NO_WORKER_RETRY_AFTER,
        )
    };
    if stack.config().prefilter.fallback == Fallback::Reject {
        return Err(refuse());
    }
    // Degraded but alive beats nothing; draining and circuit-open workers stay excluded.
    let chosen = filtered
        .iter()
        .filter(|(_, r)| matches!(r, Routability::Unhealthy | Routability::Overloaded))
        .min_by_key(|(w, _)| w.in_flight())
        .map(|(w, _)| Arc::clone(w))
        .ok_or_else(refuse)?;
    stack
        .metrics
        .routing_decisions
        .with_label_values(&["prefilter", "fallback_least_loaded"])
        .inc();
    let decision = Decision {
        worker: chosen.id(),
        branch: "fallback_least_loaded",
        prefix_match: None,
        key_source: None,
    };
    Ok((chosen, decision))
}

#[cfg(test)]
mod tests {
    use crate::openai::{Route, parse};
    use std::sync::Arc;
    use switchyard_core::WallClock;
    use switchyard_core::WorkerId;
    use switchyard_router::{
        CacheAwarePolicy, Candidate, DiscardAffinity, RouteRequest, RoutingConfig, RoutingPolicy,
        USER_TURN_MARKER,
    };

    fn replica() -> CacheAwarePolicy {
        let config = RoutingConfig::default();
        let policy = CacheAwarePolicy::new(
            config.cache_aware.clone(),
            &config.consistent_hash,
            config.routing_key.clone(),
            WallClock::system(),
            Arc::new(DiscardAffinity),
        )
        .unwrap();
        for id in 0..4 {
            policy.worker_added(WorkerId(id), &format!("w{id}"));
        }
        policy
    }

    /// The router names a conversation by the opening of the prompt this gateway flattens:
    /// two replicas that each see one turn, with opposite load views, pick the same worker.
    #[test]
    fn flattened_turns_of_one_conversation_route_alike_on_two_replicas() {
        let system = "be brief and precise. ".repeat(20);
        let one = format!(
            r#"{{"model":"m","user":"u7","messages":[{{"role":"system","content":"{system}"}},{{"role":"user","content":"hi"}}]}}"#
        );
        let two = format!(
            r#"{{"model":"m","user":"u7","messages":[{{"role":"system","content":"{system}"}},{{"role":"user","content":"hi"}},{{"role":"assistant","content":"hello"}},{{"role":"user","content":"more"}}]}}"#
        );
        let one = parse(Route::ChatCompletions, one.as_bytes()).unwrap();
        let two = parse(Route::ChatCompletions, two.as_bytes()).unwrap();
        assert!(one.prompt.contains(USER_TURN_MARKER));
        let request = |prompt| RouteRequest {
            prompt,
            session_id: None,
            user: Some("u7"),
        };
        let idle: Vec<Candidate> = (0..4)
            .map(|id| Candidate {
                id: WorkerId(id),
                in_flight: 0,
                reported: None,
            })
            .collect();
        let home = replica()
            .select(&request(&one.prompt), &idle)
            .unwrap()
            .worker;
        let busy_home: Vec<Candidate> = idle
            .iter()
            .map(|c| Candidate {
                in_flight: if c.id == home { 6 } else { 0 },
                ..*c
            })
            .collect();
        let second = replica().select(&request(&two.prompt), &busy_home).unwrap();
        assert_eq!(second.worker, home, "{}", second.branch);
    }
}
