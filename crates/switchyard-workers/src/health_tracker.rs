//! Consecutive-result health state: out after `unhealthy_threshold` failures in a
//! row, back after `healthy_threshold` successes in a row. A pure state machine.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HealthVerdict {
    Healthy,
    /// Still healthy, but the last check(s) failed.
    Suspect,
    BecameUnhealthy,
    Unhealthy,
    BecameHealthy,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HealthTracker {
    healthy: bool,
    streak: u32,
}

impl HealthTracker {
    /// Workers start healthy, like unknown models serve anything: a just-added worker takes
    /// traffic at once, and a dead one is out after `unhealthy_threshold` quick checks.
    pub(crate) fn new(healthy: bool) -> Self {
        Self { healthy, streak: 0 }
    }

    #[cfg(test)]
    pub(crate) fn is_healthy(&self) -> bool {
        self.healthy
    }

    pub(crate) fn observe(
        &mut self,
        success: bool,
        unhealthy_threshold: u32,
        healthy_threshold: u32,
    ) -> HealthVerdict {
        match (self.healthy, success) {
            (true, true) => {
                self.streak = 0;
                HealthVerdict::Healthy
            }
            (true, false) => {
                self.streak += 1;
                if self.streak >= unhealthy_threshold {
                    *self = Self::new(false);
                    HealthVerdict::BecameUnhealthy
                } else {
                    HealthVerdict::Suspect
                }
            }
            (false, true) => {
                self.streak += 1;
                if self.streak >= healthy_threshold {
                    *self = Self::new(true);
                    HealthVerdict::BecameHealthy
                } else {
                    HealthVerdict::Unhealthy
                }
            }
            (false, false) => {
                self.streak = 0;
                HealthVerdict::Unhealthy
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use HealthVerdict::*;

    #[test]
    fn three_failures_out_five_successes_back() {
        let mut h = HealthTracker::new(true);
        assert_eq!(h.observe(false, 3, 5), Suspect);
        assert_eq!(h.observe(false, 3, 5), Suspect);
        assert_eq!(h.observe(false, 3, 5), BecameUnhealthy);
        assert!(!h.is_healthy());
        for _ in 0..4 {
            assert_eq!(h.observe(true, 3, 5), Unhealthy);
        }
        assert_eq!(h.observe(true, 3, 5), BecameHealthy);
        assert!(h.is_healthy());
    }

    #[test]
    fn streaks_must_be_consecutive() {
        let mut h = HealthTracker::new(true);
        h.observe(false, 3, 5);
        h.observe(false, 3, 5);
        assert_eq!(h.observe(true, 3, 5), Healthy);
        assert_eq!(h.observe(false, 3, 5), Suspect);
        assert!(h.is_healthy());

        let mut h = HealthTracker::new(false);
        for _ in 0..4 {
            h.observe(true, 3, 5);
        }
        assert_eq!(h.observe(false, 3, 5), Unhealthy);
        for _ in 0..4 {
            assert_eq!(h.observe(true, 3, 5), Unhealthy);
        }
        assert_eq!(h.observe(true, 3, 5), BecameHealthy);
    }
}
