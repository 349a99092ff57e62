//! Certificate reload without a restart: a task polls every TLS source (listener certificate,
//! replica certificate, cluster and worker CAs) and swaps in material whose files changed.
//! Polling, like the config watcher, keeps the dependency tree small and works on every
//! filesystem (including Kubernetes' symlink-swapped secret volumes). A file that is missing,
//! torn or invalid is refused and the material in use kept; the next tick tries again.

use prometheus::{IntCounterVec, Opts, Registry};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

use super::error::TlsError;
use super::material::{CaSource, CertSource};

/// Something re-read from files in place.
pub trait Reloadable: Send + Sync {
    /// The config field it comes from (a bounded metric label).
    fn field(&self) -> &str;
    /// `Ok(true)`: new material in use; `Ok(false)`: files unchanged.
    fn reload(&self) -> Result<bool, TlsError>;
}

impl Reloadable for CertSource {
    fn field(&self) -> &str {
        self.describe()
    }

    fn reload(&self) -> Result<bool, TlsError> {
        CertSource::reload(self)
    }
}

impl Reloadable for CaSource {
    fn field(&self) -> &str {
        self.describe()
    }

    fn reload(&self) -> Result<bool, TlsError> {
        CaSource::reload(self)
    }
}

/// Reload outcomes by source and outcome (`reloaded`, `refused`).
pub fn reload_counter(registry: &Registry) -> Result<IntCounterVec, prometheus::Error> {
    let counter = IntCounterVec::new(
        Opts::new(
            "switchyard_tls_reloads_total",
            "TLS certificate or CA files re-read after a change, by config field and outcome",
        ),
        &["field", "outcome"],
    )?;
    registry.register(Box::new(counter.clone()))?;
    Ok(counter)
}

/// Polls `sources` every `interval`; the owner aborts the task.
pub fn spawn_reloader(
    sources: Vec<Arc<dyn Reloadable>>,
    interval: Duration,
    outcomes: IntCounterVec,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick is immediate and the files were just read at start-up.
        ticker.tick().await;
        loop {
            ticker.tick().await;
            for source in &sources {
                match source.reload() {
                    Ok(false) => {}
                    Ok(true) => {
                        outcomes
                            .with_label_values(&[source.field(), "reloaded"])
                            .inc();
                        tracing::info!(field = source.field(), "TLS material reloaded");
                    }
                    Err(error) => {
                        outcomes
                            .with_label_values(&[source.field(), "refused"])
                            .inc();
                        tracing::error!(%error, "TLS material change refused; keeping the one in use");
                    }
                }
            }
        }
    })
}
