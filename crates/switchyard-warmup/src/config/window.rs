//! A daily UTC peak window, written "HH:MM-HH:MM". A window whose end is earlier than its
//! start crosses midnight ("22:00-02:00").

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::clock::{MS_PER_DAY, UnixMillis};

const MINUTES_PER_DAY: u32 = 24 * 60;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(try_from = "String", into = "String")]
pub struct PeakWindow {
    /// Minutes after UTC midnight.
    pub start_minute: u32,
    pub end_minute: u32,
}

impl PeakWindow {
    /// Length of the window itself, without any lead time.
    pub fn length_ms(&self) -> u64 {
        let minutes = (self.end_minute + MINUTES_PER_DAY - self.start_minute) % MINUTES_PER_DAY;
        u64::from(minutes) * 60_000
    }

    /// The span during which the window's resource is kept warm: from `lead_ms` before the
    /// window starts until it ends. Returns the start of the occurrence that contains `now`,
    /// or None when `now` is outside every occurrence.
    pub fn active_span_start(&self, lead_ms: u64, now: UnixMillis) -> Option<UnixMillis> {
        let span = lead_ms.saturating_add(self.length_ms());
        if span >= MS_PER_DAY {
            // Warm all day long: the span starts every day at the same moment.
            return Some(now - self.since_span_start(lead_ms, now));
        }
        let since = self.since_span_start(lead_ms, now);
        (since < span).then(|| now - since)
    }

    /// Time since the most recent daily start of the span (window start − lead).
    fn since_span_start(&self, lead_ms: u64, now: UnixMillis) -> u64 {
        let start_of_day = u64::from(self.start_minute) * 60_000;
        let span_start = (start_of_day + MS_PER_DAY - lead_ms % MS_PER_DAY) % MS_PER_DAY;
        (now % MS_PER_DAY + MS_PER_DAY - span_start) % MS_PER_DAY
    }
}

impl TryFrom<String> for PeakWindow {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        let parse_time = |part: &str| -> Option<u32> {
            let (hours, minutes) = part.trim().split_once(':')?;
            let (hours, minutes): (u32, u32) = (hours.parse().ok()?, minutes.parse().ok()?);
            (hours < 24 && minutes < 60 && part.trim().len() == 5).then_some(hours * 60 + minutes)
        };
        let error = || format!("peak window must be \"HH:MM-HH:MM\" (UTC), got `{text}`");
        let (start, end) = text.split_once('-').ok_or_else(error)?;
        let (start_minute, end_minute) = (
            parse_time(start).ok_or_else(error)?,
            parse_time(end).ok_or_else(error)?,
        );
        if start_minute == end_minute {
            return Err(format!("peak window `{text}` is empty"));
        }
        Ok(Self {
            start_minute,
            end_minute,
        })
    }
}

impl From<PeakWindow> for String {
    fn from(window: PeakWindow) -> Self {
        window.to_string()
    }
}

impl fmt::Display for PeakWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:02}:{:02}-{:02}:{:02}",
            self.start_minute / 60,
            self.start_minute % 60,
            self.end_minute / 60,
            self.end_minute % 60
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000;

    fn window(text: &str) -> PeakWindow {
        PeakWindow::try_from(text.to_string()).unwrap()
    }

    #[test]
    fn parses_prints_and_rejects() {
        assert_eq!(window("09:00-11:30").to_string(), "09:00-11:30");
        assert_eq!(window("09:00-11:30").length_ms(), 150 * MIN);
        assert_eq!(window("22:00-02:00").length_ms(), 240 * MIN);
        for bad in [
            "9:00-11:00",
            "09:00",
            "25:00-26:00",
            "09:60-10:00",
            "10:00-10:00",
        ] {
            assert!(PeakWindow::try_from(bad.to_string()).is_err(), "{bad}");
        }
    }

    #[test]
    fn span_starts_lead_time_before_the_window_and_ends_with_it() {
        let day = 20_000 * MS_PER_DAY; // some UTC midnight
        let peak = window("09:00-11:00");
        let lead = 20 * MIN;
        assert_eq!(
            peak.active_span_start(lead, day + 8 * 60 * MIN + 39 * MIN),
            None
        );
        let span_start = day + 8 * 60 * MIN + 40 * MIN;
        assert_eq!(peak.active_span_start(lead, span_start), Some(span_start));
        assert_eq!(
            peak.active_span_start(lead, day + 10 * 60 * MIN + 59 * MIN),
            Some(span_start)
        );
        assert_eq!(peak.active_span_start(lead, day + 11 * 60 * MIN), None);
    }

    #[test]
    fn windows_cross_midnight() {
        let day = 20_000 * MS_PER_DAY;
        let peak = window("23:30-00:30");
        let lead = 60 * MIN; // the span starts 22:30 the day before
        let span_start = day - 90 * MIN;
        assert_eq!(
            peak.active_span_start(lead, day + 10 * MIN),
            Some(span_start)
        );
        assert_eq!(peak.active_span_start(lead, day + 30 * MIN), None);
        let lead_past_midnight = window("00:10-01:00");
        assert_eq!(
            lead_past_midnight.active_span_start(20 * MIN, day - 5 * MIN),
            Some(day - 10 * MIN)
        );
    }
}
