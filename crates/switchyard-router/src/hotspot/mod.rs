//! Hot keys: detected online over a sliding time window, then spread over a few workers by a
//! secondary hash that changes once per time slice (stable inside a slice for cache
//! locality, rotating across slices to flatten long-lived hotspots).

mod config;
mod sketch;

pub use config::HotspotConfig;

use parking_lot::Mutex;
use sketch::SpaceSaving;
use std::time::Duration;

/// A sliding window approximated by two tumbling ones: the previous window's counts fade out
/// linearly as the current one fills, so memory stays at 2 × top_k counters.
#[derive(Debug)]
pub(crate) struct HotKeys {
    config: HotspotConfig,
    windows: Mutex<Windows>,
}

#[derive(Debug)]
struct Windows {
    index: u64,
    current: SpaceSaving,
    previous: SpaceSaving,
}

impl HotKeys {
    pub(crate) fn new(config: HotspotConfig) -> Self {
        let top_k = config.top_k as usize;
        Self {
            config,
            windows: Mutex::new(Windows {
                index: 0,
                current: SpaceSaving::new(top_k),
                previous: SpaceSaving::new(top_k),
            }),
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.config.enabled
    }

    /// Counts one request for `key` at `now` (since the Unix epoch); true if the key is hot.
    pub(crate) fn observe(&self, key: u64, now: Duration) -> bool {
        let mut windows = self.windows.lock();
        self.advance(&mut windows, now);
        windows.current.record(key);
        let weight = self.previous_weight(now);
        self.is_hot(&windows, key, weight)
    }

    /// Keys hot right now (the "currently spread" gauge).
    pub(crate) fn hot_count(&self, now: Duration) -> u64 {
        let mut windows = self.windows.lock();
        self.advance(&mut windows, now);
        let weight = self.previous_weight(now);
        let mut hot: Vec<u64> = windows
            .current
            .keys()
            .chain(windows.previous.keys())
            .filter(|&key| self.is_hot(&windows, key, weight))
            .collect();
        hot.sort_unstable();
        hot.dedup();
        hot.len() as u64
    }

    /// Which of the `width` spread positions a hot key uses at `now`: fixed inside a slice,
    /// the next one in the following slice. Offsetting by the key keeps different hot keys
    /// from moving in lockstep.
    pub(crate) fn spread_index(&self, key: u64, now: Duration, width: usize) -> usize {
        let slice = millis(now) / self.config.slice_ms.max(1);
        let width = width.max(1) as u64;
        (key % width + slice % width) as usize % width as usize
    }

    fn advance(&self, windows: &mut Windows, now: Duration) {
        let index = millis(now) / self.config.window_ms.max(1);
        if index == windows.index {
            return;
        }
        if index == windows.index + 1 {
            std::mem::swap(&mut windows.previous, &mut windows.current);
            windows.current.clear();
        } else {
            windows.previous.clear();
            windows.current.clear();
        }
        windows.index = index;
    }

    fn previous_weight(&self, now: Duration) -> f64 {
        let window = self.config.window_ms.max(1);
        1.0 - (millis(now) % window) as f64 / window as f64
    }

    fn is_hot(&self, windows: &Windows, key: u64, previous_weight: f64) -> bool {
        let total =
            windows.current.total() as f64 + windows.previous.total() as f64 * previous_weight;
        if total < self.config.min_window_requests as f64 {
            return false;
        }
        let count = windows.current.guaranteed(key) as f64
            + windows.previous.guaranteed(key) as f64 * previous_weight;
        count >= self.config.hot_threshold * total
    }
}

fn millis(at: Duration) -> u64 {
    u64::try_from(at.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detector() -> HotKeys {
        HotKeys::new(HotspotConfig {
            min_window_requests: 50,
            ..Default::default()
        })
    }

    /// A window boundary (a multiple of the default 60 s window).
    const T0: Duration = Duration::from_secs(1_700_000_040);

    #[test]
    fn a_key_becomes_hot_only_past_the_threshold_and_the_minimum_traffic() {
        let hot = detector();
        // 10 % of traffic is key 7, the rest distinct.
        let mut flagged = Vec::new();
        for i in 0..400u64 {
            let key = if i % 10 == 0 { 7 } else { 10_000 + i };
            flagged.push((i, key, hot.observe(key, T0)));
        }
        let first_hot = flagged.iter().find(|(_, key, hot)| *key == 7 && *hot);
        assert!(first_hot.is_some_and(|(i, _, _)| *i >= 49), "{first_hot:?}");
        assert!(flagged.iter().all(|(_, key, is_hot)| *key == 7 || !is_hot));
        assert_eq!(hot.hot_count(T0), 1);
    }

    #[test]
    fn hotness_fades_once_the_window_slides_past() {
        let hot = detector();
        for _ in 0..200 {
            hot.observe(7, T0);
        }
        assert_eq!(hot.hot_count(T0), 1);
        // Half a window later the old traffic still counts (at half weight) and is all key 7.
        let window = Duration::from_millis(HotspotConfig::default().window_ms);
        assert_eq!(hot.hot_count(T0 + window + window / 2), 1);
        // Two windows later nothing remains.
        assert_eq!(hot.hot_count(T0 + window * 3), 0);
        for i in 0..200u64 {
            assert!(!hot.observe(50_000 + i, T0 + window * 3));
        }
    }

    #[test]
    fn spread_index_is_stable_within_a_slice_and_steps_across_slices() {
        let hot = detector();
        let slice = Duration::from_millis(HotspotConfig::default().slice_ms);
        let start = Duration::from_secs(30 * 1_000_000); // a slice boundary
        let key = 0xDEAD_BEEF;
        let first = hot.spread_index(key, start, 3);
        assert_eq!(
            hot.spread_index(key, start + slice - Duration::from_millis(1), 3),
            first
        );
        let next = hot.spread_index(key, start + slice, 3);
        assert_eq!(next, (first + 1) % 3);
        let indices: Vec<usize> = (0..6)
            .map(|s| hot.spread_index(key, start + slice * s, 3))
            .collect();
        let mut seen = indices.clone();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen, vec![0, 1, 2], "{indices:?}");
        assert_eq!(hot.spread_index(key, start, 1), 0);
    }
}
