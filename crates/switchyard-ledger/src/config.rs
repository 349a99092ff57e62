//! Configuration of one ledger node. Every duration is a default the gateway may override.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct LedgerConfig {
    pub node_id: u64,
    /// Address the Raft/ledger HTTP server binds (`127.0.0.1:0` picks a free port).
    pub raft_addr: String,
    /// Address other nodes use to reach this one; defaults to the bound address.
    pub advertise_addr: Option<String>,
    /// Directory of `ledger.redb` (log, vote, snapshot).
    pub data_dir: PathBuf,
    /// Shared secret every ledger RPC must carry.
    pub cluster_secret: String,
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
}

#[derive(Clone, Debug)]
pub struct RaftTimings {
    pub heartbeat_interval_ms: u64,
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    /// Build a snapshot (and purge the log) after this many applied entries.
    pub snapshot_after_logs: u64,
    /// Entries kept behind a snapshot for followers that are only a little behind.
    pub logs_kept_after_snapshot: u64,
}

impl Default for RaftTimings {
    fn default() -> Self {
        Self {
            heartbeat_interval_ms: 100,
            election_timeout_min_ms: 400,
            election_timeout_max_ms: 800,
            snapshot_after_logs: 5_000,
            logs_kept_after_snapshot: 1_000,
        }
    }
}

#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// Lease length asked for (the ledger caps it at 60 s). Default 10 s.
    pub ttl: Duration,
    /// The node stops spending this long before its lease's local deadline; covers clock
    /// skew between leaders (ledger time is their wall clock) and apply delay. Default 1 s.
    pub safety_margin: Duration,
    /// How often the keeper looks at every lease (default 200 ms).
    pub check_interval: Duration,
    /// Renew when this share of the lease's time has passed (default 0.5).
    pub renew_after_fraction: f64,
    /// Smallest demand a node reports for a budget it holds (default 1 000 tokens).
    pub min_demand_tokens: u64,
    /// Demand = tokens asked for in the last window, scaled to one TTL, times this (1.5).
    pub demand_headroom: f64,
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
            cluster_secret: String::new(),
            raft: RaftTimings::default(),
            lease: LeaseConfig::default(),
            spend_flush_interval: Duration::from_secs(1),
            rpc_timeout: Duration::from_secs(1),
            write_timeout: Duration::from_secs(3),
            tick_interval: Duration::from_secs(1),
        }
    }

    /// Short timeouts for tests on loopback.
    pub fn for_tests(mut self) -> Self {
        self.raft = RaftTimings {
            heartbeat_interval_ms: 50,
            election_timeout_min_ms: 200,
            election_timeout_max_ms: 400,
            snapshot_after_logs: 200,
            logs_kept_after_snapshot: 20,
        };
        self.rpc_timeout = Duration::from_millis(500);
        self.write_timeout = Duration::from_secs(3);
        self
    }
}
