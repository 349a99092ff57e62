//! Run-time configuration changes: `PUT /admin/config` and edits of the config file.
//!
//! A change is parsed and validated whole before anything is applied; a bad value refuses
//! the whole change and the old config stays. Fields that need a restart (listen address,
//! policy, admin key, the static worker list) are refused with their paths. Every attempt,
//! applied or refused, lands in the audit log with who, when, old and new values and reason.

mod audit;
pub mod current;
mod diff;
mod live;
mod watcher;

pub use audit::{AuditEntry, AuditLog};
pub use diff::{Change, diff_configs, set_path};
pub use live::{LiveConfig, Reconfigure, ReloadError};
pub use watcher::{ConfigOverrides, spawn_file_watcher};
