//! Assembles a running gateway from a validated config and owns its tasks.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::QuotaLedger;
use switchyard_router::{DiscardAffinity, PolicyContext, RoutingPolicy, build_policy};

use crate::cluster::{LedgerRuntime, affinity};
use switchyard_ledger::LedgerNode;
use switchyard_workers::{
    Registry, RegistryObserver, RegistryOptions, Routability, WorkerHandle, build_http_client,
};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::config::Config;
use crate::lifecycle::{DrainPlan, Handover, Lifecycle, step_down};
use crate::metrics::Metrics;
use crate::proxy::retry_budget::RetryBudget;
use crate::reload::current::CurrentConfig;
use crate::reload::{AuditLog, ConfigOverrides, LiveConfig, Reconfigure, spawn_file_watcher};
use crate::state::{AppState, Stack};
use std::path::PathBuf;
use switchyard_admission::{Admission, InMemoryLedger};
use switchyard_core::SystemClock;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("invalid configuration: {0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("routing policy: {0}")]
    Policy(#[from] switchyard_router::RouterError),
    #[error("worker registry: {0}")]
    Registry(#[from] switchyard_workers::RegistryError),
    #[error(transparent)]
    Metrics(#[from] crate::metrics::MetricsError),
    #[error("admission: {0}")]
    Admission(#[from] switchyard_admission::AdmissionError),
    #[error("warmup: {0}")]
    Warmup(#[from] crate::warmup::WarmupStartError),
    #[error(transparent)]
    Cluster(#[from] crate::cluster::ClusterError),
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    #[error(transparent)]
    Discovery(#[from] switchyard_workers::discovery::DiscoveryStartError),
    #[error("metrics registration: {0}")]
    Lifecycle(#[from] prometheus::Error),
}

/// Keeps routing structures and metrics in step with registry membership.
struct MembershipObserver {
    policy: Arc<dyn RoutingPolicy>,
    metrics: Arc<Metrics>,
    /// The replicated affinity records, when this replica is in a Raft group.
    ledger: Option<Arc<LedgerNode>>,
}

impl RegistryObserver for MembershipObserver {
    fn worker_added(&self, worker: &Arc<WorkerHandle>) {
        self.policy.worker_added(worker.id(), worker.name());
        if let Some(node) = &self.ledger {
            let records = node.affinity_records_naming(worker.name());
            let applied = affinity::apply_records_naming(&records, worker.name(), &*self.policy);
            if applied > 0 {
                info!(
                    worker = worker.name(),
                    applied, "affinity records caught up"
                );
            }
        }
    }

    fn worker_removed(&self, worker: &Arc<WorkerHandle>) {
        self.policy.worker_removed(worker.id());
        self.metrics.forget_worker(worker.name());
    }
}

/// Lets the retry budget follow config changes.
struct RetryFollower(Arc<RetryBudget>);

impl Reconfigure for RetryFollower {
    fn reconfigure(&self, config: &Config) {
        self.0.reconfigure(config.retry.clone());
    }
}

/// Lets worker health checks, overload marking, prober and breakers follow config changes.
struct HealthFollower(Registry);

impl Reconfigure for HealthFollower {
    fn reconfigure(&self, config: &Config) {
        if let Err(error) = self.0.update_health_config(config.health.clone()) {
            // Unreachable in practice: the whole config was validated before it applied.
            warn!(%error, "health config change not applied");
        }
    }
}

/// How to start a gateway beyond its config.
#[derive(Clone, Default)]
pub struct StartOptions {
    /// Key for `/admin/*`; `None` or empty disables the admin API.
    pub admin_key: Option<String>,
    /// The config file to watch for changes, if the config came from one, and the
    /// command-line overrides to re-apply to it on every change.
    pub config_path: Option<PathBuf>,
    pub config_overrides: Option<ConfigOverrides>,
    /// Clock of warmup, degradation and the response cache (tests drive it by hand).
    pub warmup_clock: Option<switchyard_core::WallClock>,
}

/// A running gateway. Dropping it without `shutdown` leaves the server running until the
/// runtime ends; call `shutdown` for an orderly stop.
pub struct GatewayHandle {
    addr: SocketAddr,
    /// `http`, or `https` when the listener speaks TLS.
    scheme: &'static str,
    state: Arc<AppState>,
    stop: Option<oneshot::Sender<()>>,
    server: JoinHandle<()>,
    registry_task: JoinHandle<()>,
    watcher: Option<JoinHandle<()>>,
    /// Re-reads changed TLS certificates and CAs.
    tls_reloader: Option<JoinHandle<()>>,
    /// The separate `/metrics` listener (`listener.metrics_addr`) and its address.
    metrics_server: Option<(SocketAddr, JoinHandle<()>)>,
    admission_ticker: JoinHandle<()>,
    warmup_tasks: crate::warmup::WarmupTasks,
    ledger: Option<LedgerRuntime>,
    lifecycle: Arc<Lifecycle>,
    /// Kubernetes pod watch, stopped with the gateway.
    discovery: Option<switchyard_workers::discovery::KubernetesDiscovery>,
}

impl GatewayHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn base_url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    /// Where `/metrics` is served when `listener.metrics_addr` gives it its own listener.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_server.as_ref().map(|(addr, _)| *addr)
    }

    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// The drain phase and in-flight count ([`Self::drain_and_stop`] drives them).
    pub fn lifecycle(&self) -> &Arc<Lifecycle> {
        &self.lifecycle
    }

    /// Stops accepting, lets in-flight responses finish within the grace period, then stops
    /// the worker actors.
    pub async fn shutdown(mut self) {
        if let Some(discovery) = self.discovery.take() {
            discovery.stop();
        }
        if let Some(watcher) = self.watcher.take() {
            watcher.abort();
        }
        if let Some(reloader) = self.tls_reloader.take() {
            reloader.abort();
        }
        if let Some((_, metrics_server)) = self.metrics_server.take() {
            metrics_server.abort();
        }
        self.admission_ticker.abort();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let grace = Duration::from_millis(self.state.config().server.shutdown_grace_ms);
        if tokio::time::timeout(grace, &mut self.server).await.is_err() {
            warn!("in-flight requests outlived the shutdown grace period; aborting them");
            self.server.abort();
        }
        self.warmup_tasks.stop().await;
        self.state.stack.registry.stop();
        let _ = (&mut self.registry_task).await;
        let _ = (&mut self.admission_ticker).await;
        let ledger = self.ledger.take();
        // The state shares the ledger node; release it so the node can stop cleanly
        // (releasing its leases and flushing spend reports).
        drop(self.state);
        if let Some(ledger) = ledger {
            ledger.shutdown().await;
        }
    }

    /// Runs the phases of a graceful shutdown and stops the gateway. Returns what happened to
    /// Raft leadership.
    pub async fn drain_and_stop(self, plan: DrainPlan) -> Handover {
        let lifecycle = Arc::clone(self.lifecycle());
        lifecycle.begin_drain();
        info!(
            accept_ms = plan.accept.as_millis() as u64,
            in_flight = lifecycle.in_flight(),
            "draining: readiness off"
        );
        tokio::time::sleep(plan.accept).await;
        lifecycle.stop_accepting();
        info!(
            in_flight = lifecycle.in_flight(),
            "draining: new requests refused"
        );
        if lifecycle.wait_idle(plan.drain).await {
            info!("drained: nothing in flight");
        } else {
            warn!(
                in_flight = lifecycle.in_flight(),
                "drain deadline passed with requests in flight; they are cut"
            );
        }
        let outcome = match &self.state().cluster {
            Some(node) => step_down(node, plan.handover).await,
            None => Handover::NotClustered,
        };
        lifecycle.count_handover(&outcome);
        info!(outcome = outcome.label(), leader = ?outcome.successor(), "raft leadership at shutdown");
        self.shutdown().await;
        outcome
    }
}

/// Binds, registers the configured workers and starts serving.
pub async fn start(config: Config, admin_key: Option<String>) -> Result<GatewayHandle, StartError> {
    start_with(
        config,
        StartOptions {
            admin_key,
            ..StartOptions::default()
        },
    )
    .await
}

/// [`start`] with every option.
pub async fn start_with(
    config: Config,
    options: StartOptions,
) -> Result<GatewayHandle, StartError> {
    config.validate()?;
    if let Some(key) = options.admin_key.as_deref().filter(|k| !k.is_empty()) {
        crate::config::check_admin_key_strength(
            "admin.api_key (or SWITCHYARD_ADMIN_API_KEY)",
            key,
        )?;
    }
    let admin_keys = crate::admin_keys::AdminKeys::new(options.admin_key, &config.admin.keys);
    let metrics = Arc::new(Metrics::new()?);
    let tls = crate::tls::TlsSet::from_config(&config.listener, &config.cluster, &config.upstream)?;
    let clock: Arc<dyn switchyard_core::Clock> = Arc::new(SystemClock);
    let mut ledger_runtime = if config.cluster.enabled {
        Some(
            LedgerRuntime::start(
                &config.cluster,
                &config.admission,
                metrics.registry(),
                clock.clone(),
                tls.peers.clone(),
            )
            .await?,
        )
    } else {
        None
    };
    let (affinity_sink, affinity_events) =
        affinity::sink(metrics.registry()).map_err(crate::metrics::MetricsError::from)?;
    let context = PolicyContext {
        affinity_sink: match ledger_runtime {
            Some(_) => affinity_sink,
            None => Arc::new(DiscardAffinity),
        },
        ..PolicyContext::default()
    };
    let policy = build_policy(&config.routing, context)?;
    if let Some(runtime) = &mut ledger_runtime {
        let node = Arc::clone(&runtime.node);
        runtime.own(affinity::spawn_forwarder(
            Arc::clone(&node),
            affinity_events,
        ));
        runtime.own(affinity::spawn_applier(node, Arc::clone(&policy)));
    }
    metrics.register_policy(policy.name(), policy.branches());
    let mut client_config = config.upstream.client_config();
    client_config.tls = tls.upstream.clone();
    let client = build_http_client(&client_config);
    let observer = Arc::new(MembershipObserver {
        policy: Arc::clone(&policy),
        metrics: Arc::clone(&metrics),
        ledger: ledger_runtime
            .as_ref()
            .map(|runtime| Arc::clone(&runtime.node)),
    });
    let registry_options = RegistryOptions::new(config.health.clone(), metrics.registry());
    let (registry, registry_task) =
        Registry::start(client.clone(), observer, registry_options).await?;
    for spec in &config.workers {
        registry.add(spec.clone()).await?;
    }
    let discovery = if config.discovery.enabled {
        Some(switchyard_workers::discovery::spawn(
            registry.clone(),
            client.clone(),
            config.discovery.clone(),
            metrics.registry(),
        )?)
    } else {
        None
    };

    let addr = format!("{}:{}", config.server.host, config.server.port);
    let listener = TcpListener::bind(&addr)
        .await
        .map_err(|source| StartError::Bind {
            addr: addr.clone(),
            source,
        })?;
    let local = listener.local_addr().map_err(|source| StartError::Bind {
        addr: addr.clone(),
        source,
    })?;
    let metrics_listener = crate::listener::bind_metrics(&config.listener)
        .await
        .map_err(|source| StartError::Bind {
            addr: format!("listener.metrics_addr {}", config.listener.metrics_addr),
            source,
        })?;
    if admin_keys.is_empty() {
        info!("admin API disabled (no admin.api_key or admin.keys)");
    }
    let retry_budget = Arc::new(RetryBudget::new(
        config.retry.clone(),
        Arc::new(SystemClock),
    ));
    let watch_interval = Duration::from_millis(config.server.config_watch_interval_ms);
    let audit = AuditLog::with_file(config.server.audit_log_path.clone().map(PathBuf::from));
    let ledger: Arc<dyn QuotaLedger> = match &ledger_runtime {
        Some(runtime) => runtime.node.quota(),
        None => Arc::new(InMemoryLedger::from_config(
            &config.admission,
            clock.clone(),
        )),
    };
    let cluster = ledger_runtime.as_ref().map(|r| Arc::clone(&r.node));
    let admission = Admission::new(
        config.admission.clone(),
        ledger.clone(),
        clock,
        metrics.registry(),
    )?;
    let current = Arc::new(CurrentConfig::new(config.clone()));
    let stack = Arc::new(Stack {
        config: Arc::clone(&current),
        registry,
        policy,
        client,
        metrics,
        retry_budget,
        admission,
    });
    let warmup = crate::warmup::start(
        &config,
        &stack,
        stack.metrics.registry(),
        options.warmup_clock,
    )
    .await?;
    let followers: Vec<Arc<dyn Reconfigure>> = vec![
        Arc::new(RetryFollower(Arc::clone(&stack.retry_budget))),
        Arc::new(HealthFollower(stack.registry.clone())),
        warmup.follower,
    ];
    let listener_config = config.listener.clone();
    let tls_reloader = crate::tls::spawn_for(
        &tls,
        Duration::from_millis(config.server.tls_reload_interval_ms),
        stack.metrics.registry(),
    )
    .map_err(crate::metrics::MetricsError::from)?;
    let tls = tls.listener;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let listener_metrics = crate::listener::ListenerMetrics::new(stack.metrics.registry())
        .map_err(crate::metrics::MetricsError::from)?;
    let pending_bodies = crate::proxy::body_budget::BodyBudget::new(
        listener_config.max_pending_body_bytes,
        stack.metrics.registry(),
    )
    .map_err(crate::metrics::MetricsError::from)?;
    let live = Arc::new(LiveConfig::over(current, followers, audit));
    let state = Arc::new(AppState {
        stack,
        live: Arc::clone(&live),
        ledger,
        cluster,
        admin_keys,
        warmup: warmup.runtime,
        pending_bodies,
    });
    let warmup_tasks = warmup.tasks;
    let admission_ticker = spawn_admission_ticker(Arc::clone(&state));
    let overrides = options
        .config_overrides
        .unwrap_or_else(|| Arc::new(|config: Config| Ok(config)));
    let watcher = options
        .config_path
        .filter(|_| !watch_interval.is_zero())
        .map(|path| spawn_file_watcher(Arc::clone(&live), path, watch_interval, overrides));
    let lifecycle = Arc::new(Lifecycle::new(state.stack.metrics.registry())?);
    let app = crate::listener::App::client(Arc::clone(&state), Arc::clone(&lifecycle));
    let metrics_server = metrics_listener.map(|listener| {
        crate::listener::spawn_metrics(
            listener,
            crate::listener::App::router_only(crate::http::metrics_router(Arc::clone(&state))),
            &listener_config,
            listener_metrics.clone(),
        )
    });
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let stopped = async move {
            let _ = stopped.await;
        };
        crate::listener::serve(
            listener,
            app,
            &listener_config,
            listener_metrics,
            tls,
            stopped,
        )
        .await;
    });
    info!(addr = %local, policy = state.stack.policy.name(), workers = state.config().workers.len(), "switchyard gateway listening");
    Ok(GatewayHandle {
        addr: local,
        scheme,
        state,
        stop: Some(stop),
        server,
        registry_task,
        watcher,
        tls_reloader,
        metrics_server,
        admission_ticker,
        warmup_tasks,
        ledger: ledger_runtime,
        lifecycle,
        discovery,
    })
}

/// Feeds the overload detector: the share of workers that cannot take traffic, once a
/// second, and moves the recovery ramp's timers even when no request arrives.
fn spawn_admission_ticker(state: Arc<AppState>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_secs(1));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let workers = state.stack.registry.directory().snapshot();
            let filtered = workers
                .iter()
                .filter(|w| w.routability() != Routability::Routable)
                .count();
            let share = if workers.is_empty() {
                0.0
            } else {
                filtered as f64 / workers.len() as f64
            };
            state.stack.admission.report_fleet(share);
            state.stack.admission.tick();
        }
    })
}
