//! Caller names the gateway gives itself; no tenant may take one.

/// Caller of every request when no tenant is configured.
pub const ANONYMOUS: &str = "anonymous";
/// Metric label of callers beyond the labelled top N.
pub const OTHER: &str = "other";
/// Metric label of requests refused before a caller was known.
pub const UNKNOWN: &str = "unknown";
pub(crate) const RESERVED_CALLERS: [&str; 3] = [ANONYMOUS, OTHER, UNKNOWN];
