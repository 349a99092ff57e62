//! Degradation levels and what each one means for requests and warmups.

use serde::{Deserialize, Serialize};
use std::fmt;

use super::signals::LevelCause;
use crate::config::DegradationConfig;
use crate::schedule::WarmupLimits;

/// Graded degradation: one level at a time, worse as the budget or the fleet
/// runs hot.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(try_from = "u8", into = "u8")]
pub enum Level {
    #[default]
    Normal = 0,
    /// Stop L2 warmup, halve L1, concurrency to 80 % (unless only overload calls for it).
    Conservative = 1,
    /// Only L0 warmup; non-core callers to the lowest priority.
    Shrink = 2,
    /// Core callers only; only cache hits and warmed resources; others get the fallback.
    Survival = 3,
}

impl Level {
    pub const ALL: [Level; 4] = [
        Level::Normal,
        Level::Conservative,
        Level::Shrink,
        Level::Survival,
    ];

    pub fn as_u8(self) -> u8 {
        self as u8
    }

    pub fn label(self) -> &'static str {
        match self {
            Level::Normal => "normal",
            Level::Conservative => "conservative",
            Level::Shrink => "shrink",
            Level::Survival => "survival",
        }
    }

    pub fn worse(self) -> Option<Level> {
        Level::ALL.get(self as usize + 1).copied()
    }

    pub fn better(self) -> Option<Level> {
        (self as usize).checked_sub(1).map(|i| Level::ALL[i])
    }

    /// The next level on the way from `self` to `target` (one step at a time).
    pub fn step_toward(self, target: Level) -> Option<Level> {
        match self.cmp(&target) {
            std::cmp::Ordering::Less => self.worse(),
            std::cmp::Ordering::Greater => self.better(),
            std::cmp::Ordering::Equal => None,
        }
    }
}

impl TryFrom<u8> for Level {
    type Error = String;

    fn try_from(value: u8) -> Result<Self, Self::Error> {
        Level::ALL
            .get(usize::from(value))
            .copied()
            .ok_or_else(|| format!("degradation level must be 0, 1, 2 or 3, got {value}"))
    }
}

impl From<Level> for u8 {
    fn from(level: Level) -> Self {
        level.as_u8()
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.as_u8(), self.label())
    }
}

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
    fn levels_step_one_at_a_time() {
        assert_eq!(
            Level::Normal.step_toward(Level::Survival),
            Some(Level::Conservative)
        );
        assert_eq!(
            Level::Survival.step_toward(Level::Normal),
            Some(Level::Shrink)
        );
        assert_eq!(Level::Shrink.step_toward(Level::Shrink), None);
        assert_eq!(Level::Survival.worse(), None);
        assert!(Level::try_from(4).is_err());
    }

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
