//! `[cluster.raft]`: the Raft group's timings. openraft bounds every AppendEntries call
//! (heartbeats included) by the heartbeat interval and every vote request by the smallest
//! election timeout, so both must exceed the round trip between replicas: with replicas in
//! different regions the defaults (tuned for one data centre) make every heartbeat time out
//! and leadership churn. Disk stalls need no raised timings: the vendored openraft's leader
//! keeps heartbeating while it waits for an fsync (`crates/third_party/openraft/PATCHES.md`).

use serde::{Deserialize, Serialize};
use std::time::Duration;
use switchyard_ledger::config::RaftTimings;

/// How many seconds of spend a lease asks for, given the Raft timings. A node renews once
/// half of its lease is used, so that half must outlast a slow renewal; with raised timings
/// (distant replicas, slow disks) a renewal can take up to a failover, so the window is at
/// least `failover_bound`. The default timings' bound (1.6 s) is below the default window.
pub fn lease_spend_window(timings: &RaftTimings, configured: Duration) -> Duration {
    configured.max(timings.failover_bound())
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct RaftTimingConfig {
    /// How often the leader sends heartbeats; also the timeout of each AppendEntries call,
    /// so it must exceed the round trip to the farthest replica plus a follower's fsync
    /// (default 100 ms).
    pub heartbeat_interval_ms: u64,
    /// A follower that hears no leader for the maximum (openraft's leader lease) plus a
    /// random time between these two starts an election (defaults 400 and 800 ms: 1.2-1.6 s
    /// of silence). The minimum is also the
    /// timeout of a vote request. A dead leader is replaced that long after it dies;
    /// requests whose lease runs dry meanwhile wait (at least 2 x the maximum).
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    /// Timeout of sending one snapshot chunk (1 MiB) to a lagging follower or new learner
    /// (default 1000 ms).
    pub install_snapshot_timeout_ms: u64,
}

impl Default for RaftTimingConfig {
    fn default() -> Self {
        let ledger = RaftTimings::default();
        Self {
            heartbeat_interval_ms: ledger.heartbeat_interval_ms,
            election_timeout_min_ms: ledger.election_timeout_min_ms,
            election_timeout_max_ms: ledger.election_timeout_max_ms,
            install_snapshot_timeout_ms: ledger.install_snapshot_timeout_ms,
        }
    }
}

impl RaftTimingConfig {
    /// Returns the path and problem of the first invalid field.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let field = |name: &str| format!("cluster.raft.{name}");
        if self.heartbeat_interval_ms == 0 {
            return Err((field("heartbeat_interval_ms"), "must be at least 1".into()));
        }
        // One late or lost heartbeat must not start an election.
        if self.election_timeout_min_ms < self.heartbeat_interval_ms.saturating_mul(2) {
            return Err((
                field("election_timeout_min_ms"),
                format!(
                    "must be at least twice heartbeat_interval_ms ({} ms), so one late \
                     heartbeat does not start an election",
                    self.heartbeat_interval_ms
                ),
            ));
        }
        if self.election_timeout_max_ms <= self.election_timeout_min_ms {
            return Err((
                field("election_timeout_max_ms"),
                format!(
                    "must exceed election_timeout_min_ms ({} ms): the timeout is drawn \
                     between them so replicas do not all stand at once",
                    self.election_timeout_min_ms
                ),
            ));
        }
        if self.install_snapshot_timeout_ms < self.heartbeat_interval_ms {
            return Err((
                field("install_snapshot_timeout_ms"),
                format!(
                    "must be at least heartbeat_interval_ms ({} ms): a snapshot chunk \
                     crosses the same link as a heartbeat, with more bytes",
                    self.heartbeat_interval_ms
                ),
            ));
        }
        Ok(())
    }

    /// The ledger's timings with these laid over them (snapshot policy unchanged).
    pub fn apply_to(&self, timings: &mut RaftTimings) {
        timings.heartbeat_interval_ms = self.heartbeat_interval_ms;
        timings.election_timeout_min_ms = self.election_timeout_min_ms;
        timings.election_timeout_max_ms = self.election_timeout_max_ms;
        timings.install_snapshot_timeout_ms = self.install_snapshot_timeout_ms;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raised_timings_widen_the_lease_window_and_the_defaults_keep_it() {
        let configured = Duration::from_secs(2);
        let mut timings = RaftTimings::default();
        assert_eq!(lease_spend_window(&timings, configured), configured);
        // Replicas 100 ms apart: elections 1.2-2.4 s, so a failover may take 4.8 s.
        RaftTimingConfig {
            heartbeat_interval_ms: 300,
            election_timeout_min_ms: 1_200,
            election_timeout_max_ms: 2_400,
            install_snapshot_timeout_ms: 3_000,
        }
        .apply_to(&mut timings);
        assert_eq!(
            lease_spend_window(&timings, configured),
            Duration::from_millis(4_800)
        );
    }

    fn invalid_field(config: RaftTimingConfig) -> String {
        config.validate().unwrap_err().0
    }

    #[test]
    fn the_defaults_are_valid_and_those_of_the_ledger() {
        let config = RaftTimingConfig::default();
        assert_eq!(config.validate(), Ok(()));
        let mut timings = RaftTimings {
            heartbeat_interval_ms: 1,
            election_timeout_min_ms: 2,
            election_timeout_max_ms: 3,
            install_snapshot_timeout_ms: 4,
            ..RaftTimings::default()
        };
        config.apply_to(&mut timings);
        let ledger = RaftTimings::default();
        assert_eq!(timings.heartbeat_interval_ms, ledger.heartbeat_interval_ms);
        assert_eq!(timings.election_timeout_min_ms, 400);
        assert_eq!(timings.election_timeout_max_ms, 800);
        assert_eq!(timings.install_snapshot_timeout_ms, 1000);
    }

    #[test]
    fn each_bad_timing_is_refused_naming_its_field() {
        let ok = RaftTimingConfig {
            heartbeat_interval_ms: 300,
            election_timeout_min_ms: 1200,
            election_timeout_max_ms: 2400,
            install_snapshot_timeout_ms: 3000,
        };
        assert_eq!(ok.validate(), Ok(()));
        assert_eq!(
            invalid_field(RaftTimingConfig {
                heartbeat_interval_ms: 0,
                ..ok.clone()
            }),
            "cluster.raft.heartbeat_interval_ms"
        );
        // Exceeding the heartbeat is not enough: one late heartbeat would start an election.
        assert_eq!(
            invalid_field(RaftTimingConfig {
                election_timeout_min_ms: 599,
                ..ok.clone()
            }),
            "cluster.raft.election_timeout_min_ms"
        );
        assert_eq!(
            RaftTimingConfig {
                election_timeout_min_ms: 600,
                ..ok.clone()
            }
            .validate(),
            Ok(())
        );
        assert_eq!(
            invalid_field(RaftTimingConfig {
                election_timeout_max_ms: 1200,
                ..ok.clone()
            }),
            "cluster.raft.election_timeout_max_ms"
        );
        assert_eq!(
            invalid_field(RaftTimingConfig {
                install_snapshot_timeout_ms: 299,
                ..ok.clone()
            }),
            "cluster.raft.install_snapshot_timeout_ms"
        );
    }

    #[test]
    fn the_config_file_table_is_read_and_checked() {
        let config =
            crate::Config::parse("[cluster.raft]\nheartbeat_interval_ms = 300\nelection_timeout_min_ms = 1200\nelection_timeout_max_ms = 2400\n")
                .unwrap();
        assert_eq!(config.cluster.raft.heartbeat_interval_ms, 300);
        assert_eq!(config.cluster.raft.election_timeout_max_ms, 2400);
        assert_eq!(config.cluster.raft.install_snapshot_timeout_ms, 1000);
        let refused = crate::Config::parse("[cluster.raft]\nheartbeat_interval_ms = 300\n")
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("cluster.raft.election_timeout_min_ms"),
            "{refused}"
        );
        let unknown = crate::Config::parse("[cluster.raft]\nheartbeat_ms = 300\n")
            .unwrap_err()
            .to_string();
        assert!(unknown.contains("heartbeat_ms"), "{unknown}");
    }

    #[tokio::test]
    async fn configured_timings_reach_openraft() {
        use std::sync::Arc;
        let timings = RaftTimingConfig {
            heartbeat_interval_ms: 70,
            election_timeout_min_ms: 310,
            election_timeout_max_ms: 620,
            install_snapshot_timeout_ms: 2_500,
        };
        let cluster = super::super::ClusterConfig {
            raft: timings,
            ..super::super::ClusterConfig::default()
        };
        let runtime = super::super::LedgerRuntime::start(
            &cluster,
            &switchyard_admission::AdmissionConfig::default(),
            &prometheus::Registry::new(),
            Arc::new(switchyard_core::SystemClock),
            None,
        )
        .await
        .unwrap();
        let raft = runtime.node.raft().config().clone();
        assert_eq!(raft.heartbeat_interval, 70);
        assert_eq!(raft.election_timeout_min, 310);
        assert_eq!(raft.election_timeout_max, 620);
        assert_eq!(raft.install_snapshot_timeout, 2_500);
        runtime.shutdown().await;
    }
}
