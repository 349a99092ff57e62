//! Degrade: the degradation verdict for the caller (the gateway-wide level, made stricter
//! only by this caller's own budget) and what it implies before admission — a lowered
//! priority, the model downgrade chain (prompt normalised, disclosed in
//! `x-switchyard-degraded`), an answer from the response cache or the friendly error — then
//! lazy (L2) warmup of the resources the request needs. The rest of the surface (embeddings,
//! rerank, …) gets the verdict only: the chain and the cache rewrite and answer chat and
//! completions alone.

mod answer;
mod cache;
mod downgrade;
mod request_text;

use axum::response::Response;
use bytes::Bytes;
use switchyard_core::RequestTags;
use switchyard_warmup::degradation::CallerSignals;
use switchyard_warmup::{CacheKey, DowngradeStep, Verdict};

use self::request_text::RequestText;
use super::context::RequestContext;
use crate::error::ApiError;
use crate::openai::{ChatKeyInputs, ParsedRequest};
use crate::state::AppState;

/// What the degrade stage decided.
pub(super) enum Plan {
    /// Answered here: the cache fallback or the friendly error.
    Answered(Response),
    /// Goes on to admission and a worker, as planned.
    Forward(Box<Planned>),
}

/// A request to forward, possibly moved to another model or priority.
pub(super) struct Planned {
    pub(super) tags: RequestTags,
    pub(super) parsed: ParsedRequest,
    pub(super) bytes: Bytes,
    /// Headers telling the client how its request was degraded.
    pub(super) disclosure: Vec<(&'static str, String)>,
    /// Plain prompt text, when warmup resources are configured (to match them).
    pub(super) text: Option<String>,
    /// Where a successful answer goes in the response cache, when it may.
    pub(super) cache_key: Option<CacheKey>,
}

impl Planned {
    fn unchanged(tags: RequestTags, parsed: ParsedRequest, bytes: Bytes) -> Self {
        Self {
            tags,
            parsed,
            bytes,
            disclosure: Vec::new(),
            text: None,
            cache_key: None,
        }
    }
}

pub(super) async fn plan(
    state: &AppState,
    ctx: &RequestContext<'_>,
    mut tags: RequestTags,
    parsed: ParsedRequest,
    key_inputs: Option<ChatKeyInputs>,
    bytes: Bytes,
) -> Result<Plan, ApiError> {
    let runtime = &state.warmup;
    let view = runtime.view.load_full();
    let degradation = runtime.controller.config();
    let caller = CallerSignals {
        water_level: ctx.stack.admission.caller_water_level(&tags),
        lowest_served: ctx.stack.admission.lowest_served_priority(),
    };
    let decision = view.allows_for(&tags, &caller, &degradation);
    let verdict = decision.verdict;
    if decision.caller_level > view.level {
        tracing::debug!(
            caller_level = %decision.caller_level,
            ?verdict,
            "the caller's own budget degrades its request"
        );
    }
    answer::count_verdict(runtime, verdict);
    let alias = parsed.model.clone();
    if !ctx.route.is_generation() {
        // The verdict only: nothing is cached for these endpoints, so only-cached-or-warmed
        // is the fallback too.
        return Ok(match verdict {
            Verdict::Serve => Plan::Forward(Box::new(Planned::unchanged(tags, parsed, bytes))),
            Verdict::ServeAt(priority) => {
                tags.priority = priority;
                Plan::Forward(Box::new(Planned::unchanged(tags, parsed, bytes)))
            }
            Verdict::CachedOrWarmedOnly | Verdict::Fallback => {
                Plan::Answered(answer::friendly(ctx, &degradation, &alias, &tags))
            }
        });
    }
    match verdict {
        Verdict::Fallback => {
            answer::record(runtime, &DowngradeStep::FriendlyError);
            let friendly = answer::friendly(ctx, &degradation, &alias, &tags);
            return Ok(Plan::Answered(friendly));
        }
        Verdict::ServeAt(priority) => tags.priority = priority,
        Verdict::Serve | Verdict::CachedOrWarmedOnly => {}
    }
    let mut request = RequestText::new(ctx.route, bytes.clone())
        .for_caller(&tags.caller)
        .read_as(key_inputs);
    let cacheable = degradation.cache.enabled && cache::caches(&degradation, &alias);
    if decision.cache_first
        && cacheable
        && let Some(answer) = cache::cached_answer(ctx, runtime, &parsed, &mut request)
    {
        return Ok(Plan::Answered(answer));
    }
    let (parsed, bytes, disclosure) = if degradation.chain(&alias).is_some()
        || verdict == Verdict::CachedOrWarmedOnly
    {
        let wanted = downgrade::Wanted {
            alias: &alias,
            skip: decision.downgrade_skip,
            warm_only: verdict == Verdict::CachedOrWarmedOnly,
        };
        match downgrade::follow(ctx, runtime, &degradation, &wanted, &mut request)? {
            downgrade::Outcome::Forward {
                retargeted,
                disclosure,
            } => {
                let (parsed, bytes) = retargeted.unwrap_or((parsed, bytes));
                (parsed, bytes, disclosure)
            }
            downgrade::Outcome::CacheFallback => {
                let answer =
                    cache::cache_fallback(ctx, runtime, &degradation, &parsed, &tags, &mut request);
                return Ok(Plan::Answered(answer));
            }
            downgrade::Outcome::FriendlyError => {
                let friendly = answer::friendly(ctx, &degradation, &alias, &tags);
                return Ok(Plan::Answered(friendly));
            }
        }
    } else {
        (parsed, bytes, Vec::new())
    };
    let text = if ctx.stack.config().warmup.resources.is_empty() {
        None
    } else {
        Some(request.text().to_string())
    };
    if let Some(text) = &text {
        for name in runtime.manager.resources_for(&parsed.model, text, None) {
            let outcome = runtime.manager.lazy_warm(&name).await;
            tracing::debug!(resource = %name, ?outcome, "lazy warmup");
        }
    }
    let cache_key = if cacheable {
        request.cache_key(&alias)
    } else {
        None
    };
    Ok(Plan::Forward(Box::new(Planned {
        tags,
        parsed,
        bytes,
        disclosure,
        text,
        cache_key,
    })))
}
