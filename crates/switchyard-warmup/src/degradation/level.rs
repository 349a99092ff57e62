//! Degradation levels and why the level in force is in force.

use serde::{Deserialize, Serialize};
use std::fmt;

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

/// Why the level in force is in force. It decides whether the level cuts concurrency: after
/// an overload, capacity is admission's recovery ramp's job (30 → 50 → 80 → 100 %), so a
/// level called for only by the overload detector keeps its warmup and caller effects but
/// leaves the concurrency limit alone; stacking a cut on the ramp kept success under 99 %
/// for the whole 5-minute hold (benches/figures/recovery_storm.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LevelCause {
    /// Level 0: nothing calls for degradation.
    #[default]
    None,
    /// The fleet's budget water level.
    BudgetWater,
    /// Only the admission overload detector (overloaded or recovering).
    Overload,
    BudgetWaterAndOverload,
    /// Forced by an operator or run by a drill: the level's full effects.
    Operator,
}

impl LevelCause {
    /// Whether the level's concurrency cut applies.
    pub fn cuts_concurrency(self) -> bool {
        matches!(
            self,
            LevelCause::BudgetWater | LevelCause::BudgetWaterAndOverload | LevelCause::Operator
        )
    }

    pub fn label(self) -> &'static str {
        match self {
            LevelCause::None => "none",
            LevelCause::BudgetWater => "budget_water",
            LevelCause::Overload => "overload",
            LevelCause::BudgetWaterAndOverload => "budget_water_and_overload",
            LevelCause::Operator => "operator",
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
}
