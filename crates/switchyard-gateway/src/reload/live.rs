//! The live configuration: a change validated whole, published, told to the components
//! that follow it, and audited.

use std::sync::Arc;

use super::audit::AuditLog;
use super::current::CurrentConfig;
use super::diff::{Change, diff_configs};
use crate::config::{Config, ConfigError};

/// Paths (prefixes) that cannot change without a restart.
/// (The routing policy and its structures are built once; changing them means a restart.
/// The response cache is sized once.)
const RESTART_ONLY: &[&str] = &[
    "server.",
    "routing.",
    "admission.",
    "cluster.",
    "admin.",
    "workers",
    "discovery.",
    "degradation.cache.",
    "listener.",
];

#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error(transparent)]
    Invalid(#[from] ConfigError),
    #[error("these fields only change on restart: {0}")]
    RestartRequired(String),
}

/// Something that must follow a config change (a component holding its own copy).
pub trait Reconfigure: Send + Sync {
    fn reconfigure(&self, config: &Config);
}

/// The live configuration and the components that follow it.
pub struct LiveConfig {
    current: Arc<CurrentConfig>,
    followers: Vec<Arc<dyn Reconfigure>>,
    audit: AuditLog,
}

impl LiveConfig {
    pub fn new(config: Config, followers: Vec<Arc<dyn Reconfigure>>, audit: AuditLog) -> Self {
        Self::over(Arc::new(CurrentConfig::new(config)), followers, audit)
    }

    /// Changes to `current`, which its readers already hold, told to `followers`.
    pub fn over(
        current: Arc<CurrentConfig>,
        followers: Vec<Arc<dyn Reconfigure>>,
        audit: AuditLog,
    ) -> Self {
        Self {
            current,
            followers,
            audit,
        }
    }

    /// The config in force; cheap, lock-free, safe on the request path.
    pub fn get(&self) -> arc_swap::Guard<Arc<Config>> {
        self.current.get()
    }

    pub fn audit(&self) -> &AuditLog {
        &self.audit
    }

    /// Validates `next` against the current config and applies it, or refuses it whole.
    /// Returns the changes made (empty when nothing differed).
    pub fn apply(
        &self,
        next: Config,
        who: &str,
        source: &str,
        reason: Option<&str>,
    ) -> Result<Vec<Change>, ReloadError> {
        let current = self.current.load_full();
        let outcome = Self::check(&current, &next);
        let changes = diff_configs(&current, &next);
        match outcome {
            Err(error) => {
                self.audit
                    .record(who, source, reason, &changes, Some(&error.to_string()));
                Err(error)
            }
            Ok(()) if changes.is_empty() => Ok(changes),
            Ok(()) => {
                let next = Arc::new(next);
                self.current.store(Arc::clone(&next));
                for follower in &self.followers {
                    follower.reconfigure(&next);
                }
                self.audit.record(who, source, reason, &changes, None);
                tracing::info!(
                    who,
                    source,
                    changes = changes.len(),
                    "configuration changed"
                );
                Ok(changes)
            }
        }
    }

    fn check(current: &Config, next: &Config) -> Result<(), ReloadError> {
        next.validate()?;
        let blocked: Vec<String> = diff_configs(current, next)
            .into_iter()
            .filter(|c| RESTART_ONLY.iter().any(|p| c.path.starts_with(p)))
            .map(|c| c.path)
            .collect();
        if blocked.is_empty() {
            Ok(())
        } else {
            Err(ReloadError::RestartRequired(blocked.join(", ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    #[derive(Default)]
    struct Seen(Mutex<Vec<u32>>);
    impl Reconfigure for Seen {
        fn reconfigure(&self, config: &Config) {
            self.0.lock().push(config.retry.max_retries);
        }
    }

    fn live() -> (LiveConfig, Arc<Seen>) {
        let seen = Arc::new(Seen::default());
        let live = LiveConfig::new(
            Config::default(),
            vec![seen.clone() as Arc<dyn Reconfigure>],
            AuditLog::in_memory(),
        );
        (live, seen)
    }

    #[test]
    fn a_valid_change_is_applied_followed_and_audited() {
        let (live, seen) = live();
        let mut next = Config::default();
        next.retry.max_retries = 1;
        let changes = live
            .apply(next, "alice", "api", Some("calm retries"))
            .unwrap();
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].path, "retry.max_retries");
        assert_eq!(live.get().retry.max_retries, 1);
        assert_eq!(*seen.0.lock(), vec![1]);
        let entries = live.audit().entries();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].who, "alice");
        assert_eq!(entries[0].reason.as_deref(), Some("calm retries"));
        assert_eq!(entries[0].changes[0].old, serde_json::json!(2));
        assert!(entries[0].error.is_none());
    }

    #[test]
    fn an_invalid_or_restart_only_change_is_refused_whole_and_audited() {
        let (live, seen) = live();
        let mut bad = Config::default();
        bad.retry.max_retries = 1;
        bad.retry.max_retry_ratio = 7.0;
        assert!(matches!(
            live.apply(bad, "bob", "api", None),
            Err(ReloadError::Invalid(_))
        ));
        let mut restart = Config::default();
        restart.server.port = 9999;
        restart.retry.max_retries = 1;
        let error = live.apply(restart, "bob", "api", None).unwrap_err();
        assert!(error.to_string().contains("server.port"), "{error}");
        assert_eq!(live.get().retry.max_retries, 2, "old config stays");
        assert!(seen.0.lock().is_empty());
        assert_eq!(live.audit().entries().len(), 2);
        assert!(live.audit().entries().iter().all(|e| e.error.is_some()));
    }
}
