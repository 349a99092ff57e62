//! The model downgrade chain (a smaller model answering beats none): an alias maps to models best first,
//! then the cache fallback, then a friendly OpenAI-shaped error. Pure functions the gateway
//! calls on the request path: [`plan_downgrade`] picks the link, [`normalise_chat`] rewrites
//! the body for it, [`degraded_headers`] says what happened.

use switchyard_core::header_names;
mod cache;
mod chat_key;
mod normalise;
mod stream;

pub use cache::{CacheKey, CacheLookup, CachedAnswer, ResponseCache, is_time_sensitive};
pub use normalise::{NormaliseError, Normalised, Notice, normalise_chat};
pub use stream::{completion_from_sse, sse_from_completion};

use prometheus::{IntCounterVec, Opts, Registry};
use serde::Serialize;
use serde_json::{Value, json};
use std::time::Duration;

use crate::config::DegradationConfig;

/// Where a request goes on its alias's chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum DowngradeStep {
    /// Serve with `model`; `degraded` when it is not the first link.
    Model {
        model: String,
        position: usize,
        degraded: bool,
    },
    /// No model can take it: try the response cache, then the friendly error.
    CacheFallback,
    FriendlyError,
}

impl DowngradeStep {
    pub fn label(&self) -> &'static str {
        match self {
            DowngradeStep::Model {
                degraded: false, ..
            } => "primary",
            DowngradeStep::Model { degraded: true, .. } => "downgraded",
            DowngradeStep::CacheFallback => "cache_fallback",
            DowngradeStep::FriendlyError => "friendly_error",
        }
    }
}

/// The request's side of the decision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DowngradeRequest<'a> {
    /// The model the client asked for (a chain alias, or a plain model).
    pub alias: &'a str,
    /// Links degradation makes this request skip (`DegradationView::downgrade_skip`); the
    /// last model is never skipped.
    pub skip: usize,
    /// Degradation allows only cached answers (`DegradationView::cache_only`).
    pub cache_only: bool,
}

/// Picks the first link that can serve: a model with a routable worker (`available`) at or
/// after the skipped links, else the cache fallback (when enabled for the chain), else the
/// friendly error. A model without a chain is its own one-link chain.
pub fn plan_downgrade(
    config: &DegradationConfig,
    request: &DowngradeRequest<'_>,
    available: impl Fn(&str) -> bool,
) -> DowngradeStep {
    let unchained;
    let (models, cache_fallback): (&[String], bool) = match config.chain(request.alias) {
        Some(chain) => (&chain.models, chain.cache_fallback),
        None => {
            unchained = [request.alias.to_string()];
            (&unchained, true)
        }
    };
    let fallback = if cache_fallback && config.cache.enabled {
        DowngradeStep::CacheFallback
    } else {
        DowngradeStep::FriendlyError
    };
    if request.cache_only {
        return fallback;
    }
    let first = request.skip.min(models.len().saturating_sub(1));
    models
        .iter()
        .enumerate()
        .skip(first)
        .find(|(_, model)| available(model))
        .map(|(position, model)| DowngradeStep::Model {
            model: model.clone(),
            position,
            degraded: position > 0,
        })
        .unwrap_or(fallback)
}

/// Response headers that disclose a degraded answer: the model (or `cache`), the notices
/// and, for cached answers, their age.
pub fn degraded_headers(
    step: &DowngradeStep,
    notices: &[Notice],
    cache_age: Option<Duration>,
) -> Vec<(&'static str, String)> {
    let mut headers = Vec::new();
    match step {
        DowngradeStep::Model {
            model,
            degraded: true,
            ..
        } => headers.push((header_names::DEGRADED, model.clone())),
        DowngradeStep::CacheFallback => headers.push((header_names::DEGRADED, "cache".to_string())),
        _ => {}
    }
    if let Some(age) = cache_age {
        headers.push((header_names::CACHE_AGE, age.as_secs().to_string()));
    }
    if !notices.is_empty() {
        let text: Vec<String> = notices.iter().map(Notice::text).collect();
        headers.push((header_names::NOTICE, text.join("; ")));
    }
    headers
}

/// The last link: an OpenAI-shaped error the client can show as is.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FriendlyError {
    pub status: u16,
    pub body: Value,
}

pub fn friendly_error(config: &DegradationConfig, alias: &str) -> FriendlyError {
    FriendlyError {
        status: 503,
        body: json!({
            "error": {
                "message": config.fallback_message,
                "type": "service_unavailable",
                "param": "model",
                "code": "degraded_unavailable",
                "model": alias,
            }
        }),
    }
}

/// Counts every downgrade decision: `switchyard_degradation_downgrades_total{step}`.
pub struct DowngradeMetrics {
    steps: IntCounterVec,
}

impl DowngradeMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let steps = IntCounterVec::new(
            Opts::new(
                "switchyard_degradation_downgrades_total",
                "Downgrade-chain decisions by step (primary, downgraded, cache_fallback, \
                 friendly_error).",
            ),
            &["step"],
        )?;
        registry.register(Box::new(steps.clone()))?;
        Ok(Self { steps })
    }

    pub fn record(&self, step: &DowngradeStep) {
        self.steps.with_label_values(&[step.label()]).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ChainConfig;

    fn config() -> DegradationConfig {
        DegradationConfig {
            chains: vec![ChainConfig {
                alias: "flagship".into(),
                models: vec!["big".into(), "mid".into(), "small".into()],
                cache_fallback: true,
            }],
            ..Default::default()
        }
    }

    fn request(skip: usize, cache_only: bool) -> DowngradeRequest<'static> {
        DowngradeRequest {
            alias: "flagship",
            skip,
            cache_only,
        }
    }

    #[test]
    fn walks_the_chain_past_unavailable_links() {
        let config = config();
        let up = |down: &'static [&'static str]| move |m: &str| !down.contains(&m);
        let model = |m: &str, position| DowngradeStep::Model {
            model: m.into(),
            position,
            degraded: position > 0,
        };
        assert_eq!(
            plan_downgrade(&config, &request(0, false), up(&[])),
            model("big", 0)
        );
        assert_eq!(
            plan_downgrade(&config, &request(0, false), up(&["big"])),
            model("mid", 1)
        );
        assert_eq!(
            plan_downgrade(&config, &request(0, false), up(&["big", "mid", "small"])),
            DowngradeStep::CacheFallback
        );
        assert_eq!(
            plan_downgrade(&config, &request(1, false), up(&[])),
            model("mid", 1)
        );
        assert_eq!(
            plan_downgrade(&config, &request(9, false), up(&[])),
            model("small", 2)
        );
        assert_eq!(
            plan_downgrade(&config, &request(0, true), up(&[])),
            DowngradeStep::CacheFallback
        );
        let mut no_cache = config.clone();
        no_cache.chains[0].cache_fallback = false;
        assert_eq!(
            plan_downgrade(&no_cache, &request(0, false), up(&["big", "mid", "small"])),
            DowngradeStep::FriendlyError
        );
        let plain = DowngradeRequest {
            alias: "other",
            ..Default::default()
        };
        assert_eq!(plan_downgrade(&config, &plain, |_| true), model("other", 0));
    }

    #[test]
    fn headers_disclose_model_notices_and_cache_age() {
        let step = DowngradeStep::Model {
            model: "mid".into(),
            position: 1,
            degraded: true,
        };
        let headers = degraded_headers(&step, &[Notice::SystemPromptFolded], None);
        assert_eq!(headers[0], (header_names::DEGRADED, "mid".to_string()));
        assert_eq!(headers[1].0, header_names::NOTICE);
        let cached = degraded_headers(
            &DowngradeStep::CacheFallback,
            &[],
            Some(Duration::from_millis(90_500)),
        );
        assert_eq!(
            cached,
            vec![
                (header_names::DEGRADED, "cache".to_string()),
                (header_names::CACHE_AGE, "90".to_string())
            ]
        );
        let primary = DowngradeStep::Model {
            model: "big".into(),
            position: 0,
            degraded: false,
        };
        assert!(degraded_headers(&primary, &[], None).is_empty());
        let error = friendly_error(&config(), "flagship");
        assert_eq!(error.status, 503);
        assert_eq!(error.body["error"]["code"], "degraded_unavailable");
    }
}
