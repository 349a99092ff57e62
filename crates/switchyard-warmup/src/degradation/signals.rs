//! What drives the level: the fleet's budget water level and the overload detector's state
//! drive the gateway-wide level; one caller's own water level only degrades that caller's
//! requests ([`caller_level`]).

use serde::{Deserialize, Serialize};

use super::level::{Level, LevelCause};
use crate::config::DegradationConfig;

/// The admission overload detector's state, as the gateway reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverloadState {
    #[default]
    Normal,
    Overloaded,
    Recovering,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Signals {
    /// Used share of the fleet's period budget (spent over limit, summed across budgeted
    /// callers), if any budget applies. Never one tenant's share: a tenant near its own limit
    /// must not degrade everybody else.
    pub water_level: Option<f64>,
    pub overload: OverloadState,
}

/// The level the signals call for: 95 % → survival, 80 % → conservative, overloaded →
/// `overload_level`, recovering → `recovering_level`; the worst wins. 70 % only warns.
pub fn target_level(signals: &Signals, config: &DegradationConfig) -> Level {
    level_by_water(signals.water_level, config).max(level_by_overload(signals.overload, config))
}

/// Which signals call for `level` (at least that bad), or `None` when none does: a level
/// held by the recovery interval keeps the cause it had when a signal last called for it.
pub fn level_cause(
    level: Level,
    signals: &Signals,
    config: &DegradationConfig,
) -> Option<LevelCause> {
    if level == Level::Normal {
        return Some(LevelCause::None);
    }
    let water = level_by_water(signals.water_level, config) >= level;
    let overload = level_by_overload(signals.overload, config) >= level;
    match (water, overload) {
        (true, true) => Some(LevelCause::BudgetWaterAndOverload),
        (true, false) => Some(LevelCause::BudgetWater),
        (false, true) => Some(LevelCause::Overload),
        (false, false) => None,
    }
}

fn level_by_overload(overload: OverloadState, config: &DegradationConfig) -> Level {
    match overload {
        OverloadState::Normal => Level::Normal,
        OverloadState::Overloaded => config.overload_level,
        OverloadState::Recovering => config.recovering_level,
    }
}

fn level_by_water(water: Option<f64>, config: &DegradationConfig) -> Level {
    match water {
        Some(water) if water >= config.level3_at => Level::Survival,
        Some(water) if water >= config.level1_at => Level::Conservative,
        _ => Level::Normal,
    }
}

/// The level one caller's own budget water level (the worst of its caller and purpose
/// scopes) calls for, applied to that caller's requests only. No hysteresis or 5-minute
/// rule: a caller's spend only grows within a period, and its own budget gate refuses at
/// the same thresholds anyway; this makes it degrade (cache, fallback answer) before that.
/// Off when degradation is disabled, like the gateway-wide level.
pub fn caller_level(water_level: Option<f64>, config: &DegradationConfig) -> Level {
    if !config.enabled {
        return Level::Normal;
    }
    level_by_water(water_level, config)
}

/// Signals that call for `level`, for drills. A level no signal maps to exactly (level 2
/// when `overload_level` is 1) is detected as the way-station of the mildest signal that
/// walks through it (95 % water: level 3 via 2). None when no signal reaches it at all.
pub(crate) fn synthetic_signals(level: Level, config: &DegradationConfig) -> Option<Signals> {
    let water = |water: f64| Signals {
        water_level: Some(water),
        overload: OverloadState::Normal,
    };
    let overload = |state: OverloadState| Signals {
        water_level: None,
        overload: state,
    };
    let candidates = [
        Signals::default(),
        water(config.level1_at),
        overload(OverloadState::Recovering),
        overload(OverloadState::Overloaded),
        water(config.level3_at),
    ];
    let exact = candidates
        .iter()
        .find(|signals| target_level(signals, config) == level);
    exact
        .or_else(|| {
            candidates
                .iter()
                .filter(|signals| target_level(signals, config) > level)
                .min_by_key(|signals| target_level(signals, config))
        })
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_map_to_levels_and_the_worst_signal_wins() {
        let config = DegradationConfig::default();
        let at = |water: f64, overload| {
            target_level(
                &Signals {
                    water_level: Some(water),
                    overload,
                },
                &config,
            )
        };
        assert_eq!(
            at(0.75, OverloadState::Normal),
            Level::Normal,
            "70 % only warns"
        );
        assert_eq!(at(0.80, OverloadState::Normal), Level::Conservative);
        assert_eq!(at(0.95, OverloadState::Normal), Level::Survival);
        assert_eq!(
            at(0.5, OverloadState::Overloaded),
            Level::Conservative,
            "overload alone never reaches level 2 (its demotion meets the P2 pause)"
        );
        assert_eq!(at(0.85, OverloadState::Recovering), Level::Conservative);
        assert_eq!(at(0.96, OverloadState::Overloaded), Level::Survival);
        for level in [Level::Normal, Level::Conservative, Level::Survival] {
            let signals = synthetic_signals(level, &config).unwrap();
            assert_eq!(target_level(&signals, &config), level);
        }
        let via = synthetic_signals(Level::Shrink, &config).unwrap();
        assert_eq!(
            target_level(&via, &config),
            Level::Survival,
            "level 2 is detected on the way to 3"
        );
        let shrink_on_overload = DegradationConfig {
            overload_level: Level::Shrink,
            ..DegradationConfig::default()
        };
        let signals = synthetic_signals(Level::Shrink, &shrink_on_overload).unwrap();
        assert_eq!(signals.overload, OverloadState::Overloaded);
    }

    #[test]
    fn the_cause_names_every_signal_calling_for_the_level_and_none_when_held() {
        let config = DegradationConfig::default();
        let signals = |water: f64, overload| Signals {
            water_level: Some(water),
            overload,
        };
        let cause = |level, s: &Signals| level_cause(level, s, &config);
        let overloaded = signals(0.5, OverloadState::Overloaded);
        assert_eq!(
            cause(Level::Conservative, &overloaded),
            Some(LevelCause::Overload)
        );
        let recovering = signals(0.5, OverloadState::Recovering);
        assert_eq!(
            cause(Level::Conservative, &recovering),
            Some(LevelCause::Overload)
        );
        let hot = signals(0.85, OverloadState::Normal);
        assert_eq!(
            cause(Level::Conservative, &hot),
            Some(LevelCause::BudgetWater)
        );
        let both = signals(0.85, OverloadState::Overloaded);
        assert_eq!(
            cause(Level::Conservative, &both),
            Some(LevelCause::BudgetWaterAndOverload)
        );
        let survival = signals(0.96, OverloadState::Overloaded);
        assert_eq!(
            cause(Level::Survival, &survival),
            Some(LevelCause::BudgetWater),
            "overload alone stops at level 1"
        );
        let calm = signals(0.5, OverloadState::Normal);
        assert_eq!(
            cause(Level::Conservative, &calm),
            None,
            "held, not called for"
        );
        assert_eq!(cause(Level::Normal, &calm), Some(LevelCause::None));
        assert!(!LevelCause::Overload.cuts_concurrency());
        assert!(LevelCause::BudgetWaterAndOverload.cuts_concurrency());
        assert!(LevelCause::Operator.cuts_concurrency());
    }

    #[test]
    fn a_callers_own_water_level_maps_like_the_fleets_and_stops_when_disabled() {
        let config = DegradationConfig::default();
        assert_eq!(caller_level(None, &config), Level::Normal);
        assert_eq!(caller_level(Some(0.79), &config), Level::Normal);
        assert_eq!(caller_level(Some(0.85), &config), Level::Conservative);
        assert_eq!(caller_level(Some(0.97), &config), Level::Survival);
        let off = DegradationConfig {
            enabled: false,
            ..config
        };
        assert_eq!(caller_level(Some(0.99), &off), Level::Normal);
    }
}
