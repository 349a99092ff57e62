//! Two counts that decay together by one half-life, so their ratio is a recent share and the
//! base alone says how much there was lately to judge it by.

use std::time::Duration;

#[derive(Debug)]
pub(super) struct DecayedRatio {
    half_life_secs: f64,
    /// The ratio's denominator, as of `at`.
    base: f64,
    /// The ratio's numerator, as of `at`.
    counted: f64,
    at: Duration,
}

impl DecayedRatio {
    pub(super) fn new(half_life: Duration, now: Duration) -> Self {
        Self {
            half_life_secs: half_life.as_secs_f64().max(f64::MIN_POSITIVE),
            base: 0.0,
            counted: 0.0,
            at: now,
        }
    }

    /// The share of a count at `at` still kept at `now` (1 for a clock that went back).
    fn kept(&self, now: Duration) -> f64 {
        let elapsed = now.checked_sub(self.at).unwrap_or_default();
        (-elapsed.as_secs_f64() / self.half_life_secs).exp2()
    }

    fn decay_to(&mut self, now: Duration) {
        // A clock that went back decays nothing until it passes `at` again.
        if now < self.at {
            return;
        }
        let keep = self.kept(now);
        self.base *= keep;
        self.counted *= keep;
        self.at = now;
    }

    pub(super) fn add_base(&mut self, amount: f64, now: Duration) {
        self.decay_to(now);
        self.base += amount;
    }

    pub(super) fn add_counted(&mut self, amount: f64, now: Duration) {
        self.decay_to(now);
        self.counted += amount;
    }

    /// The base decayed to `now`.
    pub(super) fn base(&self, now: Duration) -> f64 {
        self.base * self.kept(now)
    }

    /// counted / base (both decay alike, so the ratio holds between updates); None while the
    /// base is empty.
    pub(super) fn ratio(&self) -> Option<f64> {
        (self.base > 0.0).then(|| self.counted / self.base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_counts_halve_each_half_life_and_their_ratio_holds() {
        let mut ratio = DecayedRatio::new(Duration::from_secs(10), Duration::ZERO);
        assert_eq!(ratio.ratio(), None);
        ratio.add_base(8.0, Duration::ZERO);
        ratio.add_counted(2.0, Duration::ZERO);
        assert!((ratio.base(Duration::from_secs(10)) - 4.0).abs() < 1e-9);
        ratio.add_counted(1.0, Duration::from_secs(10));
        // 1 + 2/2 counted against 8/2.
        assert_eq!(ratio.ratio(), Some(0.5));
        // A clock that went back decays nothing.
        ratio.add_base(4.0, Duration::from_secs(5));
        assert_eq!(ratio.ratio(), Some(0.25));
        assert!((ratio.base(Duration::from_secs(5)) - 8.0).abs() < 1e-9);
    }
}
