//! The model downgrade chain: the first link with a routable worker (and, when only warmed
//! answers are served, a warm resource), the request rewritten for it (chat bodies normalised
//! to its profile), and the disclosure headers; or the cache fallback, or the friendly error.

use bytes::Bytes;
use serde_json::json;
use switchyard_warmup::downgrade::{Notice, normalise_chat};
use switchyard_warmup::{
    DegradationConfig, DowngradeRequest, DowngradeStep, degraded_headers, plan_downgrade,
};
use switchyard_workers::Routability;

use super::answer::record;
use super::request_text::RequestText;
use crate::error::ApiError;
use crate::openai::{self, ParsedRequest, Route};
use crate::proxy::context::RequestContext;
use crate::state::{Stack, WarmupRuntime};

/// The chain walk asked for.
pub(super) struct Wanted<'a> {
    pub(super) alias: &'a str,
    /// Links to pass over (the caller's own budget degrades it further).
    pub(super) skip: usize,
    /// Only a model with a warm resource for this request will do.
    pub(super) warm_only: bool,
}

pub(super) enum Outcome {
    /// Forward to a model of the chain: the rewritten request when it is not the alias.
    Forward {
        retargeted: Option<(ParsedRequest, Bytes)>,
        disclosure: Vec<(&'static str, String)>,
    },
    CacheFallback,
    /// Recorded already.
    FriendlyError,
}

pub(super) fn follow(
    ctx: &RequestContext<'_>,
    runtime: &WarmupRuntime,
    degradation: &DegradationConfig,
    wanted: &Wanted<'_>,
    request: &mut RequestText,
) -> Result<Outcome, ApiError> {
    let chain = DowngradeRequest {
        alias: wanted.alias,
        skip: wanted.skip,
        cache_only: false,
    };
    let mut step = plan_downgrade(degradation, &chain, |m| has_routable_worker(ctx.stack, m));
    if wanted.warm_only {
        let warm = match &step {
            DowngradeStep::Model { model, .. } => serves_warm(runtime, model, request),
            _ => false,
        };
        if !warm {
            let cached = DowngradeRequest {
                cache_only: true,
                ..chain
            };
            step = plan_downgrade(degradation, &cached, |_| false);
        }
    }
    let model = match &step {
        DowngradeStep::Model { model, .. } => model.clone(),
        DowngradeStep::CacheFallback => return Ok(Outcome::CacheFallback),
        DowngradeStep::FriendlyError => {
            record(runtime, &step);
            return Ok(Outcome::FriendlyError);
        }
    };
    record(runtime, &step);
    if model == wanted.alias {
        return Ok(Outcome::Forward {
            retargeted: None,
            disclosure: Vec::new(),
        });
    }
    let (parsed, bytes, notices) = retarget(ctx.route, request, &model, degradation)?;
    Ok(Outcome::Forward {
        retargeted: Some((parsed, bytes)),
        disclosure: degraded_headers(&step, &notices, None),
    })
}

/// Whether any worker serving `model` can be routed to now (a chain link is available).
fn has_routable_worker(stack: &Stack, model: &str) -> bool {
    stack
        .registry
        .directory()
        .snapshot()
        .iter()
        .any(|w| w.serves(model) && w.routability() == Routability::Routable)
}

/// A warm warmup resource of `model` serves this request.
fn serves_warm(runtime: &WarmupRuntime, model: &str, request: &mut RequestText) -> bool {
    let manager = &runtime.manager;
    manager
        .resources_for(model, request.text(), None)
        .iter()
        .any(|name| manager.is_warm(name) == Some(true))
}

/// The request rewritten for `model`: chat bodies normalised to its profile, completion
/// bodies with the model replaced.
fn retarget(
    route: Route,
    request: &mut RequestText,
    model: &str,
    degradation: &DegradationConfig,
) -> Result<(ParsedRequest, Bytes, Vec<Notice>), ApiError> {
    let body = request
        .value()
        .ok_or_else(|| ApiError::bad_request("invalid_request", "the body is not a JSON object"))?;
    let (body, notices) = match route {
        Route::ChatCompletions => {
            let normalised = normalise_chat(body, model, degradation.profile(model))
                .map_err(|e| ApiError::bad_request("invalid_request", e.to_string()))?;
            (normalised.body, normalised.notices)
        }
        // Only chat and completions reach the chain; the model is the one field every body
        // names.
        _ => {
            let mut body = body.clone();
            body["model"] = json!(model);
            (body, Vec::new())
        }
    };
    let bytes =
        Bytes::from(serde_json::to_vec(&body).map_err(|e| ApiError::internal(e.to_string()))?);
    let parsed = openai::parse(route, &bytes)?;
    Ok((parsed, bytes, notices))
}
