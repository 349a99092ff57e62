//! When a scheduled warmup is due. L0: every keep-alive interval, sooner after a failure.
//! L1: from a lead time before each peak window until it ends, at its interval (stretched by
//! the degradation frequency factor); outside the span it is left to cool. L2 is never
//! scheduled: it warms on demand.

use serde::Serialize;

use crate::clock::{UnixMillis, secs_to_ms};
use crate::config::{ResourceConfig, Tier};

/// Which warmups degradation allows, as the warmup manager applies them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct WarmupLimits {
    /// L0 keep-alives.
    pub always_warm: bool,
    /// L1 scheduled warmups…
    pub scheduled: bool,
    /// …at this share of their configured frequency (0.5 doubles the interval).
    pub scheduled_frequency: f64,
    /// L2 lazy warmups.
    pub lazy: bool,
}

impl WarmupLimits {
    pub const ALL: Self = Self {
        always_warm: true,
        scheduled: true,
        scheduled_frequency: 1.0,
        lazy: true,
    };
    pub const NONE: Self = Self {
        always_warm: false,
        scheduled: false,
        scheduled_frequency: 1.0,
        lazy: false,
    };

    pub fn allows(&self, tier: Tier) -> bool {
        match tier {
            Tier::L0 => self.always_warm,
            Tier::L1 => self.scheduled,
            Tier::L2 => self.lazy,
        }
    }
}

impl Default for WarmupLimits {
    fn default() -> Self {
        Self::ALL
    }
}

/// The manager's memory of one resource's scheduled warmups.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) last_attempt: Option<UnixMillis>,
    pub(crate) last_failed: bool,
    /// Queued in or running with the current wave.
    pub(crate) busy: bool,
}

pub(crate) fn is_due(
    resource: &ResourceConfig,
    slot: &Slot,
    limits: &WarmupLimits,
    failure_retry_ms: u64,
    now: UnixMillis,
) -> bool {
    if slot.busy || !limits.allows(resource.tier) {
        return false;
    }
    let interval = secs_to_ms(resource.interval_secs);
    let spacing = |interval: u64| {
        if slot.last_failed {
            failure_retry_ms.min(interval)
        } else {
            interval
        }
    };
    match resource.tier {
        Tier::L0 => slot
            .last_attempt
            .is_none_or(|last| now >= last.saturating_add(spacing(interval))),
        Tier::L1 => {
            let lead = secs_to_ms(resource.lead_time_secs);
            let Some(span_start) = resource
                .peak_windows
                .iter()
                .filter_map(|window| window.active_span_start(lead, now))
                .max()
            else {
                return false;
            };
            let frequency = limits.scheduled_frequency.clamp(0.01, 1.0);
            let stretched = (interval as f64 / frequency) as u64;
            slot.last_attempt.is_none_or(|last| {
                last < span_start || now >= last.saturating_add(spacing(stretched))
            })
        }
        Tier::L2 => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::MS_PER_DAY;
    use crate::config::{PeakWindow, ResourceKind};

    const MIN: u64 = 60_000;

    fn l1() -> ResourceConfig {
        let mut r = ResourceConfig::new("r", ResourceKind::Instance, Tier::L1);
        r.peak_windows = vec![PeakWindow::try_from("09:00-10:00".to_string()).unwrap()];
        r
    }

    #[test]
    fn l0_keeps_alive_and_retries_sooner_after_failure() {
        let r = ResourceConfig::new("r", ResourceKind::Instance, Tier::L0);
        let limits = WarmupLimits::ALL;
        let mut slot = Slot::default();
        assert!(is_due(&r, &slot, &limits, MIN, 0), "never warmed: due now");
        slot.last_attempt = Some(0);
        assert!(!is_due(&r, &slot, &limits, MIN, 29 * MIN));
        assert!(is_due(&r, &slot, &limits, MIN, 30 * MIN));
        slot.last_failed = true;
        assert!(is_due(&r, &slot, &limits, MIN, MIN));
        assert!(!is_due(&r, &slot, &WarmupLimits::NONE, MIN, 60 * MIN));
        slot.busy = true;
        assert!(!is_due(&r, &slot, &limits, MIN, 60 * MIN), "already queued");
    }

    #[test]
    fn l1_warms_lead_time_before_the_window_then_cools() {
        let day = 19_000 * MS_PER_DAY;
        let r = l1();
        let limits = WarmupLimits::ALL;
        let mut slot = Slot {
            last_attempt: Some(day - MS_PER_DAY + 9 * 60 * MIN), // yesterday's peak
            ..Default::default()
        };
        assert!(!is_due(
            &r,
            &slot,
            &limits,
            MIN,
            day + 8 * 60 * MIN + 39 * MIN
        ));
        let lead_start = day + 8 * 60 * MIN + 40 * MIN;
        assert!(
            is_due(&r, &slot, &limits, MIN, lead_start),
            "20 min before 09:00"
        );
        slot.last_attempt = Some(lead_start);
        assert!(!is_due(&r, &slot, &limits, MIN, lead_start + 29 * MIN));
        assert!(is_due(&r, &slot, &limits, MIN, lead_start + 30 * MIN));
        let halved = WarmupLimits {
            scheduled_frequency: 0.5,
            ..limits
        };
        assert!(!is_due(&r, &slot, &halved, MIN, lead_start + 30 * MIN));
        assert!(is_due(&r, &slot, &halved, MIN, lead_start + 60 * MIN));
        assert!(
            !is_due(&r, &slot, &limits, MIN, day + 10 * 60 * MIN),
            "cools after"
        );
    }
}
