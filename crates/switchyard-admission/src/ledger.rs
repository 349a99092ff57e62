//! A single-process `QuotaLedger`: period budgets per scope, held in memory. The
//! Raft-replicated ledger implements the same trait for fleets of gateways.

use parking_lot::Mutex;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_core::{Clock, QuotaError, QuotaLedger, QuotaScope, Reservation, SpendTags};

use crate::config::{AdmissionConfig, ScopeLimits};

/// Length of a budget period. Periods are fixed-length windows counted from the ledger's
/// start (the injected clock is monotonic, not a calendar): a "month" is 30 days.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetPeriod {
    Day,
    Month,
}

impl BudgetPeriod {
    pub fn length(self) -> Duration {
        match self {
            BudgetPeriod::Day => Duration::from_secs(86_400),
            BudgetPeriod::Month => Duration::from_secs(30 * 86_400),
        }
    }
}

/// One budget of one scope, as the snapshot shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BudgetUsage {
    pub period: BudgetPeriod,
    pub limit: u64,
    pub spent: u64,
    pub reserved: u64,
}

#[derive(Debug)]
struct Budget {
    period: BudgetPeriod,
    limit: u64,
    spent: u64,
    reserved: u64,
    period_index: u64,
}

impl Budget {
    fn used(&self) -> u64 {
        self.spent.saturating_add(self.reserved)
    }

    fn roll_over(&mut self, elapsed: Duration) {
        let index = elapsed.as_secs() / self.period.length().as_secs();
        if index != self.period_index {
            // Spend starts afresh; reservations stay held: they belong to requests still in
            // flight, whose tokens are spent in the new period when they settle.
            self.period_index = index;
            self.spent = 0;
        }
    }
}

#[derive(Default)]
struct LedgerState {
    budgets: HashMap<QuotaScope, Vec<Budget>>,
    /// Settled tokens split by (scope, purpose, priority).
    spend: HashMap<SpendTags, u64>,
}

pub struct InMemoryLedger {
    clock: Arc<dyn Clock>,
    origin: Instant,
    state: Mutex<LedgerState>,
}

impl InMemoryLedger {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        let origin = clock.now();
        Self {
            clock,
            origin,
            state: Mutex::new(LedgerState::default()),
        }
    }

    /// A ledger holding the period budgets of every tenant and tenant purpose in `config`.
    pub fn from_config(config: &AdmissionConfig, clock: Arc<dyn Clock>) -> Self {
        let ledger = Self::new(clock);
        for tenant in &config.tenants {
            let caller: Arc<str> = Arc::from(tenant.caller.as_str());
            ledger.set_limits(
                &QuotaScope::caller(caller.clone()),
                &tenant.limits(&config.gates),
            );
            for purpose in &tenant.purposes {
                let scope = QuotaScope {
                    caller: caller.clone(),
                    purpose: Some(purpose.purpose),
                };
                ledger.set_limits(&scope, &purpose.limits(&config.gates));
            }
        }
        ledger
    }

    fn set_limits(&self, scope: &QuotaScope, limits: &ScopeLimits) {
        if let Some(limit) = limits.tokens_per_day {
            self.set_budget(scope.clone(), BudgetPeriod::Day, limit);
        }
        if let Some(limit) = limits.tokens_per_month {
            self.set_budget(scope.clone(), BudgetPeriod::Month, limit);
        }
    }

    /// Sets (or changes) a scope's budget for a period, keeping what was spent.
    pub fn set_budget(&self, scope: QuotaScope, period: BudgetPeriod, limit: u64) {
        let period_index = self.period_index(period);
        let mut state = self.state.lock();
        let budgets = state.budgets.entry(scope).or_default();
        match budgets.iter_mut().find(|b| b.period == period) {
            Some(budget) => budget.limit = limit,
            None => budgets.push(Budget {
                period,
                limit,
                spent: 0,
                reserved: 0,
                period_index,
            }),
        }
    }

    /// The scope's budgets in the current period.
    pub fn usage(&self, scope: &QuotaScope) -> Vec<BudgetUsage> {
        let elapsed = self.elapsed();
        let mut state = self.state.lock();
        let Some(budgets) = state.budgets.get_mut(scope) else {
            return Vec::new();
        };
        budgets
            .iter_mut()
            .map(|budget| {
                budget.roll_over(elapsed);
                BudgetUsage {
                    period: budget.period,
                    limit: budget.limit,
                    spent: budget.spent,
                    reserved: budget.reserved,
                }
            })
            .collect()
    }

    /// Settled tokens of one (scope, purpose, priority) since the ledger started.
    pub fn spent_by(&self, tags: &SpendTags) -> u64 {
        self.state.lock().spend.get(tags).copied().unwrap_or(0)
    }

    fn elapsed(&self) -> Duration {
        self.clock.now().saturating_duration_since(self.origin)
    }

    fn period_index(&self, period: BudgetPeriod) -> u64 {
        self.elapsed().as_secs() / period.length().as_secs()
    }
}

impl QuotaLedger for InMemoryLedger {
    fn reserve(&self, tags: &SpendTags, tokens: u64) -> Result<Reservation, QuotaError> {
        let elapsed = self.elapsed();
        let mut state = self.state.lock();
        if let Some(budgets) = state.budgets.get_mut(&tags.scope) {
            for budget in budgets.iter_mut() {
                budget.roll_over(elapsed);
                if budget.used().saturating_add(tokens) > budget.limit {
                    return Err(QuotaError::Exhausted {
                        scope: tags.scope.clone(),
                        limit: budget.limit,
                        used: budget.used(),
                    });
                }
            }
            for budget in budgets.iter_mut() {
                budget.reserved = budget.reserved.saturating_add(tokens);
            }
        }
        Ok(Reservation {
            tags: tags.clone(),
            tokens,
            under_override: false,
        })
    }

    fn settle(&self, reservation: Reservation, actual_tokens: u64) {
        let elapsed = self.elapsed();
        let mut state = self.state.lock();
        if let Some(budgets) = state.budgets.get_mut(&reservation.tags.scope) {
            for budget in budgets.iter_mut() {
                budget.roll_over(elapsed);
                budget.reserved = budget.reserved.saturating_sub(reservation.tokens);
                // Real usage is booked even past the limit: the tokens were consumed.
                budget.spent = budget.spent.saturating_add(actual_tokens);
            }
        }
        if actual_tokens > 0 {
            let total = state.spend.entry(reservation.tags).or_insert(0);
            *total = total.saturating_add(actual_tokens);
        }
    }

    fn water_level(&self, scope: &QuotaScope) -> Option<f64> {
        let elapsed = self.elapsed();
        let mut state = self.state.lock();
        let budgets = state.budgets.get_mut(scope)?;
        budgets
            .iter_mut()
            .map(|budget| {
                budget.roll_over(elapsed);
                budget.used() as f64 / budget.limit.max(1) as f64
            })
            .reduce(f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::{ManualClock, Priority, Purpose};

    fn tags(caller: &str) -> SpendTags {
        SpendTags {
            scope: QuotaScope::caller(caller),
            purpose: Purpose::Business,
            priority: Priority::P1,
        }
    }

    #[test]
    fn reservations_count_toward_the_water_level_and_settle_to_real_usage() {
        let clock = ManualClock::new();
        let ledger = InMemoryLedger::new(Arc::new(clock.clone()));
        let scope = QuotaScope::caller("a");
        ledger.set_budget(scope.clone(), BudgetPeriod::Day, 1_000);
        let held = ledger.reserve(&tags("a"), 400).unwrap();
        assert_eq!(ledger.water_level(&scope), Some(0.4));
        ledger.settle(held, 100);
        assert_eq!(
            ledger.water_level(&scope),
            Some(0.1),
            "refund of the unused estimate"
        );
        assert_eq!(ledger.spent_by(&tags("a")), 100);
        let held = ledger.reserve(&tags("a"), 900).unwrap();
        let refused = ledger.reserve(&tags("a"), 1);
        assert!(matches!(
            refused,
            Err(QuotaError::Exhausted {
                limit: 1_000,
                used: 1_000,
                ..
            })
        ));
        ledger.settle(held, 1_200);
        assert_eq!(ledger.water_level(&scope), Some(1.3), "overrun is booked");
    }

    #[test]
    fn scopes_without_budget_always_succeed() {
        let ledger = InMemoryLedger::new(Arc::new(ManualClock::new()));
        let held = ledger.reserve(&tags("free"), u64::MAX).unwrap();
        assert_eq!(ledger.water_level(&QuotaScope::caller("free")), None);
        ledger.settle(held, 5);
        assert_eq!(ledger.spent_by(&tags("free")), 5);
    }

    #[test]
    fn the_period_rolls_over_by_the_injected_clock_keeping_held_reservations() {
        let clock = ManualClock::new();
        let ledger = InMemoryLedger::new(Arc::new(clock.clone()));
        let scope = QuotaScope::caller("a");
        ledger.set_budget(scope.clone(), BudgetPeriod::Day, 1_000);
        ledger.settle(ledger.reserve(&tags("a"), 900).unwrap(), 900);
        let in_flight = ledger.reserve(&tags("a"), 50).unwrap();
        assert!(ledger.reserve(&tags("a"), 100).is_err());
        clock.advance(Duration::from_secs(86_399));
        assert!(ledger.reserve(&tags("a"), 100).is_err(), "same day");
        clock.advance(Duration::from_secs(1));
        assert_eq!(
            ledger.water_level(&scope),
            Some(0.05),
            "new day; in-flight hold stays"
        );
        ledger.settle(in_flight, 40);
        assert_eq!(ledger.usage(&scope)[0].spent, 40);
        assert_eq!(ledger.usage(&scope)[0].reserved, 0);
    }

    #[test]
    fn day_and_month_budgets_are_both_enforced() {
        let clock = ManualClock::new();
        let ledger = InMemoryLedger::new(Arc::new(clock.clone()));
        let scope = QuotaScope::caller("a");
        ledger.set_budget(scope.clone(), BudgetPeriod::Day, 1_000);
        ledger.set_budget(scope.clone(), BudgetPeriod::Month, 1_500);
        ledger.settle(ledger.reserve(&tags("a"), 1_000).unwrap(), 1_000);
        clock.advance(BudgetPeriod::Day.length());
        assert_eq!(
            ledger.water_level(&scope),
            Some(1_000.0 / 1_500.0),
            "the month is fuller"
        );
        assert!(
            ledger.reserve(&tags("a"), 600).is_err(),
            "month budget binds"
        );
        assert!(ledger.reserve(&tags("a"), 500).is_ok());
    }
}
