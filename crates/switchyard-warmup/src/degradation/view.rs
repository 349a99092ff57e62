//! The hot-path read of degradation: an atomically swapped snapshot of the level in force
//! and its effects. Reading it never waits on the controller.

use arc_swap::{ArcSwap, Guard};
use serde::Serialize;
use std::sync::Arc;
use switchyard_core::{Priority, Purpose, RequestTags};

use super::level::{CallerPolicy, Effects, Level, ServeMode};
use crate::clock::UnixMillis;

/// A level whose actions did not all succeed. The level is not in force; `effects` in the
/// view reflect exactly the actions that did succeed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LevelFailure {
    pub level: Level,
    pub action: &'static str,
    pub error: String,
    pub at_unix_ms: UnixMillis,
}

/// A level pinned by an operator until released.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Forced {
    pub level: Level,
    pub by: String,
    pub reason: String,
    pub at_unix_ms: UnixMillis,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DegradationView {
    /// The worst level whose every action succeeded.
    pub level: Level,
    pub since_unix_ms: UnixMillis,
    pub effects: Effects,
    pub failed: Option<LevelFailure>,
    pub forced: Option<Forced>,
}

impl Default for DegradationView {
    fn default() -> Self {
        Self {
            level: Level::Normal,
            since_unix_ms: 0,
            effects: Effects::default(),
            failed: None,
            forced: None,
        }
    }
}

/// What the request path does with one request under the current effects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Serve,
    /// Serve, but queue at this (lower) priority.
    ServeAt(Priority),
    /// Answer only from the response cache or an already-warm resource; otherwise the
    /// fallback answer.
    CachedOrWarmedOnly,
    /// The fallback answer (friendly error) at once.
    Fallback,
}

impl DegradationView {
    pub fn allows(&self, tags: &RequestTags) -> Verdict {
        let effects = &self.effects;
        if tags.purpose == Purpose::Warmup {
            // The warmup manager enforces the warmup limits per tier; its traffic is only
            // refused here when no warmup at all is allowed.
            let w = effects.warmup;
            return if w.always_warm || w.scheduled || w.lazy {
                Verdict::Serve
            } else {
                Verdict::Fallback
            };
        }
        if effects.callers == CallerPolicy::CoreOnly && !tags.core_caller {
            return Verdict::Fallback;
        }
        if effects.serve == ServeMode::CacheAndWarmedOnly {
            return Verdict::CachedOrWarmedOnly;
        }
        match self.priority_override(tags) {
            Some(priority) => Verdict::ServeAt(priority),
            None => Verdict::Serve,
        }
    }

    /// The priority a request is demoted to, if any.
    pub fn priority_override(&self, tags: &RequestTags) -> Option<Priority> {
        (self.effects.callers != CallerPolicy::All
            && !tags.core_caller
            && tags.priority != Priority::P2)
            .then_some(Priority::P2)
    }

    pub fn cache_only(&self) -> bool {
        self.effects.serve == ServeMode::CacheAndWarmedOnly
    }

    /// Chain links this request starts below its alias's first model.
    pub fn downgrade_skip(&self, tags: &RequestTags) -> usize {
        if tags.core_caller {
            0
        } else {
            self.effects.downgrade_skip
        }
    }

    pub fn concurrency_ratio(&self) -> f64 {
        self.effects.concurrency_ratio
    }
}

/// Cloneable hot-path reader of the published view.
#[derive(Clone)]
pub struct ViewReader(pub(crate) Arc<ArcSwap<DegradationView>>);

impl ViewReader {
    /// The cheap read for the request path.
    pub fn load(&self) -> Guard<Arc<DegradationView>> {
        self.0.load()
    }

    /// An owned snapshot, to keep across awaits.
    pub fn load_full(&self) -> Arc<DegradationView> {
        self.0.load_full()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DegradationConfig;

    fn view(level: Level) -> DegradationView {
        DegradationView {
            level,
            effects: Effects::of(level, &DegradationConfig::default()),
            ..Default::default()
        }
    }

    fn tags(core: bool, purpose: Purpose) -> RequestTags {
        RequestTags {
            core_caller: core,
            purpose,
            ..RequestTags::anonymous()
        }
    }

    #[test]
    fn verdicts_per_level() {
        let business = tags(false, Purpose::Business);
        let core = tags(true, Purpose::Business);
        let warmup = tags(false, Purpose::Warmup);
        assert_eq!(view(Level::Conservative).allows(&business), Verdict::Serve);
        assert_eq!(
            view(Level::Shrink).allows(&business),
            Verdict::ServeAt(Priority::P2)
        );
        assert_eq!(view(Level::Shrink).allows(&core), Verdict::Serve);
        assert_eq!(view(Level::Shrink).downgrade_skip(&business), 1);
        assert_eq!(
            view(Level::Shrink).allows(&warmup),
            Verdict::Serve,
            "L0 still runs"
        );
        assert_eq!(view(Level::Survival).allows(&business), Verdict::Fallback);
        assert_eq!(
            view(Level::Survival).allows(&core),
            Verdict::CachedOrWarmedOnly
        );
        assert_eq!(view(Level::Survival).allows(&warmup), Verdict::Fallback);
        assert!(view(Level::Survival).cache_only());
        assert_eq!(view(Level::Normal).priority_override(&business), None);
    }
}
