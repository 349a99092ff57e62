//! The replicated quota ledger inside a gateway replica: starting the Raft node, joining
//! the group, seeding budgets from the tenants' config, and carrying affinity records.

pub mod affinity;
mod config;
mod raft_timing;

pub use config::{ClusterConfig, ClusterMember, MIN_SECRET_LEN};
pub use raft_timing::RaftTimingConfig;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use switchyard_admission::{AdmissionConfig, GatesConfig, ScopeLimits};
use switchyard_core::{Clock, QuotaScope};
use switchyard_ledger::{
    BudgetSpec, Command, CommandResponse, LedgerClient, LedgerConfig, LedgerNode, MembershipChange,
    PeerTls, ReadAnswer, ReadQuery,
};
use tokio::task::JoinHandle;
use tracing::{info, warn};

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cluster: {0}")]
    Ledger(#[from] switchyard_ledger::LedgerError),
    #[error("cluster: cannot create a temporary data directory: {0}")]
    TempDir(std::io::Error),
    #[error("cluster.secret (or SWITCHYARD_CLUSTER_SECRET) is required for a multi-node cluster")]
    MissingSecret,
    #[error("SWITCHYARD_CLUSTER_SECRET must be at least {MIN_SECRET_LEN} characters")]
    WeakSecret,
    #[error("config error at `{field}`: {message}")]
    Config { field: String, message: String },
}

/// A running ledger node and what keeps it company.
pub struct LedgerRuntime {
    pub node: Arc<LedgerNode>,
    tasks: Vec<JoinHandle<()>>,
    /// Held so a temporary data directory lives exactly as long as the node.
    _temp_dir: Option<tempfile::TempDir>,
}

const DAY_MS: u64 = 24 * 3600 * 1000;
const MONTH_MS: u64 = 30 * DAY_MS;

impl LedgerRuntime {
    /// `tls`: mutual TLS with the cluster CA (from `cluster.tls_*`) on the Raft port and
    /// every call to a peer, the join included.
    pub async fn start(
        config: &ClusterConfig,
        admission: &AdmissionConfig,
        registry: &prometheus::Registry,
        clock: Arc<dyn Clock>,
        tls: Option<PeerTls>,
    ) -> Result<Self, ClusterError> {
        let from_env = std::env::var("SWITCHYARD_CLUSTER_SECRET")
            .ok()
            .filter(|s| !s.is_empty());
        if from_env.as_ref().is_some_and(|s| s.len() < MIN_SECRET_LEN) {
            return Err(ClusterError::WeakSecret);
        }
        let secret = from_env.unwrap_or_else(|| config.secret.expose().to_string());
        let secret = if secret.is_empty() {
            if config.is_multi_node() {
                return Err(ClusterError::MissingSecret);
            }
            uuid::Uuid::new_v4().to_string()
        } else {
            secret
        };
        if let Err((field, message)) = config.require_data_dir() {
            return Err(ClusterError::Config { field, message });
        }
        let (data_dir, temp_dir) = if config.data_dir.is_empty() {
            let dir = tempfile::Builder::new()
                .prefix("switchyard-ledger-")
                .tempdir()
                .map_err(ClusterError::TempDir)?;
            warn!(dir = %dir.path().display(), "cluster.data_dir is not set: the quota ledger lives in a temporary directory and is lost at exit");
            (dir.path().to_path_buf(), Some(dir))
        } else {
            (config.data_dir.clone().into(), None)
        };
        let mut ledger_config = LedgerConfig::new(config.node_id, &config.raft_addr, data_dir);
        ledger_config.cluster_secret = secret.clone().into();
        ledger_config.cluster_id = config.cluster_id.clone();
        ledger_config.tls = tls.clone();
        config.raft.apply_to(&mut ledger_config.raft);
        ledger_config.lease.spend_window =
            raft_timing::lease_spend_window(&ledger_config.raft, ledger_config.lease.spend_window);
        if !config.advertise_addr.is_empty() {
            ledger_config.advertise_addr = Some(config.advertise_addr.clone());
        }
        if let Some(offset_ms) = chaos_ms("SWITCHYARD_CLOCK_SKEW_MS") {
            warn!(
                offset_ms,
                "ledger wall clock skewed from the start (chaos test)"
            );
            ledger_config.wall_clock.set_offset_ms(offset_ms);
        }
        let node = Arc::new(LedgerNode::start(ledger_config, registry, clock).await?);
        if let Some(delay_ms) =
            chaos_ms("SWITCHYARD_RAFT_DELAY_MS").and_then(|ms| u64::try_from(ms).ok())
        {
            warn!(
                delay_ms,
                "ledger calls to other replicas delayed each way (chaos test)"
            );
            node.faults()
                .set_one_way_delay(Duration::from_millis(delay_ms));
        }
        if let Some(stall_ms) =
            chaos_ms("SWITCHYARD_LOG_FLUSH_STALL_MS").and_then(|ms| u64::try_from(ms).ok())
        {
            warn!(
                stall_ms,
                "every Raft log flush stalled before its fsync (chaos test)"
            );
            node.test_log_flush_stall()
                .set(Duration::from_millis(stall_ms), None);
        }
        info!(
            node_id = config.node_id,
            raft_addr = node.raft_addr(),
            "quota ledger node started"
        );
        let mut tasks = vec![tokio::spawn(keep_audit_retention(
            Arc::clone(&node),
            config.audit_retention_entries,
        ))];
        if config.is_multi_node() {
            // Peers may not be up yet: never hold start-up hostage to the group forming.
            let (node, config, admission) = (Arc::clone(&node), config.clone(), admission.clone());
            tasks.push(tokio::spawn(async move {
                bootstrap(&node, &config, &secret, tls.as_ref(), &admission).await;
            }));
        } else {
            // A single node is its own quorum: be ready (budgets seeded, leases held) before
            // the first request, so it is never refused as `quota_lease_pending`.
            let scopes = bootstrap(&node, config, &secret, None, admission).await;
            align_audit_retention(&node, config.audit_retention_entries).await;
            wait_for_leases(&node, &scopes, Duration::from_secs(5)).await;
        }
        Ok(Self {
            node,
            tasks,
            _temp_dir: temp_dir,
        })
    }

    /// Adds a task that must stop before the node does.
    pub fn own(&mut self, task: JoinHandle<()>) {
        self.tasks.push(task);
    }

    /// Stops the companions, then the node (releasing leases and flushing spend).
    pub async fn shutdown(self) {
        for task in &self.tasks {
            task.abort();
        }
        for task in self.tasks {
            let _ = task.await;
        }
        match Arc::try_unwrap(self.node) {
            Ok(node) => node.shutdown().await,
            Err(_) => warn!("ledger node still referenced at shutdown; leases expire on their own"),
        }
    }
}

/// A test-only setting in milliseconds, read only when the chaos endpoints are on
/// (`SWITCHYARD_CHAOS_ENDPOINTS=1`), so a stray variable cannot change a production replica:
/// `SWITCHYARD_CLOCK_SKEW_MS` skews the ledger wall clock from the start,
/// `SWITCHYARD_RAFT_DELAY_MS` delays every ledger call to another replica each way (replicas
/// in other regions), `SWITCHYARD_LOG_FLUSH_STALL_MS` sleeps before every Raft log flush (a
/// disk whose fsync stalls) from the start; `PUT /admin/chaos/flush-stall` sets or clears
/// that stall later.
fn chaos_ms(name: &str) -> Option<i64> {
    let chaos = std::env::var("SWITCHYARD_CHAOS_ENDPOINTS").is_ok_and(|v| v == "1");
    let value = std::env::var(name).ok()?;
    match value.trim().parse::<i64>() {
        Ok(ms) if chaos => Some(ms),
        Ok(_) => {
            warn!(name, "ignored: it needs SWITCHYARD_CHAOS_ENDPOINTS=1");
            None
        }
        Err(error) => {
            warn!(name, %error, "not an integer; ignored");
            None
        }
    }
}

/// Initializes or joins the group, then seeds configured budgets the ledger lacks; answers
/// the scopes that have budgets from the config.
async fn bootstrap(
    node: &LedgerNode,
    config: &ClusterConfig,
    secret: &str,
    tls: Option<&PeerTls>,
    admission: &AdmissionConfig,
) -> Vec<QuotaScope> {
    let joined = if !config.join.is_empty() {
        join(node, config, secret, tls).await
    } else if config.members.is_empty() {
        node.initialize_single().await.map_err(|e| e.to_string())
    } else if config.members.iter().map(|m| m.id).min() == Some(config.node_id) {
        let members: BTreeMap<u64, String> = config
            .members
            .iter()
            .map(|m| (m.id, m.addr.clone()))
            .collect();
        node.initialize(members).await.map_err(|e| e.to_string())
    } else {
        Ok(())
    };
    if let Err(error) = joined {
        // Restarting a node of an existing group lands here too: it is already a member.
        info!(%error, "cluster bootstrap step skipped");
    }
    if node.wait_for_leader(Duration::from_secs(60)).await.is_err() {
        warn!("no ledger leader within 60 s; budgets from config not seeded yet");
        return Vec::new();
    }
    seed_budgets(node, admission).await
}

async fn wait_for_leases(node: &LedgerNode, scopes: &[QuotaScope], within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    let leases = node.quota().leases().clone();
    while tokio::time::Instant::now() < deadline {
        let all_held = scopes.iter().all(|scope| {
            leases
                .lease_snapshot(scope)
                .is_some_and(|lease| lease.epoch.is_some())
        });
        if all_held {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    warn!("not every budgeted scope holds a lease yet; early requests may be refused");
}

async fn join(
    node: &LedgerNode,
    config: &ClusterConfig,
    secret: &str,
    tls: Option<&PeerTls>,
) -> Result<(), String> {
    let client = LedgerClient::with_tls(
        vec![config.join.clone()],
        secret,
        Duration::from_secs(5),
        tls,
    );
    let addr = node.raft_addr().to_string();
    let id = config.node_id;
    let mut delay = Duration::from_millis(200);
    for _ in 0..30 {
        match client
            .change_membership(&MembershipChange::AddLearner {
                id,
                addr: addr.clone(),
            })
            .await
        {
            Ok(()) => {
                info!(id, "joined the cluster as a learner");
                let voters = node.status().voters.len();
                if voters < 3 {
                    client
                        .change_membership(&MembershipChange::Promote { id })
                        .await
                        .map_err(|e| e.to_string())?;
                    info!(id, "promoted to voter (the group had {voters} voters)");
                }
                return Ok(());
            }
            Err(error) => {
                warn!(%error, "join attempt failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
    Err("could not join the cluster".into())
}

/// How often the retention keeper looks whether this node has become leader.
const LEADERSHIP_CHECK: Duration = Duration::from_secs(1);

/// Brings the replicated audit retention to this replica's configured value whenever this
/// node starts a term as leader: only the leader proposes, so replicas started with
/// different values do not fight over it, and after a rolling restart the value of the
/// last-elected leader holds. Proposing the value already in force changes nothing.
async fn keep_audit_retention(node: Arc<LedgerNode>, wanted: u64) {
    let mut aligned_term = None;
    let mut every = tokio::time::interval(LEADERSHIP_CHECK);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let status = node.status();
        if status.leader != Some(status.node_id) || aligned_term == Some(status.term) {
            continue;
        }
        if align_audit_retention(&node, wanted).await {
            aligned_term = Some(status.term);
        }
    }
}

/// Proposes `wanted` as the audit retention if this node leads and the group holds another
/// value; answers whether the group holds `wanted` (or this node does not lead).
async fn align_audit_retention(node: &LedgerNode, wanted: u64) -> bool {
    let status = node.status();
    if status.leader != Some(status.node_id) {
        return true;
    }
    // The linearizable read brings this node's applied state up to the commit index, so the
    // comparison below sees the replicated value, not a stale one.
    if let Err(error) = node.read(ReadQuery::Counters).await {
        warn!(%error, "audit retention not checked: ledger read failed");
        return false;
    }
    let replicated = node.with_applied_state(|state| state.overrides.audit_retention());
    if replicated == wanted {
        return true;
    }
    let command = Command::SetAuditRetention {
        entries: wanted,
        principal: "config".into(),
    };
    match node.write(command).await {
        Ok(CommandResponse::Rejected { reason }) => {
            warn!(%reason, wanted, "audit retention from config refused by the ledger");
            false
        }
        Ok(_) => {
            info!(
                from = replicated,
                to = wanted,
                "audit retention set from cluster.audit_retention_entries"
            );
            true
        }
        Err(error) => {
            warn!(%error, wanted, "audit retention from config not proposed");
            false
        }
    }
}

/// The fleet-wide budget a scope's config asks for, if any: its day limit, else its month
/// limit (a month limit next to a day limit is a second pool: `month_budget_from_config`).
/// The rate and concurrency limits ride on it, so one fleet-wide rate holds however many
/// replicas serve the caller (each replica's own bucket only bounds what it serves itself).
/// A scope with a rate but no period budget gets a day budget of what that rate lets through
/// in a day, which never binds before the rate does.
pub(crate) fn budget_from_config(limits: &ScopeLimits, gates: &GatesConfig) -> Option<BudgetSpec> {
    // The same planning factor as the local token bucket: never plan for 100 % of the quota.
    let rate_tokens_per_s = limits.tokens_per_minute.map_or(0, |per_minute| {
        ((per_minute as f64 * gates.bucket_rate_factor / 60.0).floor() as u64).max(1)
    });
    let max_concurrency = limits.max_in_flight.map_or(0, u64::from);
    let (limit, period_ms) = match (limits.tokens_per_day, limits.tokens_per_month) {
        (Some(day), _) => (day, DAY_MS),
        (None, Some(month)) => (month, MONTH_MS),
        (None, None) => (limits.tokens_per_minute?.saturating_mul(24 * 60), DAY_MS),
    };
    let spec = period_budget(limit, period_ms)?;
    Some(BudgetSpec {
        rate_tokens_per_s,
        max_concurrency,
        ..spec
    })
}

/// The month limit of a scope that has a day limit too: a second pool every request of the
/// scope also spends from, so the month holds fleet-wide as well (enforced per replica it
/// would be multiplied by the replica count).
pub(crate) fn month_budget_from_config(limits: &ScopeLimits) -> Option<BudgetSpec> {
    match (limits.tokens_per_day, limits.tokens_per_month) {
        (Some(_), Some(month)) => period_budget(month, MONTH_MS),
        _ => None,
    }
}

fn period_budget(limit: u64, period_ms: u64) -> Option<BudgetSpec> {
    if limit == 0 {
        return None;
    }
    // No per-lease cap: a lease can never push spend past the limit anyway, and a cap
    // starves a replica that serves a burst; leases are sized to a few seconds of spend.
    Some(BudgetSpec {
        period_ms,
        rate_tokens_per_s: 0,
        max_concurrency: 0,
        max_lease_tokens: 0,
        // Covers settlement above the estimate (the estimate counts max_tokens, so only the
        // prompt estimate can fall short). Every lease holds its allowance against the limit
        // until it is reported, so a large one strands the end of the budget: 0.1 %.
        max_debt_tokens: limit / 1000,
        ..BudgetSpec::daily(limit)
    })
}

/// One fleet-wide pool the config asks for.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ConfiguredBudget {
    pub scope: QuotaScope,
    pub spec: BudgetSpec,
    /// A second period limit of the scope (`Command::SetPeriodBudget`).
    pub extra_period: bool,
}

/// Every pool the config asks for: each tenant's and each of its purposes' budget (a
/// purpose-scoped limit enforced per replica would be multiplied by the replica count), and
/// their month limits where a day limit is set too.
pub(crate) fn configured_budgets(admission: &AdmissionConfig) -> Vec<ConfiguredBudget> {
    let gates = &admission.gates;
    let mut budgets = Vec::new();
    let mut add = |scope: QuotaScope, limits: ScopeLimits| {
        if let Some(spec) = budget_from_config(&limits, gates) {
            budgets.push(ConfiguredBudget {
                scope: scope.clone(),
                spec,
                extra_period: false,
            });
        }
        if let Some(spec) = month_budget_from_config(&limits) {
            budgets.push(ConfiguredBudget {
                scope,
                spec,
                extra_period: true,
            });
        }
    };
    for tenant in &admission.tenants {
        let caller = QuotaScope::caller(tenant.caller.as_str());
        add(caller.clone(), tenant.limits(gates));
        for purpose in &tenant.purposes {
            let scope = QuotaScope {
                purpose: Some(purpose.purpose),
                ..caller.clone()
            };
            add(scope, purpose.limits(gates));
        }
    }
    budgets
}

/// Budgets in the config are starting values: a pool already in the ledger (perhaps changed
/// since with `switchyard ctl quota set`) keeps its replicated value.
async fn seed_budgets(node: &LedgerNode, admission: &AdmissionConfig) -> Vec<QuotaScope> {
    let existing = match node.read(ReadQuery::Budgets).await {
        Ok(ReadAnswer::Budgets(budgets)) => budgets,
        Ok(_) | Err(_) => return Vec::new(),
    };
    let mut seeded = Vec::new();
    for budget in configured_budgets(admission) {
        if !seeded.contains(&budget.scope) {
            seeded.push(budget.scope.clone());
        }
        let known = existing
            .iter()
            .any(|b| b.scope == budget.scope && b.spec.period_ms == budget.spec.period_ms);
        if known {
            continue;
        }
        let scope = budget.scope.clone();
        let written = if budget.extra_period {
            node.write(Command::SetPeriodBudget {
                scope: budget.scope,
                spec: budget.spec,
                principal: "config".into(),
            })
            .await
            .map(|_| ())
        } else {
            node.set_budget(budget.scope, budget.spec, "config").await
        };
        if let Err(error) = written {
            warn!(%error, %scope, "budget from config not seeded");
        }
    }
    seeded
}
