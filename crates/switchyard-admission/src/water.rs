//! Budget water levels for graded degradation, at two scopes that must not be confused:
//! the fleet's (what the gateway-wide level follows) and one caller's (what only that
//! caller's requests follow). Following the busiest tenant gateway-wide would let one tenant
//! near its own limit push everybody into survival; its own budget gate already sheds its
//! traffic at 80 % / 95 %.

use switchyard_core::{Priority, QuotaScope, RequestTags};

use crate::config::TenantConfig;
use crate::overload::GatewayState;
use crate::shared::Admission;

/// Days in the ledger's fixed-length "month" (see `BudgetPeriod::Month`).
const DAYS_PER_MONTH: f64 = 30.0;

impl Admission {
    /// Used share of the fleet's budget: the budgeted callers' spend over their limits,
    /// summed (each caller's water level weighted by its daily-equivalent limit, so a small
    /// tenant at 97 % barely moves it and the fleet is at 96 % only when most of the budget
    /// is spent). Caller scopes only: purpose budgets are slices of their caller's spend and
    /// would count it twice. `None` when no configured caller has a budget the ledger knows.
    pub fn fleet_water_level(&self) -> Option<f64> {
        let gates = &self.inner.gates;
        let (spent, limit) = self
            .inner
            .config
            .tenants
            .iter()
            .filter_map(|tenant| {
                let weight = daily_limit(tenant)?;
                let scope = QuotaScope::caller(tenant.caller.as_str());
                let level = gates.ledger.water_level(&scope)?;
                level.is_finite().then_some((level * weight, weight))
            })
            .fold((0.0, 0.0), |(spent, limit), (s, l)| (spent + s, limit + l));
        (limit > 0.0).then(|| spent / limit)
    }

    /// Used share of this request's caller's own budget: the worst of its caller scope and
    /// the request's purpose scope (when that purpose has a budget). `None` when neither has
    /// one (every unconfigured caller, `anonymous` included).
    pub fn caller_water_level(&self, tags: &RequestTags) -> Option<f64> {
        let gates = &self.inner.gates;
        gates
            .caller(&tags.caller)
            .scopes(tags.purpose)
            .filter(|scope| scope.reserve)
            .filter_map(|scope| gates.ledger.water_level(&scope.scope))
            .filter(|level| level.is_finite())
            .reduce(f64::max)
    }

    /// The least urgent class admission serves right now: P1 while P2 is paused (the gateway
    /// is overloaded), else P2. Degradation demotes non-core callers no lower than this.
    pub fn lowest_served_priority(&self) -> Priority {
        if self.state() == GatewayState::Overloaded {
            Priority::P1
        } else {
            Priority::P2
        }
    }

    /// The configured scope (caller, or caller purpose) with the highest used share of its
    /// period budget: for operators (which tenant is close to its limit), not for the
    /// gateway-wide degradation level. `None` when no scope has a budget.
    pub fn busiest_water_level(&self) -> Option<(QuotaScope, f64)> {
        let gates = &self.inner.gates;
        gates
            .callers
            .configured()
            .flat_map(|(_, caller)| {
                std::iter::once(&caller.caller.scope)
                    .chain(caller.purposes.values().map(|purpose| &purpose.scope))
            })
            .filter_map(|scope| {
                let level = gates.ledger.water_level(scope)?;
                level.is_finite().then(|| (scope.clone(), level))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }
}

/// A caller's budget per day, to weigh its water level in the fleet's: the daily budget,
/// else the monthly one spread over its days.
fn daily_limit(tenant: &TenantConfig) -> Option<f64> {
    tenant
        .tokens_per_day
        .map(|day| day as f64)
        .or_else(|| {
            tenant
                .tokens_per_month
                .map(|month| month as f64 / DAYS_PER_MONTH)
        })
        .filter(|limit| *limit > 0.0)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use switchyard_core::SpendTags;
    use switchyard_core::{ManualClock, Priority, Purpose, QuotaLedger, QuotaScope, RequestTags};

    use crate::{Admission, AdmissionConfig, InMemoryLedger, PurposeLimits, TenantConfig};

    fn tenant(caller: &str, per_day: Option<u64>) -> TenantConfig {
        TenantConfig {
            api_key: format!("k-{caller}").into(),
            caller: caller.into(),
            tokens_per_day: per_day,
            ..TenantConfig::default()
        }
    }

    fn admission(tenants: Vec<TenantConfig>) -> (Admission, Arc<InMemoryLedger>) {
        let config = AdmissionConfig {
            tenants,
            ..AdmissionConfig::default()
        };
        let clock = Arc::new(ManualClock::new());
        let ledger = Arc::new(InMemoryLedger::from_config(&config, clock.clone()));
        let registry = prometheus::Registry::new();
        let admission = Admission::new(config, ledger.clone(), clock, &registry).unwrap();
        (admission, ledger)
    }

    fn spend(ledger: &InMemoryLedger, caller: &str, purpose: Option<Purpose>, tokens: u64) {
        let tags = SpendTags {
            scope: QuotaScope {
                caller: Arc::from(caller),
                purpose,
            },
            purpose: purpose.unwrap_or(Purpose::Business),
            priority: Priority::P1,
        };
        let reservation = ledger.reserve(&tags, tokens).unwrap();
        ledger.settle(reservation, tokens);
    }

    fn tags(caller: &str, purpose: Purpose) -> RequestTags {
        RequestTags {
            caller: Arc::from(caller),
            purpose,
            ..RequestTags::anonymous()
        }
    }

    #[test]
    fn the_fleet_level_is_total_spend_over_total_limit_not_the_busiest_tenant() {
        let (admission, ledger) = admission(vec![
            tenant("small", Some(1_000)),
            tenant("big", Some(99_000)),
            tenant("unbudgeted", None),
        ]);
        assert_eq!(admission.fleet_water_level(), Some(0.0));
        spend(&ledger, "small", None, 970);
        let fleet = admission.fleet_water_level().unwrap();
        assert!((fleet - 0.0097).abs() < 1e-9, "{fleet}");
        let (scope, busiest) = admission.busiest_water_level().unwrap();
        assert_eq!((scope.to_string().as_str(), busiest), ("small", 0.97));
        spend(&ledger, "big", None, 94_100);
        let fleet = admission.fleet_water_level().unwrap();
        assert!((fleet - 0.9507).abs() < 1e-9, "{fleet}");
    }

    #[test]
    fn monthly_budgets_weigh_by_their_daily_share_and_no_budget_means_no_level() {
        let (none, _) = admission(vec![tenant("a", None)]);
        assert_eq!(none.fleet_water_level(), None);
        let monthly = TenantConfig {
            tokens_per_month: Some(30_000),
            ..tenant("m", None)
        };
        let (admission, ledger) = admission(vec![monthly, tenant("d", Some(1_000))]);
        spend(&ledger, "m", None, 30_000);
        let fleet = admission.fleet_water_level().unwrap();
        assert!((fleet - 0.5).abs() < 1e-9, "equal daily weights: {fleet}");
    }

    #[test]
    fn a_callers_level_is_its_own_worst_scope_and_nobody_elses() {
        let warmup_capped = TenantConfig {
            purposes: vec![PurposeLimits {
                purpose: Purpose::Warmup,
                tokens_per_day: Some(100),
                ..PurposeLimits::default()
            }],
            ..tenant("a", Some(10_000))
        };
        let (admission, ledger) = admission(vec![warmup_capped, tenant("b", Some(1_000))]);
        spend(&ledger, "a", Some(Purpose::Warmup), 90);
        spend(&ledger, "a", None, 1_000);
        let business = admission
            .caller_water_level(&tags("a", Purpose::Business))
            .unwrap();
        assert!((business - 0.1).abs() < 1e-9, "{business}");
        let warmup = admission
            .caller_water_level(&tags("a", Purpose::Warmup))
            .unwrap();
        assert!(
            (warmup - 0.9).abs() < 1e-9,
            "the purpose budget is worse: {warmup}"
        );
        assert_eq!(
            admission.caller_water_level(&tags("b", Purpose::Business)),
            Some(0.0)
        );
        assert_eq!(
            admission.caller_water_level(&RequestTags::anonymous()),
            None
        );
        assert_eq!(admission.lowest_served_priority(), Priority::P2);
    }
}
