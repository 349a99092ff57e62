//! The recovery ramp: after overload, admission capacity climbs level by level (30 → 50 →
//! 80 → 100 % by default), holding each level, and steps back one level when the error rate
//! of requests admitted at the current level rebounds.

use std::time::{Duration, Instant};

use crate::config::RampConfig;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RampMove {
    Hold,
    Up,
    Back,
    /// The top level was held cleanly: recovery is over.
    Done,
    /// Errors rebounded at the lowest level: back to overloaded.
    Collapse,
}

pub(crate) struct Ramp {
    levels: Vec<f64>,
    hold: Duration,
    rebound_error_rate: f64,
    min_samples: u64,
    level: usize,
    since: Instant,
    // Outcomes of requests finished at this level only, so errors that caused one step
    // back cannot cause another.
    finished: u64,
    failed: u64,
}

impl Ramp {
    pub(crate) fn new(config: &RampConfig, now: Instant) -> Self {
        Self {
            levels: config.levels.clone(),
            hold: Duration::from_millis(config.hold_ms),
            rebound_error_rate: config.rebound_error_rate,
            min_samples: config.min_samples.max(1),
            level: 0,
            since: now,
            finished: 0,
            failed: 0,
        }
    }

    /// Starts climbing again from `level` (clamped to the ramp).
    pub(crate) fn restart_at(&mut self, level: usize, now: Instant) {
        self.move_to(level.min(self.levels.len().saturating_sub(1)), now);
    }

    /// The highest level whose share of capacity `share` still covers (the first level when
    /// none does); a hair of tolerance so 1 − 0.5 meets the 0.5 level despite float error.
    pub(crate) fn level_for(&self, share: f64) -> usize {
        self.levels
            .iter()
            .rposition(|level| *level <= share + 1e-9)
            .unwrap_or(0)
    }

    pub(crate) fn ratio_at(&self, level: usize) -> f64 {
        self.levels.get(level).copied().unwrap_or(1.0)
    }

    pub(crate) fn level(&self) -> usize {
        self.level
    }

    pub(crate) fn ratio(&self) -> f64 {
        self.levels.get(self.level).copied().unwrap_or(1.0)
    }

    pub(crate) fn since(&self) -> Instant {
        self.since
    }

    pub(crate) fn record(&mut self, failed: bool) {
        self.finished += 1;
        self.failed += u64::from(failed);
    }

    pub(crate) fn evaluate(&mut self, now: Instant) -> RampMove {
        let rebounded = self.finished >= self.min_samples
            && self.failed as f64 / self.finished as f64 >= self.rebound_error_rate;
        if rebounded {
            if self.level == 0 {
                return RampMove::Collapse;
            }
            self.move_to(self.level - 1, now);
            return RampMove::Back;
        }
        if now.saturating_duration_since(self.since) < self.hold {
            return RampMove::Hold;
        }
        if self.level + 1 >= self.levels.len() {
            return RampMove::Done;
        }
        self.move_to(self.level + 1, now);
        RampMove::Up
    }

    fn move_to(&mut self, level: usize, now: Instant) {
        self.level = level;
        self.since = now;
        self.finished = 0;
        self.failed = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOLD: Duration = Duration::from_secs(30);

    #[test]
    fn climbs_one_level_per_hold_and_finishes_after_the_top() {
        let t0 = Instant::now();
        let mut ramp = Ramp::new(&RampConfig::default(), t0);
        assert_eq!(ramp.ratio(), 0.3);
        assert_eq!(
            ramp.evaluate(t0 + HOLD - Duration::from_millis(1)),
            RampMove::Hold
        );
        assert_eq!(ramp.evaluate(t0 + HOLD), RampMove::Up);
        assert_eq!(ramp.ratio(), 0.5);
        assert_eq!(ramp.evaluate(t0 + HOLD * 2), RampMove::Up);
        assert_eq!(ramp.ratio(), 0.8);
        assert_eq!(ramp.evaluate(t0 + HOLD * 3), RampMove::Up);
        assert_eq!(ramp.ratio(), 1.0);
        assert_eq!(
            ramp.evaluate(t0 + HOLD * 4 - Duration::from_millis(1)),
            RampMove::Hold
        );
        assert_eq!(ramp.evaluate(t0 + HOLD * 4), RampMove::Done);
    }

    #[test]
    fn an_error_rebound_steps_back_one_level_and_restarts_the_hold() {
        let t0 = Instant::now();
        let mut ramp = Ramp::new(&RampConfig::default(), t0);
        ramp.evaluate(t0 + HOLD);
        ramp.evaluate(t0 + HOLD * 2);
        assert_eq!(ramp.ratio(), 0.8);
        for i in 0..20 {
            ramp.record(i == 0); // 1 of 20 = 5 %: exactly the rebound rate
        }
        let t = t0 + HOLD * 2 + Duration::from_secs(5);
        assert_eq!(ramp.evaluate(t), RampMove::Back);
        assert_eq!(ramp.ratio(), 0.5);
        assert_eq!(
            ramp.evaluate(t + HOLD - Duration::from_millis(1)),
            RampMove::Hold,
            "hold restarted"
        );
        assert_eq!(ramp.evaluate(t + HOLD), RampMove::Up);
    }

    #[test]
    fn level_for_a_share_is_the_highest_level_it_covers_and_a_restart_begins_there() {
        let t0 = Instant::now();
        let mut ramp = Ramp::new(&RampConfig::default(), t0);
        let levels: Vec<usize> = [0.0, 0.29, 0.3, 0.49, 1.0 - 0.5, 0.79, 0.8, 0.99, 1.0]
            .iter()
            .map(|share| ramp.level_for(*share))
            .collect();
        assert_eq!(levels, vec![0, 0, 0, 0, 1, 1, 2, 2, 3]);
        let t1 = t0 + Duration::from_secs(1);
        ramp.restart_at(1, t1);
        assert_eq!((ramp.level(), ramp.ratio()), (1, 0.5));
        assert_eq!(ramp.evaluate(t1 + HOLD), RampMove::Up);
        assert_eq!(ramp.ratio(), 0.8);
        ramp.restart_at(9, t1);
        assert_eq!(ramp.ratio(), 1.0, "clamped to the top level");
    }

    #[test]
    fn few_errors_or_few_samples_do_not_step_back_and_level_zero_collapses() {
        let t0 = Instant::now();
        let mut ramp = Ramp::new(&RampConfig::default(), t0);
        for _ in 0..19 {
            ramp.record(true);
        }
        assert_eq!(
            ramp.evaluate(t0),
            RampMove::Hold,
            "19 samples are not enough"
        );
        ramp.record(true);
        assert_eq!(ramp.evaluate(t0), RampMove::Collapse);
    }
}
