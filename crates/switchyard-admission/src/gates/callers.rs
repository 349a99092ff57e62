//! Per-caller gate state, built once from the tenant list: the request path only looks it up.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;
use switchyard_core::{Purpose, QuotaScope};
use tokio::sync::Semaphore;

use super::token_bucket::TokenBucket;
use crate::config::{AdmissionConfig, GatesConfig, ScopeLimits};

/// The gates of one quota scope (a caller, or one of its purposes).
pub(crate) struct ScopeGates {
    pub(crate) scope: QuotaScope,
    /// Reserve against the ledger for this scope. Always for the caller scope (spend is
    /// accounted even without a local budget: the ledger may know one); for a purpose scope
    /// when the config gives it a budget or a token rate (a replicated ledger holds both as
    /// one fleet-wide budget of that scope).
    pub(crate) reserve: bool,
    pub(crate) bucket: Option<Mutex<TokenBucket>>,
    pub(crate) in_flight: Option<Arc<Semaphore>>,
    pub(crate) max_in_flight: Option<u32>,
}

impl ScopeGates {
    fn new(scope: QuotaScope, limits: &ScopeLimits, gates: &GatesConfig, now: Instant) -> Self {
        let reserve =
            scope.purpose.is_none() || limits.has_budget() || limits.tokens_per_minute.is_some();
        let bucket = limits.tokens_per_minute.map(|per_minute| {
            Mutex::new(TokenBucket::for_quota(
                per_minute,
                gates.bucket_rate_factor,
                gates.bucket_burst_seconds,
                gates.bucket_max_debt_ratio,
                now,
            ))
        });
        let in_flight = limits
            .max_in_flight
            .map(|max| Arc::new(Semaphore::new(max as usize)));
        Self {
            scope,
            reserve,
            bucket,
            in_flight,
            max_in_flight: limits.max_in_flight,
        }
    }

    pub(crate) fn in_flight_now(&self) -> Option<u32> {
        let max = self.max_in_flight?;
        let free = self.in_flight.as_ref()?.available_permits() as u32;
        Some(max.saturating_sub(free))
    }
}

pub(crate) struct CallerGates {
    pub(crate) caller: ScopeGates,
    pub(crate) purposes: HashMap<Purpose, ScopeGates>,
    /// Refusals in a row, for the Retry-After exponent of clients that do not count retries.
    consecutive_refusals: AtomicU32,
    /// A configured tenant (its own API key), not the entry every unknown caller shares:
    /// only then does the refusal streak say something about the client being refused.
    pub(crate) identified: bool,
}

impl CallerGates {
    fn unlimited(caller: Arc<str>) -> Self {
        Self {
            caller: ScopeGates {
                scope: QuotaScope::caller(caller),
                reserve: true,
                bucket: None,
                in_flight: None,
                max_in_flight: None,
            },
            purposes: HashMap::new(),
            consecutive_refusals: AtomicU32::new(0),
            identified: false,
        }
    }

    /// The scopes a request of this purpose passes through, caller scope first.
    pub(crate) fn scopes(&self, purpose: Purpose) -> impl Iterator<Item = &ScopeGates> {
        std::iter::once(&self.caller).chain(self.purposes.get(&purpose))
    }

    pub(crate) fn consecutive_refusals(&self) -> u32 {
        self.consecutive_refusals.load(Ordering::Relaxed)
    }

    pub(crate) fn note_refusal(&self) -> u32 {
        self.consecutive_refusals
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1)
    }

    pub(crate) fn note_admission(&self) {
        self.consecutive_refusals.store(0, Ordering::Relaxed);
    }
}

/// Every configured caller's gates, plus shared unlimited gates for anyone else
/// (`anonymous`, or a caller the gateway tags itself).
pub(crate) struct CallerDirectory {
    by_caller: HashMap<Arc<str>, Arc<CallerGates>>,
    unlimited: Arc<CallerGates>,
}

impl CallerDirectory {
    pub(crate) fn new(config: &AdmissionConfig, now: Instant) -> Self {
        let gates = &config.gates;
        let by_caller = config
            .tenants
            .iter()
            .map(|tenant| {
                let caller: Arc<str> = Arc::from(tenant.caller.as_str());
                let purposes = tenant
                    .purposes
                    .iter()
                    .map(|limits| {
                        let scope = QuotaScope {
                            caller: caller.clone(),
                            purpose: Some(limits.purpose),
                        };
                        (
                            limits.purpose,
                            ScopeGates::new(scope, &limits.limits(gates), gates, now),
                        )
                    })
                    .collect();
                let scope = QuotaScope::caller(caller.clone());
                let entry = CallerGates {
                    caller: ScopeGates::new(scope, &tenant.limits(gates), gates, now),
                    purposes,
                    consecutive_refusals: AtomicU32::new(0),
                    identified: true,
                };
                (caller, Arc::new(entry))
            })
            .collect();
        Self {
            by_caller,
            unlimited: Arc::new(CallerGates::unlimited(Arc::from(
                crate::identity::ANONYMOUS,
            ))),
        }
    }

    /// The caller's gates; unknown callers share one unlimited entry (whose caller scope
    /// is `anonymous`: never a budgeted tenant's).
    pub(crate) fn get(&self, caller: &str) -> &Arc<CallerGates> {
        self.by_caller.get(caller).unwrap_or(&self.unlimited)
    }

    pub(crate) fn configured(&self) -> impl Iterator<Item = (&Arc<str>, &Arc<CallerGates>)> {
        self.by_caller.iter()
    }
}
