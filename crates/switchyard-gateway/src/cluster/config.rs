use serde::{Deserialize, Serialize};
use switchyard_core::Secret;
use switchyard_ledger::state::DEFAULT_AUDIT_RETENTION;

use super::raft_timing::RaftTimingConfig;

/// This replica's place in the Raft group that replicates the quota ledger and override
/// registry. Scale-out rule: 3 or 5 voters; every further replica joins as a learner.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// false: budgets live in this process only (no replication, lost on restart).
    pub enabled: bool,
    pub node_id: u64,
    /// Where the Raft/ledger HTTP server listens (`127.0.0.1:0` picks a free port).
    pub raft_addr: String,
    /// Address other replicas use to reach this one; empty = the bound address.
    pub advertise_addr: String,
    /// Directory of the durable log and state (`ledger.redb`). Empty = a temporary directory,
    /// deleted at exit: only for a single node (a demo). Required with `members` or `join`: a
    /// voter that forgets its vote and log on restart breaks Raft's safety.
    pub data_dir: String,
    /// Name of the Raft group. The data dir is bound to it and to `node_id` on first start;
    /// a replica pointed at another node's or another cluster's data dir refuses to start.
    pub cluster_id: String,
    /// Shared secret on every ledger RPC; `SWITCHYARD_CLUSTER_SECRET` overrides it. Required
    /// with `members` or `join`; at least [`MIN_SECRET_LEN`] characters. Never serialised out.
    pub secret: Secret,
    /// Static bootstrap: every initial voter. The lowest id initializes the group.
    pub members: Vec<ClusterMember>,
    /// Raft address of any existing member: join as a learner (promoted to voter while the
    /// group has fewer than 3 voters).
    pub join: String,
    /// Newest entries the replicated audit log keeps (older ones are evicted on every replica
    /// alike). Restart-only: a replica that leads a term (from start-up on) proposes it when
    /// the group holds another value, so once every replica has restarted with a new value,
    /// whichever leads sets it for the fleet.
    pub audit_retention_entries: u64,
    /// Mutual TLS between replicas: the cluster CA bundle (PEM) every replica's certificate
    /// must chain to, and this replica's certificate chain and key. All three or none; when
    /// set, the Raft/ledger port speaks only TLS and refuses a peer without a certificate of
    /// the cluster CA. The certificate must name the address peers dial (`advertise_addr`,
    /// `members[].addr`, `join`) and allow both server and client authentication.
    pub tls_ca_path: String,
    pub tls_cert_path: String,
    pub tls_key_path: String,
    /// Raft heartbeat, election and snapshot timeouts (`[cluster.raft]`); raise them above
    /// the round trip when replicas are far apart. Restart-only.
    pub raft: RaftTimingConfig,
}

/// Shortest accepted cluster secret or admin key: anyone holding the cluster secret can write
/// any command to the ledger, so it must not be guessable.
pub const MIN_SECRET_LEN: usize = 16;

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClusterMember {
    pub id: u64,
    pub addr: String,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            node_id: 1,
            raft_addr: "127.0.0.1:0".into(),
            advertise_addr: String::new(),
            data_dir: String::new(),
            cluster_id: switchyard_ledger::config::DEFAULT_CLUSTER_ID.into(),
            secret: Secret::default(),
            members: Vec::new(),
            join: String::new(),
            audit_retention_entries: DEFAULT_AUDIT_RETENTION,
            tls_ca_path: String::new(),
            tls_cert_path: String::new(),
            tls_key_path: String::new(),
            raft: RaftTimingConfig::default(),
        }
    }
}

impl ClusterConfig {
    /// Returns the path and problem of the first invalid field.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.audit_retention_entries == 0 {
            return Err((
                "cluster.audit_retention_entries".into(),
                "must be at least 1 (the audit log cannot be switched off)".into(),
            ));
        }
        if !self.enabled {
            return Ok(());
        }
        self.raft.validate()?;
        let tls = [
            ("cluster.tls_ca_path", &self.tls_ca_path),
            ("cluster.tls_cert_path", &self.tls_cert_path),
            ("cluster.tls_key_path", &self.tls_key_path),
        ];
        if tls.iter().any(|(_, path)| !path.is_empty())
            && let Some((field, _)) = tls.iter().find(|(_, path)| path.is_empty())
        {
            return Err((
                (*field).into(),
                "set tls_ca_path, tls_cert_path and tls_key_path together, or none".into(),
            ));
        }
        if !self.secret.is_empty() && self.secret.len() < MIN_SECRET_LEN {
            return Err((
                "cluster.secret".into(),
                format!("must be at least {MIN_SECRET_LEN} characters"),
            ));
        }
        if self.node_id == 0 {
            return Err(("cluster.node_id".into(), "must be at least 1".into()));
        }
        if self.raft_addr.parse::<std::net::SocketAddr>().is_err() {
            return Err((
                "cluster.raft_addr".into(),
                format!("`{}` is not an ip:port address", self.raft_addr),
            ));
        }
        if self.cluster_id.trim().is_empty() {
            return Err(("cluster.cluster_id".into(), "must not be empty".into()));
        }
        if !self.members.is_empty() && !self.join.is_empty() {
            return Err((
                "cluster.join".into(),
                "use either `members` (static bootstrap) or `join`, not both".into(),
            ));
        }
        if !self.members.is_empty() && !self.members.iter().any(|m| m.id == self.node_id) {
            return Err((
                "cluster.members".into(),
                format!("must list this node (node_id {})", self.node_id),
            ));
        }
        let mut ids: Vec<u64> = self.members.iter().map(|m| m.id).collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.len() != self.members.len() {
            return Err(("cluster.members".into(), "ids must be unique".into()));
        }
        Ok(())
    }

    /// A replica of a group must keep its Raft vote and log across restarts. Checked when the
    /// node starts, after flags (`--data-dir`, `--join`) have been laid over the file.
    pub fn require_data_dir(&self) -> Result<(), (String, String)> {
        if self.enabled && self.is_multi_node() && self.data_dir.trim().is_empty() {
            return Err((
                "cluster.data_dir".into(),
                "is required with `members` or `join` (--data-dir): a replica of a group must \
                 keep its Raft vote and log across restarts"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Whether replicas speak mutual TLS with the cluster CA.
    pub fn tls_enabled(&self) -> bool {
        self.enabled && !self.tls_cert_path.is_empty()
    }

    /// Whether this node talks to others (and so needs a shared secret).
    pub fn is_multi_node(&self) -> bool {
        self.members.len() > 1 || !self.join.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_of_a_group_needs_a_data_dir() {
        let joining = ClusterConfig {
            join: "127.0.0.1:7000".into(),
            ..ClusterConfig::default()
        };
        assert_eq!(joining.validate(), Ok(()), "flags may still add a data dir");
        let (field, message) = joining.require_data_dir().unwrap_err();
        assert_eq!(field, "cluster.data_dir", "{message}");
        let members = ClusterConfig {
            members: vec![
                ClusterMember {
                    id: 1,
                    addr: "127.0.0.1:7001".into(),
                },
                ClusterMember {
                    id: 2,
                    addr: "127.0.0.1:7002".into(),
                },
            ],
            ..ClusterConfig::default()
        };
        assert_eq!(
            members.require_data_dir().unwrap_err().0,
            "cluster.data_dir"
        );
        let with_dir = ClusterConfig {
            data_dir: "/var/lib/switchyard".into(),
            ..members
        };
        assert_eq!(with_dir.require_data_dir(), Ok(()));
        assert_eq!(
            ClusterConfig::default().require_data_dir(),
            Ok(()),
            "a single node may run on a temporary directory"
        );
    }
}
