//! One pool of tokens (a scope's period budget, or an approved override) and the leases drawn
//! against it. Pure bookkeeping: time is passed in (ledger time, from entry timestamps).
//!
//! The invariant this module keeps: `spent + Σ hold(lease) ≤ limit`, where a lease's hold is
//! what its node may still spend (`granted_total − used_reported`) plus the debt allowance.
//! Leases are charged in full when they expire, because the ledger cannot know what a silent
//! node spent; a node that renews or releases reports its real count instead, and a holder's
//! later report gives back what an expired lease did not spend (`reclaim.rs`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::command::{
    BudgetSpec, LeaseDenied, LeaseGrant, LeaseRequest, MAX_LEASE_TTL_MS, NodeId, PoolId,
    UNLIMITED_SHARE,
};
use crate::state::unreported::Unreported;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub epoch: u64,
    pub granted_total: u64,
    pub used_reported: u64,
    pub expires_at_ms: u64,
    pub demand: u64,
    /// This lease's share of the fleet rate (tokens/s) and concurrency; `UNLIMITED_SHARE`
    /// when the budget sets none. Σ over unexpired leases of the larger of these and the
    /// previous grant's shares ≤ the budget's figures.
    pub rate_share: u64,
    pub concurrency_share: u64,
    /// The shares of the grant before the last one. A node may still run requests admitted
    /// under them until it has installed the smaller grant; its next renewal shows it has,
    /// so only then are they free for others.
    pub prev_rate_share: u64,
    pub prev_concurrency_share: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pool {
    pub spec: BudgetSpec,
    pub spent: u64,
    pub period_index: u64,
    /// Overrides close at their deadline; budgets never do.
    pub closes_at_ms: Option<u64>,
    pub closed: bool,
    pub next_epoch: u64,
    pub leases: BTreeMap<NodeId, Lease>,
    /// Set when an operator lowered the limit below what is already committed: nothing is
    /// granted until spend and holds fall back under the new limit.
    pub overhang: bool,
    /// Leases charged in full at expiry or fencing, by (node, epoch), until their holder
    /// reports what it spent.
    pub unreported: BTreeMap<(NodeId, u64), Unreported>,
    /// Tokens given back by holders' reports so far (every way: renewal, release, reclaim).
    pub reclaimed_tokens: u64,
}

/// What happened to leases while time moved on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Expired {
    pub leases: u64,
    pub tokens_charged: u64,
}

impl Pool {
    pub fn new(spec: BudgetSpec, now_ms: u64, closes_at_ms: Option<u64>) -> Self {
        let mut pool = Self {
            spec,
            spent: 0,
            period_index: 0,
            closes_at_ms,
            closed: false,
            next_epoch: 1,
            leases: BTreeMap::new(),
            overhang: false,
            unreported: BTreeMap::new(),
            reclaimed_tokens: 0,
        };
        pool.period_index = pool.period_of(now_ms);
        pool
    }

    fn period_of(&self, now_ms: u64) -> u64 {
        now_ms.checked_div(self.spec.period_ms).unwrap_or(0)
    }

    pub fn hold(&self, lease: &Lease) -> u64 {
        lease
            .granted_total
            .saturating_add(self.spec.max_debt_tokens)
            .saturating_sub(lease.used_reported)
    }

    pub fn holds(&self) -> u64 {
        self.leases.values().map(|l| self.hold(l)).sum()
    }

    /// Spent plus everything still held by leases: the share of the limit that is taken.
    pub fn committed(&self) -> u64 {
        self.spent.saturating_add(self.holds())
    }

    pub fn invariant_holds(&self) -> bool {
        self.overhang || self.committed() <= self.spec.limit_tokens
    }

    /// Period rollover, expiry of leases, closing at the deadline.
    pub fn advance(&mut self, now_ms: u64) -> Expired {
        let period = self.period_of(now_ms);
        if period > self.period_index {
            self.period_index = period;
            self.spent = 0;
            self.unreported.clear();
        }
        let mut expired = Expired::default();
        let due: Vec<NodeId> = self
            .leases
            .iter()
            .filter(|(_, lease)| lease.expires_at_ms <= now_ms)
            .map(|(node, _)| *node)
            .collect();
        for node in due {
            if let Some(lease) = self.leases.remove(&node) {
                let hold = self.hold(&lease);
                self.spent = self.spent.saturating_add(hold);
                self.remember_unreported(node, &lease);
                expired.leases += 1;
                expired.tokens_charged += hold;
            }
        }
        if self.closes_at_ms.is_some_and(|at| at <= now_ms) {
            self.closed = true;
        }
        self.refresh_overhang();
        expired
    }

    fn refresh_overhang(&mut self) {
        if self.overhang && self.committed() <= self.spec.limit_tokens {
            self.overhang = false;
        }
    }

    pub fn set_spec(&mut self, spec: BudgetSpec) {
        self.spec = spec;
        if self.committed() > self.spec.limit_tokens {
            self.overhang = true;
        }
    }

    /// Books what a node reports as used under its lease (clamped to what it could spend).
    fn charge(&mut self, node: NodeId, used_total: u64) {
        let max_debt = self.spec.max_debt_tokens;
        if let Some(lease) = self.leases.get_mut(&node) {
            let used = used_total.min(lease.granted_total.saturating_add(max_debt));
            if used > lease.used_reported {
                self.spent = self.spent.saturating_add(used - lease.used_reported);
                lease.used_reported = used;
            }
        }
    }

    pub fn release(&mut self, node: NodeId, epoch: u64, used_total: u64) -> bool {
        if self.leases.get(&node).is_none_or(|l| l.epoch != epoch) {
            // A release is final: an expired lease of that epoch gets its rest back.
            self.settle_unreported(node, epoch, used_total);
            return false;
        }
        self.charge(node, used_total);
        self.leases.remove(&node);
        self.refresh_overhang();
        true
    }

    /// Rate and concurrency shares held by every lease but `node`'s, each the larger of its
    /// current and previous grant (a share granted while the budget set no limit counts as
    /// the whole limit until its holder has renewed twice).
    fn others_shares(&self, node: NodeId) -> (u64, u64) {
        let (rate, concurrency) = (self.spec.rate_tokens_per_s, self.spec.max_concurrency);
        self.leases
            .iter()
            .filter(|(other, _)| **other != node)
            .fold((0u64, 0u64), |(r, c), (_, lease)| {
                (
                    r.saturating_add(lease.rate_share.max(lease.prev_rate_share).min(rate)),
                    c.saturating_add(
                        lease
                            .concurrency_share
                            .max(lease.prev_concurrency_share)
                            .min(concurrency),
                    ),
                )
            })
    }

    /// Renews or opens the node's lease, Doorman-style: each node's slice of the remaining
    /// budget is proportional to its reported demand when demand exceeds what is left.
    pub fn grant(
        &mut self,
        pool_id: &PoolId,
        req: &LeaseRequest,
        now_ms: u64,
    ) -> Result<LeaseGrant, LeaseDenied> {
        let max_debt = self.spec.max_debt_tokens;
        match self.leases.get(&req.node) {
            Some(lease) if Some(lease.epoch) == req.epoch => {
                self.charge(req.node, req.used_total);
                if let Some(lease) = self.leases.get_mut(&req.node) {
                    let floor = req.cap_total.max(lease.used_reported);
                    lease.granted_total = lease.granted_total.min(floor);
                }
            }
            Some(stale) => {
                // Fencing: the node no longer knows this epoch (restart, lost reply), so
                // whatever it spent under it is unknown until it says: the whole hold is
                // charged and remembered for a later report.
                let stale = stale.clone();
                let hold = self.hold(&stale);
                self.spent = self.spent.saturating_add(hold);
                self.leases.remove(&req.node);
                self.remember_unreported(req.node, &stale);
            }
            None => {}
        }
        if let Some(epoch) = req.epoch
            && self.leases.get(&req.node).is_none_or(|l| l.epoch != epoch)
        {
            // The node names an epoch the ledger already expired or fenced: it spends no more
            // than `cap_total` under it (it lowered its own spendable total before sending).
            self.settle_unreported(req.node, epoch, req.cap_total);
        }
        if self.closed {
            return Err(LeaseDenied::PoolClosed);
        }
        let limit = self.spec.limit_tokens;
        if !self.leases.contains_key(&req.node) {
            let free = limit.saturating_sub(self.committed());
            if self.overhang || free <= max_debt {
                return Err(LeaseDenied::Exhausted {
                    limit,
                    committed: self.committed(),
                });
            }
            let epoch = self.next_epoch;
            self.next_epoch += 1;
            self.leases.insert(
                req.node,
                Lease {
                    epoch,
                    granted_total: 0,
                    used_reported: 0,
                    expires_at_ms: now_ms,
                    demand: 0,
                    rate_share: 0,
                    concurrency_share: 0,
                    prev_rate_share: 0,
                    prev_concurrency_share: 0,
                },
            );
        }
        let others_holds: u64 = self
            .leases
            .iter()
            .filter(|(node, _)| **node != req.node)
            .map(|(_, lease)| self.hold(lease))
            .sum();
        let others_demand: u128 = self
            .leases
            .iter()
            .filter(|(node, _)| **node != req.node)
            .map(|(_, lease)| u128::from(lease.demand))
            .sum();
        let free_for_me = limit.saturating_sub(self.spent.saturating_add(others_holds));
        let remaining = u128::from(limit.saturating_sub(self.spent));
        let demand = u128::from(req.demand);
        let total_demand = demand + others_demand;
        let fair = if total_demand <= remaining {
            demand
        } else {
            remaining * demand / total_demand.max(1)
        };
        // Other holders' demands are as of their last renewal, so a burst on this node can
        // outbid replicas whose demand has grown since: no lease is raised past an even
        // share of what is left, and a replica renewing after the others still finds its
        // share instead of a budget held elsewhere (a false "exhausted" while 1/n remains).
        let even = remaining / (self.leases.len().max(1) as u128);
        let fair = fair.min(even);
        let fair = match self.spec.max_lease_tokens {
            0 => fair,
            cap => fair.min(u128::from(cap)),
        };
        let ttl_ms = req.ttl_ms.clamp(1, MAX_LEASE_TTL_MS);
        let expires_at_ms = match self.closes_at_ms {
            Some(close) => close.min(now_ms.saturating_add(ttl_ms)),
            None => now_ms.saturating_add(ttl_ms),
        };
        let (others_rate, others_concurrency) = self.others_shares(req.node);
        let rate_share = capped_share(
            self.spec.rate_tokens_per_s,
            demand,
            total_demand,
            others_rate,
        );
        let concurrency_share = capped_share(
            self.spec.max_concurrency,
            demand,
            total_demand,
            others_concurrency,
        );
        let overhang = self.overhang;
        let Some(lease) = self.leases.get_mut(&req.node) else {
            return Err(LeaseDenied::NoSuchPool);
        };
        let ceiling = free_for_me
            .saturating_add(lease.used_reported)
            .saturating_sub(max_debt);
        let target = u64::try_from(u128::from(lease.used_reported) + fair).unwrap_or(u64::MAX);
        if !overhang {
            lease.granted_total = lease.granted_total.max(target.min(ceiling));
        }
        lease.expires_at_ms = expires_at_ms;
        lease.demand = req.demand;
        lease.prev_rate_share = lease.rate_share;
        lease.prev_concurrency_share = lease.concurrency_share;
        lease.rate_share = rate_share;
        lease.concurrency_share = concurrency_share;
        Ok(LeaseGrant {
            pool: pool_id.clone(),
            epoch: lease.epoch,
            granted_total: lease.granted_total,
            max_debt_tokens: max_debt,
            expires_at_ms,
            ttl_ms: expires_at_ms.saturating_sub(now_ms),
            rate_share_per_s: rate_share,
            concurrency_share,
        })
    }
}

/// A demand-weighted share of a fleet-wide figure (0 = unlimited), never more than what the
/// other unexpired leases leave: shares a node already holds are only taken back when it
/// renews, so a newcomer's share grows as the others renew (within half a TTL).
fn capped_share(total: u64, demand: u128, total_demand: u128, others: u64) -> u64 {
    if total == 0 {
        return UNLIMITED_SHARE;
    }
    let fair = (u128::from(total) * demand)
        .checked_div(total_demand)
        .unwrap_or(u128::from(total));
    let fair = u64::try_from(fair).unwrap_or(u64::MAX).max(1);
    fair.min(total.saturating_sub(others))
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::QuotaScope;

    fn spec(limit: u64, debt: u64) -> BudgetSpec {
        BudgetSpec {
            limit_tokens: limit,
            period_ms: 1_000_000,
            rate_tokens_per_s: 0,
            max_concurrency: 0,
            max_debt_tokens: debt,
            max_lease_tokens: 0,
        }
    }

    fn req(node: NodeId, epoch: Option<u64>, used: u64, cap: u64, demand: u64) -> LeaseRequest {
        LeaseRequest {
            node,
            pool: PoolId::Budget(QuotaScope::caller("a")),
            epoch,
            used_total: used,
            cap_total: cap,
            demand,
            ttl_ms: 10_000,
        }
    }

    #[test]
    fn oversubscribed_demand_is_split_in_proportion() {
        let id = PoolId::Budget(QuotaScope::caller("a"));
        let mut pool = Pool::new(spec(1000, 0), 0, None);
        let a = pool.grant(&id, &req(1, None, 0, 0, 300), 0).unwrap();
        assert_eq!(a.granted_total, 300);
        // Node 2 wants 1100: demand 300 + 1100 > 1000 left, so its fair share is
        // 1000 * 1100 / 1400 = 785, within what is free (700) and what is left per lease (500).
        let b = pool.grant(&id, &req(2, None, 0, 0, 1100), 0).unwrap();
        assert_eq!(b.granted_total, 500);
        // Node 3 wants 10: its share of the oversubscribed rest is 1000 * 10 / 1410 = 7.
        let c = pool.grant(&id, &req(3, None, 0, 0, 10), 0).unwrap();
        assert_eq!(c.granted_total, 7);
        assert_eq!(pool.committed(), 807);
        // Node 3 asks for more than is free: it gets the free rest, then nothing is left.
        let c = pool
            .grant(&id, &req(3, Some(c.epoch), 0, 7, 5000), 0)
            .unwrap();
        assert_eq!(c.granted_total, 200);
        let d = pool.grant(&id, &req(4, None, 0, 0, 10), 0);
        assert!(matches!(d, Err(LeaseDenied::Exhausted { .. })));
    }

    #[test]
    fn a_burst_cannot_outbid_holders_whose_demand_is_stale() {
        // Three replicas hold the minimum lease; then all three see a burst far above the
        // budget. Their demands in the ledger are as of the minimum, so the first two to
        // renew would take it all and the third would be refused while 1/3 is unspent.
        let id = PoolId::Budget(QuotaScope::caller("a"));
        let mut pool = Pool::new(spec(60_000, 60), 0, None);
        let epochs: Vec<u64> = (1..=3)
            .map(|node| {
                pool.grant(&id, &req(node, None, 0, 0, 500), 0)
                    .unwrap()
                    .epoch
            })
            .collect();
        let renew = |pool: &mut Pool, node: u64| {
            let epoch = epochs[node as usize - 1];
            pool.grant(&id, &req(node, Some(epoch), 500, 500, 30_000), 10)
                .unwrap()
                .granted_total
        };
        let first = renew(&mut pool, 1);
        let second = renew(&mut pool, 2);
        let third = renew(&mut pool, 3);
        assert!(first <= 500 + 60_000 / 3, "first renewal took {first}");
        assert!(second <= 500 + 60_000 / 3, "second renewal took {second}");
        assert!(third >= 500 + 15_000, "the last to renew got only {third}");
        assert!(pool.committed() <= 60_000);
    }

    #[test]
    fn renewal_charges_usage_and_cap_returns_the_rest() {
        let id = PoolId::Budget(QuotaScope::caller("a"));
        let mut pool = Pool::new(spec(1000, 10), 0, None);
        let a = pool.grant(&id, &req(1, None, 0, 0, 500), 0).unwrap();
        assert_eq!(a.granted_total, 500);
        assert_eq!(pool.committed(), 510);
        // Node used 100 and gives back all but 50 of what is left.
        let a2 = pool
            .grant(&id, &req(1, Some(a.epoch), 100, 150, 50), 5)
            .unwrap();
        assert_eq!(a2.epoch, a.epoch);
        assert_eq!(a2.granted_total, 150);
        assert_eq!(pool.spent, 100);
        assert_eq!(pool.committed(), 100 + 50 + 10);
    }

    #[test]
    fn expiry_charges_the_whole_hold_and_stale_epochs_are_fenced() {
        let id = PoolId::Budget(QuotaScope::caller("a"));
        let mut pool = Pool::new(spec(1000, 10), 0, None);
        let a = pool.grant(&id, &req(1, None, 0, 0, 200), 0).unwrap();
        let expired = pool.advance(10_000);
        assert_eq!(expired.leases, 1);
        assert_eq!(pool.spent, 210);
        let b = pool
            .grant(&id, &req(1, Some(a.epoch), 50, 200, 200), 10_001)
            .unwrap();
        assert!(b.epoch > a.epoch, "a new epoch fences the old lease");
        assert_eq!(pool.spent, 210, "the expired lease is not charged twice");
    }

    #[test]
    fn period_rollover_resets_spend() {
        let id = PoolId::Budget(QuotaScope::caller("a"));
        let mut pool = Pool::new(spec(1000, 0), 0, None);
        let a = pool.grant(&id, &req(1, None, 0, 0, 400), 0).unwrap();
        assert!(pool.release(1, a.epoch, 400));
        assert_eq!(pool.spent, 400);
        pool.advance(1_000_000);
        assert_eq!(pool.spent, 0);
    }
}
