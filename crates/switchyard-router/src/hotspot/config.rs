//! Tunables of hot-key detection and spreading.

use crate::error::{RouterError, invalid};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HotspotConfig {
    /// Off: every key stays on its ring owner (no detection cost either).
    pub enabled: bool,
    /// Sliding window over which traffic shares are measured.
    pub window_ms: u64,
    /// Counters kept per window; any key above 1/top_k of the traffic is always tracked.
    pub top_k: u32,
    /// A key is hot when its share of the window's requests reaches this (≥ 1/top_k, ≤ 1).
    pub hot_threshold: f64,
    /// No key is hot while the window holds fewer requests than this.
    pub min_window_requests: u64,
    /// Length of a time slice; a hot key keeps one worker for a whole slice (30 s: long
    /// enough for its prefix cache to pay off).
    pub slice_ms: u64,
    /// How many successive ring workers a hot key rotates over (1 disables spreading); when
    /// its slice's worker is above the load bound it goes to the least loaded of them. Over a
    /// small fleet make it cover every worker: a set that leaves one out, shared by a few hot
    /// keys, can leave out the same worker for all of them, a skew no run length evens out.
    pub spread_width: u32,
}

impl Default for HotspotConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            window_ms: 60_000,
            top_k: 64,
            hot_threshold: 0.05,
            min_window_requests: 100,
            slice_ms: 30_000,
            spread_width: 4,
        }
    }
}

impl HotspotConfig {
    pub fn validate(&self) -> Result<(), RouterError> {
        if self.window_ms == 0 {
            return Err(invalid("hotspot.window_ms", "must be > 0", self.window_ms));
        }
        if !(1..=4096).contains(&self.top_k) {
            return Err(invalid(
                "hotspot.top_k",
                "must be within 1..=4096",
                self.top_k,
            ));
        }
        let floor = 1.0 / f64::from(self.top_k);
        if !(self.hot_threshold.is_finite()
            && self.hot_threshold >= floor
            && self.hot_threshold <= 1.0)
        {
            return Err(invalid(
                "hotspot.hot_threshold",
                "must be within 1/top_k..=1.0 (smaller shares are not reliably tracked)",
                self.hot_threshold,
            ));
        }
        if self.slice_ms == 0 {
            return Err(invalid("hotspot.slice_ms", "must be > 0", self.slice_ms));
        }
        if !(1..=64).contains(&self.spread_width) {
            return Err(invalid(
                "hotspot.spread_width",
                "must be within 1..=64",
                self.spread_width,
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_invalid_value_names_its_field() {
        let cases = [
            (
                HotspotConfig {
                    window_ms: 0,
                    ..Default::default()
                },
                "hotspot.window_ms",
            ),
            (
                HotspotConfig {
                    top_k: 0,
                    ..Default::default()
                },
                "hotspot.top_k",
            ),
            (
                HotspotConfig {
                    hot_threshold: 0.01,
                    ..Default::default()
                },
                "hotspot.hot_threshold",
            ),
            (
                HotspotConfig {
                    hot_threshold: f64::NAN,
                    ..Default::default()
                },
                "hotspot.hot_threshold",
            ),
            (
                HotspotConfig {
                    slice_ms: 0,
                    ..Default::default()
                },
                "hotspot.slice_ms",
            ),
            (
                HotspotConfig {
                    spread_width: 0,
                    ..Default::default()
                },
                "hotspot.spread_width",
            ),
        ];
        for (config, field) in cases {
            let error = config.validate().unwrap_err();
            assert!(error.to_string().contains(field), "{error}");
        }
        assert_eq!(HotspotConfig::default().validate(), Ok(()));
    }
}
