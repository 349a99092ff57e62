//! The hot-path read of degradation: an atomically swapped snapshot of the level in force
//! and its effects. Reading it never waits on the controller.

use arc_swap::{ArcSwap, Guard};
use serde::Serialize;
use std::sync::Arc;
use switchyard_core::{Priority, Purpose, RequestTags};

use super::effects::{CallerPolicy, Effects, ServeMode};
use super::level::{Level, LevelCause};
use super::signals::caller_level;
use crate::clock::UnixMillis;
use crate::config::DegradationConfig;
use switchyard_core::WallClock;

/// A level whose actions did not all succeed. The level is not in force (or, when it is the
/// level in force, its re-application for a changed cause did not fully take); `effects` in
/// the view reflect exactly the actions that did succeed.
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
    /// Why `level` is in force; an overload-only level leaves concurrency to admission.
    pub cause: LevelCause,
    pub since_unix_ms: UnixMillis,
    pub effects: Effects,
    pub failed: Option<LevelFailure>,
    pub forced: Option<Forced>,
}

impl Default for DegradationView {
    fn default() -> Self {
        Self {
            level: Level::Normal,
            cause: LevelCause::None,
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

/// What one request brings beyond the gateway-wide level.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CallerSignals {
    /// Used share of this caller's own period budget (the worst of its caller scope and the
    /// request's purpose scope); `None` without a budget.
    pub water_level: Option<f64>,
    /// The least urgent class admission serves right now: P1 while P2 is paused.
    pub lowest_served: Priority,
}

impl Default for CallerSignals {
    fn default() -> Self {
        Self {
            water_level: None,
            lowest_served: Priority::P2,
        }
    }
}

/// The degradation decision for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RequestVerdict {
    pub verdict: Verdict,
    /// Chain links this request starts below its alias's first model.
    pub downgrade_skip: usize,
    /// The level the caller's own budget calls for (applied to its requests only).
    pub caller_level: Level,
    /// The caller is past its own hard threshold: answer from the response cache when it
    /// can (a cached answer spends no budget); otherwise the request goes on as `verdict`
    /// says and the caller's budget gate decides (429 for it, core P0 still passes).
    pub cache_first: bool,
}

impl DegradationView {
    /// The gateway-wide verdict, for a caller whose own budget is not running hot and with
    /// every class served (the warmup executor's check of its own traffic).
    pub fn allows(&self, tags: &RequestTags) -> Verdict {
        verdict_under(&self.effects, tags, Priority::P2)
    }

    /// The verdict for one request: the gateway-wide level (driven by the fleet's budget
    /// and overload), with demotions stopping at the least urgent class still served. A
    /// caller's own water level touches only its own requests: past its hard threshold they
    /// try the response cache first. It does not turn them into the gateway's fallback
    /// answer: a caller over its own quota is told so by its budget gate (429), not that the
    /// gateway is overloaded (503); and its soft threshold is the gate's to enforce too.
    pub fn allows_for(
        &self,
        tags: &RequestTags,
        caller: &CallerSignals,
        config: &DegradationConfig,
    ) -> RequestVerdict {
        let caller_level = caller_level(caller.water_level, config);
        let verdict = verdict_under(&self.effects, tags, caller.lowest_served);
        let cache_first = caller_level == Level::Survival
            && tags.purpose != Purpose::Warmup
            && matches!(verdict, Verdict::Serve | Verdict::ServeAt(_));
        RequestVerdict {
            verdict,
            downgrade_skip: self.downgrade_skip(tags),
            caller_level,
            cache_first,
        }
    }

    /// The priority a request is demoted to, if any: non-core callers go to the least
    /// urgent class admission still serves, never into a paused one; core callers keep
    /// their class, so they keep precedence.
    pub fn priority_override(
        &self,
        tags: &RequestTags,
        lowest_served: Priority,
    ) -> Option<Priority> {
        demotion(&self.effects, tags, lowest_served)
    }

    pub fn cache_only(&self) -> bool {
        self.effects.serve == ServeMode::CacheAndWarmedOnly
    }

    /// Chain links this request starts below its alias's first model (gateway-wide level).
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

fn verdict_under(effects: &Effects, tags: &RequestTags, lowest_served: Priority) -> Verdict {
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
    match demotion(effects, tags, lowest_served) {
        Some(priority) => Verdict::ServeAt(priority),
        None => Verdict::Serve,
    }
}

fn demotion(effects: &Effects, tags: &RequestTags, lowest_served: Priority) -> Option<Priority> {
    (effects.callers != CallerPolicy::All && !tags.core_caller && tags.priority < lowest_served)
        .then_some(lowest_served)
}

/// Cloneable hot-path reader of the published view.
#[derive(Clone)]
pub struct ViewReader(pub(crate) Arc<ArcSwap<DegradationView>>);

impl ViewReader {
    /// A view at level 0 since now, for a controller built later
    /// (`DegradationController::publishing_to`).
    pub fn undegraded(clock: &WallClock) -> Self {
        let view = DegradationView {
            since_unix_ms: clock.unix_millis(),
            ..DegradationView::default()
        };
        Self(Arc::new(ArcSwap::from_pointee(view)))
    }

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
        assert_eq!(
            view(Level::Normal).priority_override(&business, Priority::P2),
            None
        );
    }

    fn at(priority: Priority, core: bool) -> RequestTags {
        RequestTags {
            priority,
            ..tags(core, Purpose::Business)
        }
    }

    #[test]
    fn a_demotion_never_lands_in_a_paused_class_and_core_callers_keep_theirs() {
        let config = DegradationConfig::default();
        let shrink = view(Level::Shrink);
        let overloaded = CallerSignals {
            water_level: None,
            lowest_served: Priority::P1,
        };
        let decide = |tags: &RequestTags, caller: &CallerSignals| {
            shrink.allows_for(tags, caller, &config).verdict
        };
        assert_eq!(
            decide(&at(Priority::P0, false), &overloaded),
            Verdict::ServeAt(Priority::P1),
            "P2 is paused: the demotion stops at P1"
        );
        assert_eq!(
            decide(&at(Priority::P1, false), &overloaded),
            Verdict::Serve
        );
        assert_eq!(decide(&at(Priority::P0, true), &overloaded), Verdict::Serve);
        let served = CallerSignals::default();
        assert_eq!(
            decide(&at(Priority::P0, false), &served),
            Verdict::ServeAt(Priority::P2),
            "nothing paused: the lowest class"
        );
        assert_eq!(
            view(Level::Conservative)
                .allows_for(&at(Priority::P0, false), &overloaded, &config)
                .verdict,
            Verdict::Serve,
            "overload's default level keeps every class"
        );
    }

    #[test]
    fn a_callers_own_budget_degrades_only_its_own_requests() {
        let config = DegradationConfig::default();
        let normal = view(Level::Normal);
        let hot = CallerSignals {
            water_level: Some(0.97),
            ..CallerSignals::default()
        };
        let cool = CallerSignals {
            water_level: Some(0.10),
            ..CallerSignals::default()
        };
        let business = at(Priority::P1, false);
        let own = normal.allows_for(&business, &hot, &config);
        assert_eq!(
            (own.verdict, own.caller_level, own.cache_first),
            (Verdict::Serve, Level::Survival, true),
            "cache first, then its own budget gate (429), not the gateway's 503"
        );
        let other = normal.allows_for(&business, &cool, &config);
        assert_eq!(
            (other.verdict, other.downgrade_skip, other.cache_first),
            (Verdict::Serve, 0, false),
            "another tenant is untouched"
        );
        let warm = CallerSignals {
            water_level: Some(0.85),
            ..cool
        };
        assert!(
            !normal.allows_for(&business, &warm, &config).cache_first,
            "80 %: its budget gate sheds P2 and warmup, nothing more here"
        );
        let fleet_survival = view(Level::Survival);
        assert_eq!(
            fleet_survival.allows_for(&business, &cool, &config).verdict,
            Verdict::Fallback,
            "a fleet at 96 %: survival for every non-core caller"
        );
        let core = fleet_survival.allows_for(&at(Priority::P0, true), &cool, &config);
        assert_eq!(
            (core.verdict, core.cache_first),
            (Verdict::CachedOrWarmedOnly, false)
        );
        let warmup = tags(false, Purpose::Warmup);
        assert!(!normal.allows_for(&warmup, &hot, &config).cache_first);
        let off = DegradationConfig {
            enabled: false,
            ..DegradationConfig::default()
        };
        assert!(!normal.allows_for(&business, &hot, &off).cache_first);
    }
}
