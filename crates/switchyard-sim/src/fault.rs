//! Fault injection modes and the switch that holds the active one.

use parking_lot::Mutex;

/// A fault applied to the inference endpoints and `/health`.
///
/// JSON form: `{"mode":"ok"}`, `{"mode":"slow","factor":20}`, `{"mode":"error"}`,
/// `{"mode":"hang"}`, `{"mode":"reset"}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Fault {
    /// Normal behaviour.
    #[default]
    Ok,
    /// Every simulated duration is multiplied by `factor`.
    Slow {
        /// Slow-down multiplier, finite and positive.
        factor: f64,
    },
    /// Answer 500 with an OpenAI error body.
    Error,
    /// Accept the request and never answer until the client goes away.
    Hang,
    /// Drop the TCP connection without any response.
    Reset,
}

impl Fault {
    /// Whether the fault is well formed (a slow factor must be a positive number).
    pub fn is_valid(&self) -> bool {
        match self {
            Fault::Slow { factor } => factor.is_finite() && *factor > 0.0,
            _ => true,
        }
    }

    /// Multiplier this fault applies to simulated durations.
    pub fn slow_factor(&self) -> f64 {
        match self {
            Fault::Slow { factor } => *factor,
            _ => 1.0,
        }
    }
}

/// Shared holder of the active fault; reads are a copy under a tiny lock.
#[derive(Debug, Default)]
pub(crate) struct FaultSwitch {
    current: Mutex<Fault>,
}

impl FaultSwitch {
    pub(crate) fn get(&self) -> Fault {
        *self.current.lock()
    }

    pub(crate) fn set(&self, fault: Fault) {
        *self.current.lock() = fault;
    }
}

/// Faults never touch the observability and control paths, so a test can always
/// see and undo what it injected.
pub(crate) fn path_is_fault_exempt(path: &str) -> bool {
    path == "/metrics" || path.starts_with("/admin/") || path == "/admin"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_shape_round_trips() {
        let slow: Fault = serde_json::from_str(r#"{"mode":"slow","factor":20}"#).unwrap();
        assert_eq!(slow, Fault::Slow { factor: 20.0 });
        assert_eq!(slow.slow_factor(), 20.0);
        let ok: Fault = serde_json::from_str(r#"{"mode":"ok"}"#).unwrap();
        assert_eq!(ok, Fault::Ok);
        assert_eq!(
            serde_json::to_value(Fault::Reset).unwrap(),
            serde_json::json!({"mode": "reset"})
        );
        assert!(serde_json::from_str::<Fault>(r#"{"mode":"melt"}"#).is_err());
    }

    #[test]
    fn validity_and_exempt_paths() {
        assert!(!Fault::Slow { factor: 0.0 }.is_valid());
        assert!(!Fault::Slow { factor: f64::NAN }.is_valid());
        assert!(Fault::Hang.is_valid());
        assert!(path_is_fault_exempt("/metrics"));
        assert!(path_is_fault_exempt("/admin/fault"));
        assert!(!path_is_fault_exempt("/health"));
        assert!(!path_is_fault_exempt("/v1/chat/completions"));
    }
}
