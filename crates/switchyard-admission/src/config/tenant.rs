//! Tenants: who may call, at which priority, with which quotas.

use serde::{Deserialize, Serialize};
use switchyard_core::{Priority, Purpose, Secret};

use super::gates::GatesConfig;

/// One `[[admission.tenants]]` entry.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TenantConfig {
    /// Sent as `Authorization: Bearer <key>` (or `x-api-key`). Never serialised out.
    pub api_key: Secret,
    /// The caller id that tags, budgets and metrics use.
    pub caller: String,
    /// Most urgent class the caller may use; requests asking for more are clamped.
    pub max_priority: Priority,
    /// Class when the request names none; defaults to `max_priority`.
    pub default_priority: Option<Priority>,
    /// Core callers keep their P0 traffic at the hard budget limit.
    pub core: bool,
    /// May send `x-switchyard-purpose: warmup`.
    pub allow_warmup: bool,
    /// Period budgets (ledger). Both may be set; each is enforced.
    pub tokens_per_day: Option<u64>,
    pub tokens_per_month: Option<u64>,
    /// Rate quota; the token bucket refills at this × `gates.bucket_rate_factor`.
    pub tokens_per_minute: Option<u64>,
    /// Peak concurrency; the in-flight limit is this × `gates.peak_factor`…
    pub peak_in_flight: Option<u32>,
    /// …or set the in-flight limit directly (not both).
    pub max_in_flight: Option<u32>,
    /// Narrower limits for one of the caller's purposes, checked in addition.
    pub purposes: Vec<PurposeLimits>,
}

impl Default for TenantConfig {
    fn default() -> Self {
        Self {
            api_key: Secret::default(),
            caller: String::new(),
            max_priority: Priority::P1,
            default_priority: None,
            core: false,
            allow_warmup: false,
            tokens_per_day: None,
            tokens_per_month: None,
            tokens_per_minute: None,
            peak_in_flight: None,
            max_in_flight: None,
            purposes: Vec::new(),
        }
    }
}

/// `[[admission.tenants.purposes]]`: limits of one caller's one purpose.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PurposeLimits {
    pub purpose: Purpose,
    pub tokens_per_day: Option<u64>,
    pub tokens_per_month: Option<u64>,
    pub tokens_per_minute: Option<u64>,
    pub peak_in_flight: Option<u32>,
    pub max_in_flight: Option<u32>,
}

impl Default for PurposeLimits {
    fn default() -> Self {
        Self {
            purpose: Purpose::Business,
            tokens_per_day: None,
            tokens_per_month: None,
            tokens_per_minute: None,
            peak_in_flight: None,
            max_in_flight: None,
        }
    }
}

/// The limits of one quota scope (a caller, or a caller's purpose), resolved.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ScopeLimits {
    pub tokens_per_day: Option<u64>,
    pub tokens_per_month: Option<u64>,
    pub tokens_per_minute: Option<u64>,
    pub max_in_flight: Option<u32>,
}

impl ScopeLimits {
    pub fn has_budget(&self) -> bool {
        self.tokens_per_day.is_some() || self.tokens_per_month.is_some()
    }
}

fn in_flight_limit(peak: Option<u32>, direct: Option<u32>, gates: &GatesConfig) -> Option<u32> {
    // Never plan for 100 % of the peak; but a limit of 0 would refuse the caller outright.
    direct
        .or_else(|| peak.map(|peak| ((f64::from(peak) * gates.peak_factor).floor() as u32).max(1)))
}

impl TenantConfig {
    pub fn default_priority(&self) -> Priority {
        self.default_priority.unwrap_or(self.max_priority)
    }

    pub fn limits(&self, gates: &GatesConfig) -> ScopeLimits {
        ScopeLimits {
            tokens_per_day: self.tokens_per_day,
            tokens_per_month: self.tokens_per_month,
            tokens_per_minute: self.tokens_per_minute,
            max_in_flight: in_flight_limit(self.peak_in_flight, self.max_in_flight, gates),
        }
    }
}

impl PurposeLimits {
    pub fn limits(&self, gates: &GatesConfig) -> ScopeLimits {
        ScopeLimits {
            tokens_per_day: self.tokens_per_day,
            tokens_per_month: self.tokens_per_month,
            tokens_per_minute: self.tokens_per_minute,
            max_in_flight: in_flight_limit(self.peak_in_flight, self.max_in_flight, gates),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_limit_is_seventy_percent_of_peak_or_the_direct_value() {
        let gates = GatesConfig::default();
        let tenant = TenantConfig {
            peak_in_flight: Some(200),
            ..TenantConfig::default()
        };
        assert_eq!(tenant.limits(&gates).max_in_flight, Some(140));
        let direct = TenantConfig {
            max_in_flight: Some(7),
            ..TenantConfig::default()
        };
        assert_eq!(direct.limits(&gates).max_in_flight, Some(7));
        let tiny = TenantConfig {
            peak_in_flight: Some(1),
            ..TenantConfig::default()
        };
        assert_eq!(tiny.limits(&gates).max_in_flight, Some(1));
        assert_eq!(TenantConfig::default().limits(&gates).max_in_flight, None);
    }

    #[test]
    fn default_priority_falls_back_to_the_ceiling() {
        let tenant = TenantConfig {
            max_priority: Priority::P0,
            ..TenantConfig::default()
        };
        assert_eq!(tenant.default_priority(), Priority::P0);
    }
}
