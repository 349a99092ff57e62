//! What each degradation level means for requests and warmups.

use serde::{Deserialize, Serialize};

use super::level::{Level, LevelCause};
use crate::config::DegradationConfig;
use crate::schedule::WarmupLimits;

/// Who is still served as usual.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallerPolicy {
    #[default]
    All,
    /// Non-core callers are served at the lowest priority admission still serves (P2, or
    /// P1 while P2 is paused: a demotion never lands in a paused class).
    NonCoreLowestPriority,
    /// Non-core callers get the fallback answer.
    CoreOnly,
}

/// What may answer a request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServeMode {
    #[default]
    Normal,
    /// Only cached answers and warm resources; anything else gets the fallback answer.
    CacheAndWarmedOnly,
}

/// What the gateway must do differently while a level is in force.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Effects {
    pub warmup: WarmupLimits,
    /// Share of the configured concurrency limit in force.
    pub concurrency_ratio: f64,
    pub callers: CallerPolicy,
    /// Links of a downgrade chain non-core callers skip.
    pub downgrade_skip: usize,
    pub serve: ServeMode,
}

impl Default for Effects {
    fn default() -> Self {
        Self {
            warmup: WarmupLimits::ALL,
            concurrency_ratio: 1.0,
            callers: CallerPolicy::All,
            downgrade_skip: 0,
            serve: ServeMode::Normal,
        }
    }
}

impl Effects {
    /// The effects of `level` for `cause`: a level called for only by the overload detector
    /// leaves the concurrency limit to admission's recovery ramp.
    pub fn caused(level: Level, cause: LevelCause, config: &DegradationConfig) -> Self {
        let full = Effects::of(level, config);
        if cause.cuts_concurrency() {
            full
        } else {
            Effects {
                concurrency_ratio: 1.0,
                ..full
            }
        }
    }

    /// The full effects of `level` under `config`.
    pub fn of(level: Level, config: &DegradationConfig) -> Self {
        let normal = Effects::default();
        match level {
            Level::Normal => normal,
            Level::Conservative => Effects {
                warmup: WarmupLimits {
                    lazy: false,
                    scheduled_frequency: config.scheduled_frequency,
                    ..WarmupLimits::ALL
                },
                concurrency_ratio: config.concurrency_ratio,
                ..normal
            },
            Level::Shrink => Effects {
                warmup: WarmupLimits {
                    always_warm: true,
                    ..WarmupLimits::NONE
                },
                concurrency_ratio: config.concurrency_ratio,
                callers: CallerPolicy::NonCoreLowestPriority,
                downgrade_skip: config.shrink_skip_links,
                serve: ServeMode::Normal,
            },
            Level::Survival => Effects {
                warmup: WarmupLimits {
                    always_warm: config.survival_keeps_l0,
                    ..WarmupLimits::NONE
                },
                concurrency_ratio: config.concurrency_ratio,
                callers: CallerPolicy::CoreOnly,
                downgrade_skip: config.shrink_skip_links,
                serve: ServeMode::CacheAndWarmedOnly,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_effects_follow_the_seed() {
        let config = DegradationConfig::default();
        let one = Effects::of(Level::Conservative, &config);
        assert!(!one.warmup.lazy && one.warmup.scheduled && one.warmup.always_warm);
        assert_eq!(
            (one.warmup.scheduled_frequency, one.concurrency_ratio),
            (0.5, 0.8)
        );
        let two = Effects::of(Level::Shrink, &config);
        assert!(two.warmup.always_warm && !two.warmup.scheduled && !two.warmup.lazy);
        assert_eq!(two.callers, CallerPolicy::NonCoreLowestPriority);
        let three = Effects::of(Level::Survival, &config);
        assert_eq!(three.warmup, WarmupLimits::NONE);
        assert_eq!(
            (three.callers, three.serve),
            (CallerPolicy::CoreOnly, ServeMode::CacheAndWarmedOnly)
        );
    }

    #[test]
    fn overload_alone_keeps_warmup_effects_but_not_the_concurrency_cut() {
        let config = DegradationConfig::default();
        let by_overload = Effects::caused(Level::Conservative, LevelCause::Overload, &config);
        assert_eq!(by_overload.concurrency_ratio, 1.0);
        assert!(!by_overload.warmup.lazy);
        assert_eq!(by_overload.warmup.scheduled_frequency, 0.5);
        for cause in [
            LevelCause::BudgetWater,
            LevelCause::BudgetWaterAndOverload,
            LevelCause::Operator,
        ] {
            let effects = Effects::caused(Level::Conservative, cause, &config);
            assert_eq!(
                effects,
                Effects::of(Level::Conservative, &config),
                "{cause:?}"
            );
        }
    }
}
