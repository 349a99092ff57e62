//! What drives the level: the budget water level and the overload detector's state.

use serde::{Deserialize, Serialize};

use super::level::Level;
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
    /// Used share of the period budget (the ledger's water level), if a budget applies.
    pub water_level: Option<f64>,
    pub overload: OverloadState,
}

/// The level the signals call for: 95 % → survival, 80 % → conservative, overloaded →
/// `overload_level`, recovering → `recovering_level`; the worst wins. 70 % only warns.
pub fn target_level(signals: &Signals, config: &DegradationConfig) -> Level {
    let by_water = match signals.water_level {
        Some(water) if water >= config.level3_at => Level::Survival,
        Some(water) if water >= config.level1_at => Level::Conservative,
        _ => Level::Normal,
    };
    let by_overload = match signals.overload {
        OverloadState::Normal => Level::Normal,
        OverloadState::Overloaded => config.overload_level,
        OverloadState::Recovering => config.recovering_level,
    };
    by_water.max(by_overload)
}

/// Signals that call for `level`, for drills (None when no signal maps to it).
pub(crate) fn synthetic_signals(level: Level, config: &DegradationConfig) -> Option<Signals> {
    let water = |water: f64| Signals {
        water_level: Some(water),
        overload: OverloadState::Normal,
    };
    let overload = |state: OverloadState| Signals {
        water_level: None,
        overload: state,
    };
    [
        Signals::default(),
        water(config.level1_at),
        water(config.level3_at),
        overload(OverloadState::Overloaded),
        overload(OverloadState::Recovering),
    ]
    .into_iter()
    .find(|signals| target_level(signals, config) == level)
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
        assert_eq!(at(0.5, OverloadState::Overloaded), Level::Shrink);
        assert_eq!(at(0.85, OverloadState::Recovering), Level::Conservative);
        assert_eq!(at(0.96, OverloadState::Overloaded), Level::Survival);
        for level in Level::ALL {
            let signals = synthetic_signals(level, &config).unwrap();
            assert_eq!(target_level(&signals, &config), level);
        }
    }
}
