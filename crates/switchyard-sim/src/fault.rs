//! Fault injection modes and the switch that holds the active one.

use parking_lot::Mutex;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// A fault applied to the inference endpoints and `/health`.
///
/// JSON form: `{"mode":"ok"}`, `{"mode":"slow","factor":20}`, `{"mode":"error"}`,
/// `{"mode":"hang"}`, `{"mode":"reset"}`, `{"mode":"engine_hang"}`,
/// `{"mode":"stall","after_chunks":3}`, `{"mode":"trickle","chunk_interval_ms":500}`,
/// `{"mode":"unavailable","for_ms":10000}`.
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
    /// Accept the request and never answer until the client goes away (`/health` too).
    Hang,
    /// Drop the TCP connection without any response.
    Reset,
    /// The engine is stuck while the HTTP server is fine: `/health` and discovery answer
    /// 200, inference requests are accepted and never get a byte (no headers, no tokens),
    /// and requests already generating stop where they are. Clearing the fault resumes them.
    EngineHang,
    /// Streams send `after_chunks` token chunks, then nothing more while the fault is set
    /// (the connection stays open); non-streaming answers never come.
    Stall {
        /// Token chunks each stream sends before it stalls.
        after_chunks: u32,
    },
    /// Every output token after the first takes `chunk_interval_ms` (a slow trickle).
    Trickle {
        /// Pause before each token after the first, in milliseconds (positive).
        chunk_interval_ms: u64,
    },
    /// Answer 503 (an engine that is restarting or shedding load), `/health` included.
    /// With `for_ms` the worker recovers by itself that long after the fault was set.
    Unavailable {
        /// Milliseconds until the fault clears itself (positive); absent = until changed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        for_ms: Option<u64>,
    },
}

impl Fault {
    /// Whether the fault is well formed (a slow factor must be a positive number).
    pub fn is_valid(&self) -> bool {
        match self {
            Fault::Slow { factor } => factor.is_finite() && *factor > 0.0,
            Fault::Trickle { chunk_interval_ms } => *chunk_interval_ms > 0,
            Fault::Unavailable { for_ms } => for_ms.is_none_or(|ms| ms > 0),
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

    /// How long the fault lasts before it clears itself, if it does.
    pub fn lifetime(&self) -> Option<Duration> {
        match self {
            Fault::Unavailable { for_ms } => for_ms.map(Duration::from_millis),
            _ => None,
        }
    }

    /// Whether a request that already sent `chunks_sent` token chunks must stop here.
    pub(crate) fn stalls_after(&self, chunks_sent: usize) -> bool {
        match self {
            Fault::EngineHang => true,
            Fault::Stall { after_chunks } => chunks_sent >= *after_chunks as usize,
            _ => false,
        }
    }
}

/// Shared holder of the active fault; reads are a copy, and waiters are woken on change.
#[derive(Debug)]
pub(crate) struct FaultSwitch {
    current: watch::Sender<Fault>,
    /// When the active fault clears itself (a fault set with a lifetime), checked on read
    /// so no timer task has to outlive the request that set it.
    expires_at: Mutex<Option<Instant>>,
}

impl Default for FaultSwitch {
    fn default() -> Self {
        Self {
            current: watch::Sender::new(Fault::Ok),
            expires_at: Mutex::new(None),
        }
    }
}

impl FaultSwitch {
    pub(crate) fn get(&self) -> Fault {
        {
            let mut expires_at = self.expires_at.lock();
            if expires_at.is_some_and(|at| Instant::now() >= at) {
                *expires_at = None;
                self.current.send_replace(Fault::Ok);
            }
        }
        *self.current.borrow()
    }

    pub(crate) fn set(&self, fault: Fault) {
        *self.expires_at.lock() = fault.lifetime().map(|lifetime| Instant::now() + lifetime);
        self.current.send_replace(fault);
    }

    /// Returns once the active fault no longer stalls a request that sent `chunks_sent`
    /// chunks (at once when it does not). Dropping the future is always fine.
    pub(crate) async fn wait_while_stalled(&self, chunks_sent: usize) {
        let mut changes = self.current.subscribe();
        // The sender lives as long as the engine, which outlives every request.
        let _ = changes
            .wait_for(|fault| !fault.stalls_after(chunks_sent))
            .await;
    }
}

/// Faults never touch the observability and control paths, so a test can always
/// see and undo what it injected.
pub(crate) fn path_is_fault_exempt(path: &str) -> bool {
    path == "/metrics" || path.starts_with("/admin/") || path == "/admin"
}

/// Paths that run the engine; only these are held by an engine hang.
pub(crate) fn path_is_inference(path: &str) -> bool {
    path == "/v1/chat/completions" || path == "/v1/completions"
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
        let stall: Fault = serde_json::from_str(r#"{"mode":"stall","after_chunks":3}"#).unwrap();
        assert_eq!(stall, Fault::Stall { after_chunks: 3 });
        let trickle: Fault =
            serde_json::from_str(r#"{"mode":"trickle","chunk_interval_ms":500}"#).unwrap();
        assert_eq!(
            trickle,
            Fault::Trickle {
                chunk_interval_ms: 500
            }
        );
        assert_eq!(
            serde_json::to_value(Fault::EngineHang).unwrap(),
            serde_json::json!({"mode": "engine_hang"})
        );
    }

    #[test]
    fn validity_and_exempt_paths() {
        assert!(!Fault::Slow { factor: 0.0 }.is_valid());
        assert!(!Fault::Slow { factor: f64::NAN }.is_valid());
        assert!(
            !Fault::Trickle {
                chunk_interval_ms: 0
            }
            .is_valid()
        );
        assert!(Fault::Hang.is_valid());
        assert!(path_is_fault_exempt("/metrics"));
        assert!(path_is_fault_exempt("/admin/fault"));
        assert!(!path_is_fault_exempt("/health"));
        assert!(!path_is_fault_exempt("/v1/chat/completions"));
        assert!(path_is_inference("/v1/completions"));
        assert!(!path_is_inference("/health"));
    }

    #[test]
    fn unavailable_takes_an_optional_positive_lifetime() {
        let timed: Fault =
            serde_json::from_str(r#"{"mode":"unavailable","for_ms":10000}"#).unwrap();
        assert_eq!(
            timed,
            Fault::Unavailable {
                for_ms: Some(10_000)
            }
        );
        assert_eq!(timed.lifetime(), Some(Duration::from_secs(10)));
        let open: Fault = serde_json::from_str(r#"{"mode":"unavailable"}"#).unwrap();
        assert_eq!(open, Fault::Unavailable { for_ms: None });
        assert_eq!(open.lifetime(), None);
        assert_eq!(
            serde_json::to_value(open).unwrap(),
            serde_json::json!({"mode": "unavailable"})
        );
        assert!(open.is_valid() && timed.is_valid());
        assert!(!Fault::Unavailable { for_ms: Some(0) }.is_valid());
    }

    #[tokio::test(start_paused = true)]
    async fn a_fault_with_a_lifetime_clears_itself_and_a_later_set_wins() {
        let switch = FaultSwitch::default();
        let outage = Fault::Unavailable {
            for_ms: Some(10_000),
        };
        switch.set(outage);
        tokio::time::sleep(Duration::from_millis(9_999)).await;
        assert_eq!(switch.get(), outage);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(switch.get(), Fault::Ok, "recovered after 10 s");

        switch.set(outage);
        switch.set(Fault::Error);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(
            switch.get(),
            Fault::Error,
            "a fault set later is not cleared"
        );
    }

    #[test]
    fn stall_points() {
        let stall = Fault::Stall { after_chunks: 2 };
        assert!(!stall.stalls_after(1));
        assert!(stall.stalls_after(2));
        assert!(Fault::EngineHang.stalls_after(0));
        assert!(!Fault::Ok.stalls_after(100));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_waiter_resumes_when_the_fault_is_cleared() {
        let switch = std::sync::Arc::new(FaultSwitch::default());
        switch.set(Fault::EngineHang);
        let waiter = {
            let switch = std::sync::Arc::clone(&switch);
            tokio::spawn(async move { switch.wait_while_stalled(0).await })
        };
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!waiter.is_finished(), "held while the engine hangs");
        switch.set(Fault::Ok);
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .unwrap()
            .unwrap();
    }
}
