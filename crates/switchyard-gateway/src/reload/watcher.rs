use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

use super::live::LiveConfig;
use crate::config::{Config, ConfigError};

/// How long a changed file must stay unchanged before it is read as the new config.
const SETTLE: Duration = Duration::from_millis(50);

/// Re-applies what the command line said over the file (flags win over the file on every
/// reload, as they did at start-up).
pub type ConfigOverrides = Arc<dyn Fn(Config) -> Result<Config, ConfigError> + Send + Sync>;

/// Polls the config file and applies it when its content changes. Polling (not inotify)
/// keeps the dependency tree small and works on every filesystem; the owner aborts the task.
pub fn spawn_file_watcher(
    live: Arc<LiveConfig>,
    path: PathBuf,
    interval: Duration,
    overrides: ConfigOverrides,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        // Starts unknown: the first read is compared with the running config, which makes a
        // change written between start-up and this task's first tick still count.
        let mut last: Option<String> = None;
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let Ok(text) = tokio::fs::read_to_string(&path).await else {
                continue;
            };
            if last.as_deref() == Some(text.as_str()) {
                continue;
            }
            // An editor or `cp` may be half-way through writing: act only on content that
            // stays the same for a moment, so a torn read is never applied (or refused).
            tokio::time::sleep(SETTLE).await;
            match tokio::fs::read_to_string(&path).await {
                Ok(again) if again == text => {}
                _ => continue,
            }
            last = Some(text.clone());
            match Config::parse(&text).and_then(|c| overrides(c)) {
                Ok(next) => {
                    if let Err(error) = live.apply(next, "config-file", "config-file", None) {
                        tracing::error!(path = %path.display(), %error, "config file change refused; keeping the running config");
                    }
                }
                Err(error) => {
                    live.audit().record(
                        "config-file",
                        "config-file",
                        None,
                        &[],
                        Some(&error.to_string()),
                    );
                    tracing::error!(path = %path.display(), %error, "config file is invalid; keeping the running config");
                }
            }
        }
    })
}
