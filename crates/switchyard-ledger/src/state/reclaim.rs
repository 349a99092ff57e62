//! Giving back what a lease did not spend once its holder says so. An expired or fenced lease
//! is charged in full (the ledger cannot know what a silent node spent); the charge is
//! remembered here until the holder reports a bound on its spend under that epoch — a renewal
//! naming the epoch, a release, or a restarted node's spend journal — and the rest returns to
//! the pool. A holder that never reports keeps its lease charged: that is the worst case.

use super::pool::{Lease, Pool};
use super::unreported::Unreported;
use crate::command::NodeId;

/// Epochs per node whose charge is remembered; older ones stay charged in full.
const EPOCHS_REMEMBERED_PER_NODE: usize = 4;

impl Pool {
    /// Remembers a lease that was just charged in full (expiry or fencing).
    pub(super) fn remember_unreported(&mut self, node: NodeId, lease: &Lease) {
        let charged_total = lease
            .granted_total
            .saturating_add(self.spec.max_debt_tokens)
            .max(lease.used_reported);
        self.unreported.insert(
            (node, lease.epoch),
            Unreported {
                period_index: self.period_index,
                granted_total: lease.granted_total,
                charged_total,
                used_reported: lease.used_reported,
            },
        );
        let epochs: Vec<u64> = self
            .unreported
            .range((node, 0)..=(node, u64::MAX))
            .map(|((_, epoch), _)| *epoch)
            .collect();
        let excess = epochs.len().saturating_sub(EPOCHS_REMEMBERED_PER_NODE);
        for epoch in epochs.into_iter().take(excess) {
            self.unreported.remove(&(node, epoch));
        }
    }

    /// The holder of an expired or fenced `epoch` let through at most `spent_at_most` tokens
    /// of reservations under it (settlement may have added the debt allowance): gives back
    /// the rest of what was charged. Answers the tokens given back (0 when nothing is
    /// remembered for that epoch, e.g. a repeated report).
    pub fn settle_unreported(&mut self, node: NodeId, epoch: u64, spent_at_most: u64) -> u64 {
        let Some(charge) = self.unreported.remove(&(node, epoch)) else {
            return 0;
        };
        if charge.period_index != self.period_index {
            return 0;
        }
        let spent = spent_at_most
            .min(charge.granted_total)
            .saturating_add(self.spec.max_debt_tokens)
            .max(charge.used_reported)
            .min(charge.charged_total);
        let back = charge.charged_total - spent;
        self.spent = self.spent.saturating_sub(back);
        self.reclaimed_tokens = self.reclaimed_tokens.saturating_add(back);
        back
    }

    /// A restarted node reports a lease of its previous process: released at the reported
    /// bound if still live, else settled as above. Answers the tokens returned to the pool
    /// beyond what the lease would have been charged at expiry.
    pub fn reclaim(&mut self, node: NodeId, epoch: u64, spent_at_most: u64) -> u64 {
        let live = self.leases.get(&node).filter(|l| l.epoch == epoch).cloned();
        let Some(lease) = live else {
            return self.settle_unreported(node, epoch, spent_at_most);
        };
        let before = self.committed();
        let used = spent_at_most
            .min(lease.granted_total)
            .saturating_add(self.spec.max_debt_tokens);
        self.release(node, epoch, used);
        let back = before.saturating_sub(self.committed());
        self.reclaimed_tokens = self.reclaimed_tokens.saturating_add(back);
        back
    }
}

#[cfg(test)]
mod tests {
    use crate::command::{BudgetSpec, LeaseRequest, PoolId};
    use crate::state::Pool;
    use switchyard_core::QuotaScope;

    fn pool(limit: u64, debt: u64) -> (PoolId, Pool) {
        let spec = BudgetSpec {
            limit_tokens: limit,
            period_ms: 1_000_000,
            rate_tokens_per_s: 0,
            max_concurrency: 0,
            max_debt_tokens: debt,
            max_lease_tokens: 0,
        };
        (
            PoolId::Budget(QuotaScope::caller("a")),
            Pool::new(spec, 0, None),
        )
    }

    fn req(node: u64, epoch: Option<u64>, used: u64, cap: u64, demand: u64) -> LeaseRequest {
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
    fn an_expired_lease_gives_back_what_its_holder_did_not_spend_once_and_in_its_period() {
        let (id, mut pool) = pool(10_000, 10);
        let a = pool.grant(&id, &req(1, None, 0, 0, 1_000), 0).unwrap();
        pool.advance(10_000);
        assert_eq!(pool.spent, 1_010, "charged in full at expiry");
        // The restarted holder's journal says at most 300 were let through.
        assert_eq!(pool.reclaim(1, a.epoch, 300), 700);
        assert_eq!(pool.spent, 310, "300 plus the debt allowance stay charged");
        assert_eq!(
            pool.reclaim(1, a.epoch, 0),
            0,
            "a repeated report gives nothing"
        );
        assert_eq!(pool.spent, 310);
        // A report claiming more than the grant gives nothing back.
        let b = pool.grant(&id, &req(1, None, 0, 0, 500), 10_000).unwrap();
        pool.advance(20_000);
        let charged = pool.spent;
        assert_eq!(pool.reclaim(1, b.epoch, 9_999), 0);
        assert_eq!(pool.spent, charged);
        // A lease charged in an earlier period is not refunded from the new one.
        let c = pool.grant(&id, &req(1, None, 0, 0, 500), 20_000).unwrap();
        pool.advance(990_000);
        pool.advance(1_000_000);
        assert_eq!(pool.spent, 0);
        assert_eq!(pool.reclaim(1, c.epoch, 0), 0);
        assert_eq!(pool.spent, 0);
    }

    #[test]
    fn a_renewal_naming_a_fenced_epoch_settles_it_at_its_cap_and_a_live_lease_is_released() {
        let (id, mut pool) = pool(10_000, 0);
        let a = pool.grant(&id, &req(1, None, 0, 0, 1_000), 0).unwrap();
        pool.advance(10_000);
        assert_eq!(pool.spent, 1_000);
        // The node, lapsed locally, renews its old epoch having spent 200 at most.
        let b = pool
            .grant(&id, &req(1, Some(a.epoch), 200, 200, 500), 10_001)
            .unwrap();
        assert!(b.epoch > a.epoch);
        assert_eq!(pool.spent, 200);
        // A restart reports the live lease b: released at the journal's bound.
        assert_eq!(pool.reclaim(1, b.epoch, 100), 400);
        assert_eq!(pool.spent, 300);
        assert!(pool.leases.is_empty());
        assert!(pool.invariant_holds());
    }

    #[test]
    fn a_fenced_lease_is_remembered_until_its_old_epoch_is_reported() {
        let (id, mut pool) = pool(10_000, 0);
        let a = pool.grant(&id, &req(1, None, 0, 0, 1_000), 0).unwrap();
        // The node restarted without reporting and asks afresh: the old lease is fenced.
        let b = pool.grant(&id, &req(1, None, 0, 0, 1_000), 100).unwrap();
        assert_eq!(pool.spent, 1_000);
        assert_eq!(pool.committed(), 2_000);
        assert_eq!(pool.reclaim(1, a.epoch, 50), 950);
        assert_eq!(pool.committed(), 1_050);
        assert_eq!(pool.leases[&1].epoch, b.epoch, "the new lease is untouched");
    }
}
