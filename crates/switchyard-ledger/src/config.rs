//! Configuration of one ledger node. Every duration is a default the gateway may override.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The cluster id of a node that is given none.
pub const DEFAULT_CLUSTER_ID: &str = "switchyard";

#[derive(Clone, Debug)]
pub struct LedgerConfig {
    pub node_id: u64,
    /// Address the Raft/ledger HTTP server binds (`127.0.0.1:0` picks a free port).
    pub raft_addr: String,
    /// Address other nodes use to reach this one; defaults to the bound address.
    pub advertise_addr: Option<String>,
    /// Directory of `ledger.redb` (log, vote, snapshot).
    pub data_dir: PathBuf,
    /// Shared secret every ledger RPC must carry (prints as `<redacted>`).
    pub cluster_secret: switchyard_core::Secret,
    /// Mutual TLS with the cluster CA on the Raft/ledger server and every call to a peer;
    /// `None`: plain HTTP (a private network only).
    pub tls: Option<crate::network::PeerTls>,
    /// Name of the group this node belongs to; the data dir is bound to it (and to
    /// `node_id`) on first start and refused under another one.
    pub cluster_id: String,
    pub raft: RaftTimings,
    pub lease: LeaseConfig,
    /// How often settled spend is batched into one replicated report (default 1 s).
    pub spend_flush_interval: Duration,
    /// Hard timeout of one node-to-node HTTP call (default 1 s).
    pub rpc_timeout: Duration,
    /// How long a write waits for a leader before giving up (default 3 s).
    pub write_timeout: Duration,
    /// A quiet leader proposes a `Tick` this often so expiries happen on time (default 1 s).
    pub tick_interval: Duration,
    /// The wall clock this node reads once per term while it leads; ledger time then follows
    /// its monotonic clock (`node/ledger_time.rs`).
    pub wall_clock: LedgerWallClock,
}

/// The system wall clock plus an offset: what a leader anchors a term's ledger time to. The
/// offset is zero in production; the chaos suite moves it to skew one node against the others
/// (the state machine must stay safe when leaders disagree about the time). Clones share it.
#[derive(Clone, Debug, Default)]
pub struct LedgerWallClock {
    offset_ms: Arc<AtomicI64>,
}

impl LedgerWallClock {
    /// Milliseconds since the Unix epoch, skewed by the offset.
    pub fn now_ms(&self) -> u64 {
        let system = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        u64::try_from(system.saturating_add(self.offset_ms())).unwrap_or(0)
    }

    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }

    pub fn set_offset_ms(&self, offset_ms: i64) {
        self.offset_ms.store(offset_ms, Ordering::Relaxed);
    }
}

#[derive(Clone, Debug)]
pub struct RaftTimings {
    pub heartbeat_interval_ms: u64,
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    /// Timeout of sending one snapshot chunk to a follower or learner.
    pub install_snapshot_timeout_ms: u64,
    /// Build a snapshot (and purge the log) after this many applied entries.
    pub snapshot_after_logs: u64,
    /// Entries kept behind a snapshot for followers that are only a little behind.
    pub logs_kept_after_snapshot: u64,
}

/// A follower stands after hearing nothing for its leader lease (`election_timeout_max_ms`)
/// plus a drawn election timeout: 1.2-1.6 s with these defaults. Upstream openraft 0.9 sends
/// no heartbeat while its leader waits for an fsync, so a disk stalling longer (1.2-2.5 s
/// were common on a disk shared with builds) deposed a healthy leader; the vendored copy keeps
/// heartbeating meanwhile (`crates/third_party/openraft/PATCHES.md`). Raising these would lengthen every
/// failover and leadership handover past the 3 s write timeout (a handover under writes then
/// loses writes), so the defaults stay.
impl Default for RaftTimings {
    fn default() -> Self {
        Self {
            heartbeat_interval_ms: 100,
            election_timeout_min_ms: 400,
            election_timeout_max_ms: 800,
            install_snapshot_timeout_ms: 1_000,
            snapshot_after_logs: 5_000,
            logs_kept_after_snapshot: 1_000,
        }
    }
}

impl RaftTimings {
    /// The longest a follower waits without hearing a leader before it stands: its leader
    /// lease (`election_timeout_max_ms` in openraft 0.9) plus an election timeout of at most
    /// the maximum. Requests wait at least this long for a renewal
    /// (`LeaseConfig::renewal_wait`), so the renewal after a failover still covers a request
    /// whose lease ran dry when its leader died (1.6 s with the default timings, below the
    /// default wait; it raises the wait with timings raised for distant replicas or slow disks).
    pub fn failover_bound(&self) -> Duration {
        Duration::from_millis(self.election_timeout_max_ms.saturating_mul(2))
    }
}

#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// Lease length asked for (the ledger caps it at 60 s). Default 10 s.
    pub ttl: Duration,
    /// The node stops spending this long before its lease's local deadline; covers clock
    /// skew between leaders (each anchors ledger time to its wall clock when elected) and
    /// apply delay. Default 1 s.
    pub safety_margin: Duration,
    /// How often the keeper looks at every lease (default 200 ms).
    pub check_interval: Duration,
    /// Renew when this share of the lease's time has passed (default 0.5).
    pub renew_after_fraction: f64,
    /// Smallest demand a node reports for a budget it holds (default 1 000 tokens).
    pub min_demand_tokens: u64,
    /// Demand = tokens asked for since the last renewal, as a rate, times `spend_window`,
    /// times this (1.5).
    pub demand_headroom: f64,
    /// How many seconds of this node's observed spend one lease asks for (default 2 s). Short
    /// leases keep the tail of a budget where the requests are instead of in idle replicas,
    /// and bound what a crashed replica strands; the TTL only bounds how long a grant is valid.
    pub spend_window: Duration,
    /// Longest a request waits for a renewal its lease needs before it is refused (default
    /// 2 s). A reachable ledger answers in milliseconds; the bound covers a slow one. The node
    /// waits at least `RaftTimings::failover_bound`, so the renewal that follows an election
    /// still covers the requests waiting for it when the Raft timings are raised.
    pub renewal_wait: Duration,
    /// How many of the recently observed latencies a lease covers (default 3): the keeper
    /// renews before less than `rate × latency_cover × renewal latency` of a grant is left,
    /// asks for `spend_window` plus that much time of spend (in all at most `ttl −
    /// safety_margin`, what a lease can spend before its local deadline), and the spend
    /// journal's ceiling runs at least `rate × latency_cover × sync latency` ahead of the
    /// spend (within the fresh grant). 0 sizes leases for `spend_window` alone.
    /// The latencies are decaying maxima of what this node saw in committed answers
    /// (`lease::LatencyTracker`), so leases widen while a leader's disk or the link is slow
    /// and shrink back after.
    pub latency_cover: f64,
}

impl Default for LeaseConfig {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(10),
            safety_margin: Duration::from_secs(1),
            check_interval: Duration::from_millis(200),
            renew_after_fraction: 0.5,
            min_demand_tokens: 1_000,
            demand_headroom: 1.5,
            spend_window: Duration::from_secs(2),
            renewal_wait: Duration::from_secs(2),
            latency_cover: 3.0,
        }
    }
}

impl LedgerConfig {
    pub fn new(node_id: u64, raft_addr: impl Into<String>, data_dir: impl Into<PathBuf>) -> Self {
        Self {
            node_id,
            raft_addr: raft_addr.into(),
            advertise_addr: None,
            data_dir: data_dir.into(),
            cluster_secret: switchyard_core::Secret::default(),
            tls: None,
            cluster_id: DEFAULT_CLUSTER_ID.into(),
            raft: RaftTimings::default(),
            lease: LeaseConfig::default(),
            spend_flush_interval: Duration::from_secs(1),
            rpc_timeout: Duration::from_secs(1),
            write_timeout: Duration::from_secs(3),
            tick_interval: Duration::from_secs(1),
            wall_clock: LedgerWallClock::default(),
        }
    }

    /// Short timeouts for tests on loopback.
    pub fn for_tests(mut self) -> Self {
        self.raft = RaftTimings {
            heartbeat_interval_ms: 50,
            election_timeout_min_ms: 200,
            election_timeout_max_ms: 400,
            install_snapshot_timeout_ms: 500,
            snapshot_after_logs: 200,
            logs_kept_after_snapshot: 20,
        };
        self.rpc_timeout = Duration::from_millis(500);
        self.write_timeout = Duration::from_secs(3);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_wait_out_a_failover_with_raised_timings() {
        let defaults = RaftTimings::default();
        let lease = LeaseConfig::default();
        // A follower stands after at most its leader lease plus the longest timeout.
        assert_eq!(
            defaults.failover_bound(),
            Duration::from_millis(2 * defaults.election_timeout_max_ms)
        );
        assert_eq!(
            lease.renewal_wait.max(defaults.failover_bound()),
            lease.renewal_wait
        );
        let raised = RaftTimings {
            heartbeat_interval_ms: 300,
            election_timeout_min_ms: 1_200,
            election_timeout_max_ms: 2_400,
            ..RaftTimings::default()
        };
        assert_eq!(
            lease.renewal_wait.max(raised.failover_bound()),
            Duration::from_millis(4_800)
        );
    }

    #[test]
    fn the_wall_clock_moves_by_its_offset_and_clones_share_it() {
        let clock = LedgerWallClock::default();
        let shared = clock.clone();
        let before = clock.now_ms();
        shared.set_offset_ms(30_000);
        let ahead = clock.now_ms();
        assert!(
            ahead >= before + 30_000 && ahead < before + 31_000,
            "{ahead} vs {before}"
        );
        shared.set_offset_ms(-30_000);
        let behind = clock.now_ms();
        assert!(
            behind + 30_000 >= before && behind < before,
            "{behind} vs {before}"
        );
        assert_eq!(clock.offset_ms(), -30_000);
    }
}
