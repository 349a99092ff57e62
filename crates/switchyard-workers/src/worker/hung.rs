//! The hung verdict, apart from the actor: a worker is hung when it is busy and has sent no
//! byte for the hung window, or when enough of its streams are stuck mid-answer for that
//! window while it completes nothing. Both silences are measured net of the time this
//! gateway itself was not running (its periodic check came late): a starved gateway reads
//! no bytes, and that is not the worker's silence.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::config::HealthConfig;
use crate::latency::LatencyFigures;
use crate::progress::StreamCensus;

/// How many late checks are remembered; at the default 250 ms interval a minute of them,
/// far longer than any hung window that matters.
const LAG_ENTRIES: usize = 256;

/// When this gateway's own periodic check ran late, and by how much: time it was not
/// running (CPU starvation, a blocked runtime), during which no worker's bytes were read.
#[derive(Debug, Default)]
pub(crate) struct GatewayLag {
    next_due: Option<Instant>,
    /// (when the late check ran, how late it was), oldest first.
    late: VecDeque<(Instant, Duration)>,
}

impl GatewayLag {
    /// A check runs at `now`; the next one is due `interval` later.
    pub(crate) fn tick(&mut self, now: Instant, interval: Duration) {
        if let Some(due) = self.next_due {
            let late = now.saturating_duration_since(due);
            if !late.is_zero() {
                if self.late.len() == LAG_ENTRIES {
                    self.late.pop_front();
                }
                self.late.push_back((now, late));
            }
        }
        self.next_due = Some(now + interval);
    }

    /// How much of the span from `since` to now the gateway spent overdue.
    pub(crate) fn overdue_since(&self, since: Instant) -> Duration {
        self.late
            .iter()
            .rev()
            .take_while(|(ran, _)| *ran > since)
            .map(|(ran, late)| {
                let start = ran.checked_sub(*late).unwrap_or(since).max(since);
                ran.saturating_duration_since(start)
            })
            .sum()
    }

    /// How long ago `at` was on this gateway's working time: the time it was overdue is
    /// not counted.
    fn age(&self, at: Instant, now: Instant) -> Duration {
        now.saturating_duration_since(at)
            .saturating_sub(self.overdue_since(at))
    }
}

/// What one hung check saw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum HungCheck {
    /// Nothing over the window.
    Fine,
    /// Busy and no byte for `silence` (net of the gateway's own lag): hung.
    Silent(Duration),
    /// `streams` stuck mid-answer, the oldest for `longest`, and no answer completed: hung.
    StalledStreams { streams: usize, longest: Duration },
    /// Over the window only because this gateway itself ran late: not a verdict.
    DeferredForGatewayLag,
    /// Streams are stuck, but the worker completes answers or keeps most streams going.
    StallsExcused,
}

impl HungCheck {
    /// Counter label of the checks that saw something; `None` for [`HungCheck::Fine`].
    pub(crate) fn label(self) -> Option<&'static str> {
        match self {
            HungCheck::Fine => None,
            HungCheck::Silent(_) => Some("silent"),
            HungCheck::StalledStreams { .. } => Some("stalled_streams"),
            HungCheck::DeferredForGatewayLag => Some("deferred_gateway_lag"),
            HungCheck::StallsExcused => Some("stalls_excused"),
        }
    }
}

/// What a check weighs: the worker's silence while a request on it is due, its streams.
pub(crate) struct Evidence {
    pub now: Instant,
    pub silence: Option<Duration>,
    pub streams: StreamCensus,
}

/// The verdict for one check. `stalled_streams` is how many stuck streams it takes (0: the
/// per-stream signal is off). Stuck streams are excused while the worker still completes
/// answers within the window, or while at least as many of its streams have been answering
/// for longer than the window and still are (slow streams among healthy ones); a stream
/// with no chunk yet is never counted (a long prefill is the first-byte deadline's business).
pub(crate) fn check(
    evidence: &Evidence,
    window: Duration,
    stalled_streams: u32,
    lag: &GatewayLag,
) -> HungCheck {
    let now = evidence.now;
    let mut deferred = false;
    if let Some(silence) = evidence.silence.filter(|s| *s >= window) {
        let since = now.checked_sub(silence).unwrap_or(now);
        let net = silence.saturating_sub(lag.overdue_since(since));
        if net >= window {
            return HungCheck::Silent(net);
        }
        deferred = true;
    }
    let needed = usize::try_from(stalled_streams).unwrap_or(usize::MAX);
    if needed > 0 {
        let streams = &evidence.streams.streams;
        let raw_stuck = streams
            .iter()
            .filter(|s| now.saturating_duration_since(s.last) >= window)
            .count();
        let stuck: Vec<Duration> = streams
            .iter()
            .map(|s| lag.age(s.last, now))
            .filter(|age| *age >= window)
            .collect();
        if stuck.len() >= needed {
            let completing = evidence
                .streams
                .last_completion
                .is_some_and(|at| lag.age(at, now) < window);
            let going = streams
                .iter()
                .filter(|s| lag.age(s.last, now) < window && lag.age(s.first, now) >= window)
                .count();
            if completing || going >= stuck.len() {
                return HungCheck::StallsExcused;
            }
            let longest = stuck.iter().copied().max().unwrap_or(window);
            return HungCheck::StalledStreams {
                streams: stuck.len(),
                longest,
            };
        }
        deferred |= raw_stuck >= needed;
    }
    if deferred {
        HungCheck::DeferredForGatewayLag
    } else {
        HungCheck::Fine
    }
}

/// Silence that marks a worker hung: the configured window, or twice the worker's TTFT p90
/// when that is longer (a slow prefill is not a hang).
pub(crate) fn hung_window(config: &HealthConfig, latency: Option<&LatencyFigures>) -> Duration {
    let configured = Duration::from_millis(config.hung.quiet_ms);
    let ttft = latency
        .and_then(|l| l.ttft_p90_seconds)
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(|s| Duration::from_secs_f64((2.0 * s).min(3600.0)))
        .unwrap_or_default();
    configured.max(ttft)
}

#[cfg(test)]
#[path = "hung_tests.rs"]
mod tests;
