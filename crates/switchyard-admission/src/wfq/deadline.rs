//! How long a queued request will wait: an estimate of the time a dispatch slot is held
//! (exponentially weighted over released slots), and from it the expected wait of a class's
//! queue. A request whose expected wait exceeds its class's wait limit is refused on arrival
//! rather than left to time out, and every queue refusal can tell the client when the queue
//! it met will have drained.

use std::time::Duration;

/// Weight of the newest sample: about the last ten slots dominate, so the estimate follows
/// a change in the workers' speed within a second or two at the rates where it matters.
const SMOOTHING: f64 = 0.1;
/// Slots released before the estimate is trusted: no refusal on a guess.
const MIN_SAMPLES: u32 = 5;

#[derive(Debug, Default)]
pub(crate) struct ServiceTime {
    mean_secs: f64,
    samples: u32,
}

impl ServiceTime {
    pub(crate) fn record(&mut self, held: Duration) {
        let secs = held.as_secs_f64();
        self.mean_secs = if self.samples == 0 {
            secs
        } else {
            self.mean_secs + SMOOTHING * (secs - self.mean_secs)
        };
        self.samples = self.samples.saturating_add(1);
    }

    /// The mean time a slot is held, once enough slots were released.
    pub(crate) fn mean(&self) -> Option<Duration> {
        (self.samples >= MIN_SAMPLES).then(|| Duration::from_secs_f64(self.mean_secs))
    }
}

/// Expected wait of the request at `position` (1 = next) in a class served by `slots`
/// dispatch slots on average (its share of the capacity): `position × service / slots`.
pub(crate) fn expected_wait(position: usize, service: Duration, slots: f64) -> Duration {
    if slots <= 0.0 {
        return Duration::MAX;
    }
    let secs = position as f64 * service.as_secs_f64() / slots;
    Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_estimate_needs_samples_and_follows_a_change() {
        let mut service = ServiceTime::default();
        for _ in 0..4 {
            service.record(MS * 400);
        }
        assert_eq!(service.mean(), None, "four samples are a guess");
        service.record(MS * 400);
        assert_eq!(service.mean(), Some(MS * 400));
        for _ in 0..30 {
            service.record(MS * 100);
        }
        let mean = service.mean().unwrap();
        assert!(mean < MS * 120 && mean > MS * 100, "{mean:?}");
    }

    #[test]
    fn expected_wait_is_position_times_service_over_slots() {
        assert_eq!(expected_wait(3, MS * 400, 1.5), MS * 800);
        assert_eq!(expected_wait(1, MS * 400, 4.0), MS * 100);
        assert_eq!(expected_wait(1, MS * 400, 0.0), Duration::MAX);
    }
}
