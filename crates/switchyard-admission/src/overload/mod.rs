//! The gateway-wide overload state machine: normal → overloaded → recovering → normal.
//!
//! Inputs: the share of workers the fleet filters out (reported by the gateway), the share
//! of queued requests refused for capacity, and the error rate of admitted requests, over a
//! sliding window. They are classified (`Verdict`): only backend distress (filtered workers,
//! failing requests) enters `Overloaded` and so engages the recovery ramp; the gateway's own
//! queue refusals with healthy workers are demand overload, shed at full capacity. Cutting
//! capacity because demand is high would cause more refusals and never end. Hysteresis both
//! ways: separate entry and exit thresholds, and each condition must hold for a while.
//! The cut is as deep as the distress: failing requests cut to the ramp's first level, but
//! when the only distress is that part of the fleet is filtered out, the workers still in
//! routing are healthy and keep the ramp level their share covers (half the fleet out: 50 %),
//! and recovery climbs from there. Only the workers that were out need the gentle climb.
//! Transitions are evaluated whenever an input arrives or `evaluate` is called, against the
//! injected clock.

mod ramp;
mod verdict;
mod window;

use serde::Serialize;
use std::time::{Duration, Instant};

use crate::config::{DetectorConfig, RampConfig};
use ramp::{Ramp, RampMove};
pub use verdict::Verdict;
use window::{Counts, SlidingWindow};

/// Retry credit earned while recovering cannot pile up beyond this, so a quiet spell does
/// not release a burst of retries afterwards.
const RETRY_CREDIT_CAP: f64 = 4.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GatewayState {
    Normal,
    /// P2 paused, capacity at the ramp's first level.
    Overloaded,
    /// Capacity climbing the ramp; client retries limited to a share of admissions.
    Recovering,
}

impl GatewayState {
    pub const ALL: [GatewayState; 3] = [
        GatewayState::Normal,
        GatewayState::Overloaded,
        GatewayState::Recovering,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GatewayState::Normal => "normal",
            GatewayState::Overloaded => "overloaded",
            GatewayState::Recovering => "recovering",
        }
    }
}

/// Something the owner must apply (capacity, P2 pause) and count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum DetectorEvent {
    Transition {
        from: GatewayState,
        to: GatewayState,
    },
    RampUp,
    RampBack,
    /// While overloaded, the distress deepened (more workers out, or requests failing): the
    /// cut moved down to a lower ramp level.
    CutDeeper,
    /// The classification of the inputs changed to this one.
    Verdict(Verdict),
}

/// What the detector currently sees, for the snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct OverloadSignals {
    pub verdict: Verdict,
    pub filtered_share: f64,
    pub refusal_rate: Option<f64>,
    pub error_rate: Option<f64>,
    pub queued_in_window: u64,
    pub finished_in_window: u64,
}

pub(crate) struct OverloadDetector {
    config: DetectorConfig,
    state: GatewayState,
    since: Instant,
    filtered_share: f64,
    window: SlidingWindow,
    /// When the condition that would leave the current state was first seen, unbroken.
    pending_since: Option<Instant>,
    ramp: Ramp,
    retry_share: f64,
    retry_credit: f64,
    verdict: Verdict,
    /// While overloaded: the ramp level the distress of this episode still allows (the
    /// lowest seen so far); recovery starts from it.
    episode_level: usize,
}

impl OverloadDetector {
    pub(crate) fn new(config: &DetectorConfig, ramp: &RampConfig, now: Instant) -> Self {
        Self {
            config: config.clone(),
            state: GatewayState::Normal,
            since: now,
            filtered_share: 0.0,
            window: SlidingWindow::new(Duration::from_millis(config.window_ms), now),
            pending_since: None,
            ramp: Ramp::new(ramp, now),
            retry_share: ramp.retry_share,
            retry_credit: 0.0,
            verdict: Verdict::Healthy,
            episode_level: 0,
        }
    }

    pub(crate) fn state(&self) -> GatewayState {
        self.state
    }

    pub(crate) fn since(&self) -> Instant {
        self.since
    }

    /// Share of `max_concurrent` to admit now.
    pub(crate) fn capacity_ratio(&self) -> f64 {
        match self.state {
            GatewayState::Normal => 1.0,
            GatewayState::Overloaded => self.ramp.ratio_at(self.episode_level),
            GatewayState::Recovering => self.ramp.ratio(),
        }
    }

    /// Ramp level index and when it began (meaningful while recovering).
    pub(crate) fn ramp_level(&self) -> (usize, Instant) {
        (self.ramp.level(), self.ramp.since())
    }

    pub(crate) fn signals(&self, now: Instant) -> OverloadSignals {
        let totals = self.window.totals(now);
        OverloadSignals {
            verdict: verdict::classify(&self.config, self.filtered_share, &totals),
            filtered_share: self.filtered_share,
            refusal_rate: totals.refusal_rate(self.config.min_samples),
            error_rate: totals.error_rate(self.config.min_samples),
            queued_in_window: totals.queued,
            finished_in_window: totals.finished,
        }
    }

    pub(crate) fn report_fleet(&mut self, filtered_share: f64, now: Instant) -> Vec<DetectorEvent> {
        self.filtered_share = if filtered_share.is_finite() {
            filtered_share.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self.evaluate(now)
    }

    /// A request reached the priority queues; `refused` if it was turned away for capacity.
    pub(crate) fn record_queued(&mut self, refused: bool, now: Instant) -> Vec<DetectorEvent> {
        self.window.record(now, |counts| {
            counts.queued += 1;
            counts.capacity_refusals += u64::from(refused);
        });
        self.evaluate(now)
    }

    /// An admitted request finished.
    pub(crate) fn record_finished(&mut self, failed: bool, now: Instant) -> Vec<DetectorEvent> {
        self.window.record(now, |counts| {
            counts.finished += 1;
            counts.failed += u64::from(failed);
        });
        if self.state == GatewayState::Recovering {
            self.ramp.record(failed);
        }
        self.evaluate(now)
    }

    /// While recovering a client retry needs credit, earned by admitting new requests, so
    /// retries stay within `retry_share` of admissions. Other states: always allowed.
    pub(crate) fn try_admit_retry(&mut self) -> bool {
        if self.state != GatewayState::Recovering {
            return true;
        }
        if self.retry_credit >= 1.0 {
            self.retry_credit -= 1.0;
            true
        } else {
            false
        }
    }

    pub(crate) fn note_new_request_admitted(&mut self) {
        if self.state == GatewayState::Recovering {
            let per_new = self.retry_share / (1.0 - self.retry_share);
            self.retry_credit = (self.retry_credit + per_new).min(RETRY_CREDIT_CAP);
        }
    }

    pub(crate) fn evaluate(&mut self, now: Instant) -> Vec<DetectorEvent> {
        let totals = self.window.current_totals(now);
        let verdict = verdict::classify(&self.config, self.filtered_share, &totals);
        let mut events = Vec::new();
        if verdict != self.verdict {
            self.verdict = verdict;
            events.push(DetectorEvent::Verdict(verdict));
        }
        if self.state == GatewayState::Overloaded {
            let supported = self.supported_level(&totals);
            if supported < self.episode_level {
                self.episode_level = supported;
                events.push(DetectorEvent::CutDeeper);
            }
        }
        events.extend(self.step(verdict, &totals, now));
        events
    }

    /// The ramp level the current distress allows: the first level while admitted requests
    /// fail; otherwise the level the share of workers still in routing covers.
    fn supported_level(&self, totals: &Counts) -> usize {
        let failing = totals
            .error_rate(self.config.min_samples)
            .is_some_and(|rate| rate >= self.config.enter_error_rate);
        if failing {
            0
        } else {
            self.ramp.level_for(1.0 - self.filtered_share)
        }
    }

    #[cfg(test)]
    pub(crate) fn verdict(&self) -> Verdict {
        self.verdict
    }

    fn step(&mut self, verdict: Verdict, totals: &Counts, now: Instant) -> Option<DetectorEvent> {
        match self.state {
            GatewayState::Normal => {
                if self.held(verdict.is_distress(), now, self.config.enter_hold_ms) {
                    self.episode_level = self.supported_level(totals);
                    return Some(self.enter(GatewayState::Overloaded, now));
                }
            }
            GatewayState::Overloaded => {
                if self.held(self.exit_signal(totals), now, self.config.exit_hold_ms) {
                    self.ramp.restart_at(self.episode_level, now);
                    self.retry_credit = 0.0;
                    return Some(self.enter(GatewayState::Recovering, now));
                }
            }
            GatewayState::Recovering => {
                // Our own queue refusals are expected at reduced capacity, so only the fleet
                // can send us back; error rebounds are the ramp's business.
                let fleet_overloaded = self.filtered_share >= self.config.enter_filtered_share;
                if self.held(fleet_overloaded, now, self.config.enter_hold_ms) {
                    self.episode_level = self.supported_level(totals).min(self.ramp.level());
                    return Some(self.enter(GatewayState::Overloaded, now));
                }
                match self.ramp.evaluate(now) {
                    RampMove::Hold => {}
                    RampMove::Up => return Some(DetectorEvent::RampUp),
                    RampMove::Back => return Some(DetectorEvent::RampBack),
                    RampMove::Done => return Some(self.enter(GatewayState::Normal, now)),
                    RampMove::Collapse => {
                        self.episode_level = 0;
                        return Some(self.enter(GatewayState::Overloaded, now));
                    }
                }
            }
        }
        None
    }

    /// Queue refusals are no exit criterion: at reduced capacity we cause them ourselves.
    fn exit_signal(&self, totals: &Counts) -> bool {
        self.filtered_share <= self.config.exit_filtered_share
            && totals
                .error_rate(self.config.min_samples)
                .is_none_or(|rate| rate <= self.config.exit_error_rate)
    }

    /// True once `condition` has held without a break for `hold_ms`.
    fn held(&mut self, condition: bool, now: Instant, hold_ms: u64) -> bool {
        if !condition {
            self.pending_since = None;
            return false;
        }
        let since = *self.pending_since.get_or_insert(now);
        now.saturating_duration_since(since) >= Duration::from_millis(hold_ms)
    }

    fn enter(&mut self, to: GatewayState, now: Instant) -> DetectorEvent {
        let from = self.state;
        self.state = to;
        self.since = now;
        self.pending_since = None;
        DetectorEvent::Transition { from, to }
    }
}

#[cfg(test)]
mod tests;
