use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// Request priority class. `P0` is the most urgent; the derived order sorts P0 first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Priority {
    P0,
    P1,
    P2,
}

impl Priority {
    pub const ALL: [Priority; 3] = [Priority::P0, Priority::P1, Priority::P2];

    pub fn as_str(self) -> &'static str {
        match self {
            Priority::P0 => "P0",
            Priority::P1 => "P1",
            Priority::P2 => "P2",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// The less urgent of `self` and `max`: a request never outranks its caller's ceiling.
    pub fn clamp_to(self, max: Priority) -> Priority {
        self.max(max)
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseTagError(pub String);

impl fmt::Display for ParseTagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseTagError {}

impl FromStr for Priority {
    type Err = ParseTagError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_uppercase().as_str() {
            "P0" | "0" => Ok(Priority::P0),
            "P1" | "1" => Ok(Priority::P1),
            "P2" | "2" => Ok(Priority::P2),
            _ => Err(ParseTagError(format!(
                "priority must be P0, P1 or P2, got `{s}`"
            ))),
        }
    }
}

/// Why a request exists; spend is reported per purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    Business,
    Warmup,
    Retry,
    Probe,
}

impl Purpose {
    pub const ALL: [Purpose; 4] = [
        Purpose::Business,
        Purpose::Warmup,
        Purpose::Retry,
        Purpose::Probe,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Business => "business",
            Purpose::Warmup => "warmup",
            Purpose::Retry => "retry",
            Purpose::Probe => "probe",
        }
    }
}

impl fmt::Display for Purpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Purpose {
    type Err = ParseTagError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "business" => Ok(Purpose::Business),
            "warmup" => Ok(Purpose::Warmup),
            "retry" => Ok(Purpose::Retry),
            "probe" => Ok(Purpose::Probe),
            _ => Err(ParseTagError(format!(
                "purpose must be business, warmup, retry or probe, got `{s}`"
            ))),
        }
    }
}

/// Tags attached at the first hop; they travel with the request through every layer,
/// survive gateway retries and are forwarded to the worker as headers.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RequestTags {
    pub caller: Arc<str>,
    pub purpose: Purpose,
    pub priority: Priority,
    /// Core callers keep service at the hard budget limit and in survival mode.
    pub core_caller: bool,
    /// How many times the client says it already tried (`x-switchyard-retry-count`).
    pub client_retry: u32,
}

impl RequestTags {
    pub fn anonymous() -> Self {
        Self {
            caller: Arc::from("anonymous"),
            purpose: Purpose::Business,
            priority: Priority::P1,
            core_caller: false,
            client_retry: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_parse_order_and_clamp() {
        assert_eq!("p0".parse::<Priority>().unwrap(), Priority::P0);
        assert_eq!("2".parse::<Priority>().unwrap(), Priority::P2);
        assert!("P3".parse::<Priority>().is_err());
        assert!(Priority::P0 < Priority::P2);
        assert_eq!(Priority::P0.clamp_to(Priority::P1), Priority::P1);
        assert_eq!(Priority::P2.clamp_to(Priority::P1), Priority::P2);
    }

    #[test]
    fn purposes_round_trip() {
        for purpose in Purpose::ALL {
            assert_eq!(purpose.as_str().parse::<Purpose>().unwrap(), purpose);
        }
        assert!("fun".parse::<Purpose>().is_err());
    }
}
