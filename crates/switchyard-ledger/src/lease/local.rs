//! One pool's lease as this node holds it. The hot path takes a short uncontended lock per
//! reservation (granted and used must move together); the keeper task is the only writer of
//! grants and deadlines.

use parking_lot::Mutex;
use std::time::{Duration, Instant};

use super::shares::{ShareLimiter, ShareMiss};
use crate::command::{LeaseGrant, LeaseRequest, NodeId, PoolId};

/// Why a reservation could not be taken from the lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseMiss {
    /// No lease yet (or the ledger refused one).
    NoLease,
    /// The local deadline passed before a renewal arrived.
    Expired,
    /// Not enough tokens left in the lease.
    Short,
    /// The lease has the tokens but the spend journal's synced ceiling is below them: the
    /// journal writer is asked to raise it (a local disk sync, no ledger round trip).
    Unjournaled,
}

/// What a successful reservation asks of the background tasks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reserved {
    /// Half of the last grant is used: renew now rather than at the keeper's next look.
    pub renew_now: bool,
    /// The journal's headroom above the spend is below half its step: raise it now.
    pub journal_now: bool,
}

#[derive(Debug, Default)]
struct Counters {
    epoch: Option<u64>,
    granted_total: u64,
    used_total: u64,
    inflight: u64,
    max_debt: u64,
    deadline: Option<Instant>,
    /// Tokens asked for (granted or not) since the last renewal: the demand signal.
    asked: u64,
    starved: bool,
    renewed_at: Option<Instant>,
    used_at_renewal: u64,
    granted_at_renewal: u64,
    expiry_counted: bool,
    /// After a refusal, when the keeper may ask again.
    next_attempt: Option<Instant>,
    /// The spend journal's synced ceiling for this epoch: reservations never take
    /// `used_total` past it, so after a crash the journal bounds what this epoch spent.
    journaled: u64,
    /// The largest `used_total` a reservation needed above the ceiling.
    journal_wanted: u64,
    /// Epochs this lease has left (replaced or refused) whose journal entries can close.
    closed_epochs: Vec<u64>,
    /// The largest reservation seen: a journal step covers a few of them.
    largest_request: u64,
    /// Tokens this node spends while a renewal commits (observed rate × a few × the recent
    /// renewal latency): the renewal is asked for before less than this is left.
    renew_cover: u64,
    /// Tokens this node spends while the journal syncs (observed rate × a few × the recent
    /// sync latency): the journal's ceiling runs at least this far ahead of the spend.
    journal_cover: u64,
}

impl Counters {
    /// How far the journal's ceiling runs ahead of the spend: a quarter of the fresh part of
    /// the last grant, so a crash strands at most that (plus the debt allowance) and the
    /// journal syncs about eight times per grant; at least four of the largest requests, so
    /// a small lease does not sync per request; at least what this node spends during a few
    /// of its recent journal syncs (within the grant), so a slow disk does not stall
    /// reservations on the ceiling.
    fn journal_step(&self) -> u64 {
        let fresh = self.granted_at_renewal.saturating_sub(self.used_at_renewal);
        journal_step(fresh, self.largest_request, self.journal_cover)
    }

    /// The spend at which the keeper renews: once half of the fresh grant is used, or
    /// earlier once less than `renew_cover` of it is left, but not before a quarter of it is
    /// used (a grant smaller than the cover, near a budget's end, must not renew per request).
    fn renew_point(&self) -> u64 {
        renew_point(
            self.used_at_renewal,
            self.granted_at_renewal,
            self.renew_cover,
        )
    }
}

fn renew_point(used_at_renewal: u64, granted_at_renewal: u64, renew_cover: u64) -> u64 {
    let fresh = granted_at_renewal.saturating_sub(used_at_renewal);
    let half = used_at_renewal.saturating_add(fresh / 2);
    let covered = granted_at_renewal.saturating_sub(renew_cover);
    let earliest = used_at_renewal.saturating_add(fresh / 4);
    half.min(covered).max(earliest)
}

/// A read-only picture of a lease for metrics, tests and renewal decisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseSnapshot {
    pub epoch: Option<u64>,
    pub granted_total: u64,
    pub used_total: u64,
    pub inflight: u64,
    pub deadline: Option<Instant>,
    pub asked: u64,
    pub starved: bool,
    pub renewed_at: Option<Instant>,
    pub used_at_renewal: u64,
    pub granted_at_renewal: u64,
    pub next_attempt: Option<Instant>,
    pub journaled: u64,
    pub renew_cover: u64,
    pub journal_cover: u64,
}

impl LeaseSnapshot {
    /// Share of the latest grant spent since it arrived (0 with nothing granted).
    pub fn utilisation(&self) -> f64 {
        let fresh = self.granted_at_renewal.saturating_sub(self.used_at_renewal);
        if fresh == 0 {
            return 0.0;
        }
        let used = self.used_total.saturating_sub(self.used_at_renewal);
        (used as f64 / fresh as f64).min(1.0)
    }

    /// Whether enough of the latest grant is used that the keeper should renew it (see
    /// `renew_point`).
    pub fn renewal_due(&self) -> bool {
        if self.granted_at_renewal <= self.used_at_renewal {
            // Nothing fresh was granted: any spend since asks for more.
            return self.used_total > self.used_at_renewal;
        }
        let point = renew_point(
            self.used_at_renewal,
            self.granted_at_renewal,
            self.renew_cover,
        );
        self.used_total >= point
    }

    pub fn remaining(&self, now: Instant) -> u64 {
        match self.deadline {
            Some(deadline) if now < deadline => self.granted_total.saturating_sub(self.used_total),
            _ => 0,
        }
    }
}

fn journal_step(fresh: u64, largest_request: u64, journal_cover: u64) -> u64 {
    (fresh / 4)
        .max(largest_request.saturating_mul(4))
        .max(journal_cover.min(fresh))
        .max(1)
}

#[derive(Debug)]
pub struct LocalLease {
    pub pool: PoolId,
    counters: Mutex<Counters>,
    /// The grant's rate and concurrency shares (budgets only; overrides add tokens, not rate).
    shares: ShareLimiter,
}

impl LocalLease {
    /// `origin` is any instant of the clock the hot path will pass in (the bucket's zero).
    pub fn new(pool: PoolId, origin: Instant) -> Self {
        Self {
            pool,
            counters: Mutex::new(Counters::default()),
            shares: ShareLimiter::new(origin),
        }
    }

    /// Whether the ledger refused this lease recently and will not be asked again before
    /// `next_attempt` (waiting for a renewal would wait for nothing).
    pub fn backing_off(&self, now: Instant) -> bool {
        self.counters.lock().next_attempt.is_some_and(|at| now < at)
    }

    pub fn shares(&self) -> &ShareLimiter {
        &self.shares
    }

    /// Hot path, before the tokens: a rate and concurrency slot within this node's shares.
    pub fn try_acquire_shares(&self, tokens: u64, now: Instant) -> Result<(), ShareMiss> {
        self.shares.try_acquire(tokens, now)
    }

    /// Gives back the slot and settles the bucket (refund or overshoot).
    pub fn release_shares(&self, estimate: u64, actual: u64) {
        self.shares.release(estimate, actual);
    }

    /// A reservation the shares refused still counts as demand; with no share at all the
    /// keeper is asked to renew soon (another node may have given some back).
    pub fn note_refused_demand(&self, tokens: u64) {
        let no_share = self.shares.rate_per_s() == 0 || self.shares.concurrency() == 0;
        let mut c = self.counters.lock();
        c.asked = c.asked.saturating_add(tokens);
        c.starved |= no_share;
    }

    /// The keeper's latest sizing from observed latencies: tokens this node spends while a
    /// renewal commits and while the journal syncs (see `renew_point`, `journal_step`).
    pub fn set_cover(&self, renew_cover: u64, journal_cover: u64) {
        let mut c = self.counters.lock();
        c.renew_cover = renew_cover;
        c.journal_cover = journal_cover;
    }

    /// Hot path: takes `tokens` if the lease is live, has them and the journal's synced
    /// ceiling covers them. Answers whether the keeper should renew now (the renew point of
    /// the last grant crossed) and whether the journal should raise its ceiling now, so neither runs dry
    /// under load.
    pub fn try_reserve(&self, tokens: u64, now: Instant) -> Result<Reserved, LeaseMiss> {
        let mut c = self.counters.lock();
        c.asked = c.asked.saturating_add(tokens);
        let Some(deadline) = c.deadline else {
            c.starved = true;
            return Err(LeaseMiss::NoLease);
        };
        if now >= deadline {
            c.starved = true;
            return Err(LeaseMiss::Expired);
        }
        c.largest_request = c.largest_request.max(tokens);
        let needed = c.used_total.saturating_add(tokens);
        if needed > c.granted_total {
            c.starved = true;
            return Err(LeaseMiss::Short);
        }
        if needed > c.journaled {
            c.journal_wanted = c.journal_wanted.max(needed);
            return Err(LeaseMiss::Unjournaled);
        }
        let point = c.renew_point();
        let renew_now = c.used_total < point && needed >= point;
        c.used_total = needed;
        c.inflight += tokens;
        let journal_now = c.journaled.saturating_sub(needed) < c.journal_step() / 2
            && c.journaled < c.granted_total;
        Ok(Reserved {
            renew_now,
            journal_now,
        })
    }

    /// The ceiling the journal should sync for this lease now, if it should: the spend (or
    /// what a waiting reservation needs) plus a step, within the grant.
    pub fn journal_due(&self) -> Option<(u64, u64)> {
        let c = self.counters.lock();
        let epoch = c.epoch?;
        let step = c.journal_step();
        let base = c.used_total.max(c.journal_wanted);
        let target = base
            .saturating_add(step)
            .min(c.granted_total)
            .max(c.journal_wanted);
        let low = c.journaled.saturating_sub(c.used_total) < step / 2;
        let due = target > c.journaled && (low || c.journal_wanted > c.journaled);
        due.then_some((epoch, target))
    }

    /// The journal synced `ceiling` for `epoch`: reservations may go up to it.
    pub fn journal_synced(&self, epoch: u64, ceiling: u64) {
        let mut c = self.counters.lock();
        if c.epoch == Some(epoch) {
            c.journaled = c.journaled.max(ceiling);
            if c.journal_wanted <= c.journaled {
                c.journal_wanted = 0;
            }
        }
    }

    /// Epochs this lease has left since the last call (their journal entries can close).
    pub fn take_closed_epochs(&self) -> Vec<u64> {
        std::mem::take(&mut self.counters.lock().closed_epochs)
    }

    /// The first ceiling to sync for a grant of a new epoch, before it is installed: what
    /// is in flight (carried into the new epoch) plus a step.
    pub fn first_ceiling(&self, grant: &LeaseGrant) -> u64 {
        let c = self.counters.lock();
        let fresh = grant.granted_total.saturating_sub(c.inflight);
        c.inflight
            .saturating_add(journal_step(fresh, c.largest_request, c.journal_cover))
            .min(grant.granted_total)
    }

    /// Replaces an estimate by the real count. Overshoot goes into debt up to the lease's
    /// allowance; what is beyond it is returned (metered, the ledger cannot cover it).
    pub fn settle(&self, estimate: u64, actual: u64) -> u64 {
        let mut c = self.counters.lock();
        c.inflight = c.inflight.saturating_sub(estimate);
        if actual >= estimate {
            let extra = actual - estimate;
            // Real usage is always charged (up to the debt allowance): capping it at the
            // journal's ceiling would under-report what was spent and let the budget be
            // overspent. The journal catches up instead: the writer syncs a ceiling that
            // covers the new spend at its next pass.
            let ceiling = c.granted_total.saturating_add(c.max_debt);
            let room = ceiling.saturating_sub(c.used_total);
            let taken = extra.min(room);
            c.used_total += taken;
            if c.used_total > c.journaled {
                c.journal_wanted = c.journal_wanted.max(c.used_total);
            }
            extra - taken
        } else {
            c.used_total = c.used_total.saturating_sub(estimate - actual);
            0
        }
    }

    pub fn snapshot(&self) -> LeaseSnapshot {
        let c = self.counters.lock();
        LeaseSnapshot {
            epoch: c.epoch,
            granted_total: c.granted_total,
            used_total: c.used_total,
            inflight: c.inflight,
            deadline: c.deadline,
            asked: c.asked,
            starved: c.starved,
            renewed_at: c.renewed_at,
            used_at_renewal: c.used_at_renewal,
            granted_at_renewal: c.granted_at_renewal,
            next_attempt: c.next_attempt,
            journaled: c.journaled,
            renew_cover: c.renew_cover,
            journal_cover: c.journal_cover,
        }
    }

    /// Counts a local expiry once per lapse; answers whether this call was the first.
    pub fn note_expiry(&self, now: Instant) -> bool {
        let mut c = self.counters.lock();
        let lapsed = c.deadline.is_some_and(|d| now >= d);
        if lapsed && !c.expiry_counted {
            c.expiry_counted = true;
            return true;
        }
        false
    }

    /// Builds the renewal and, before it is sent, lowers what this node may spend to what
    /// it keeps (`used + min(left, demand)`), so the ledger can reclaim the rest safely.
    pub fn prepare_renewal(
        &self,
        node: NodeId,
        demand: u64,
        ttl: Duration,
        now: Instant,
    ) -> LeaseRequest {
        let mut c = self.counters.lock();
        c.asked = 0;
        c.starved = false;
        let live = c.deadline.is_some_and(|d| now < d);
        if c.epoch.is_some() && live {
            let left = c.granted_total.saturating_sub(c.used_total);
            let cap = c.used_total.saturating_add(left.min(demand));
            c.granted_total = c.granted_total.min(cap);
        } else if c.epoch.is_some() {
            // Lapsed locally: nothing more is spent under it until the ledger answers.
            c.granted_total = c.granted_total.min(c.used_total);
        }
        LeaseRequest {
            node,
            pool: self.pool.clone(),
            epoch: c.epoch,
            used_total: c.used_total,
            cap_total: c.granted_total.max(c.used_total),
            demand: demand.max(1),
            ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Installs the ledger's answer. `sent_at` is when the request left this node, so the
    /// local deadline is never later than the ledger's own expiry. `journaled` is the ceiling
    /// synced for a new epoch before this call (0 if none was).
    pub fn apply_grant(
        &self,
        grant: &LeaseGrant,
        sent_at: Instant,
        margin: Duration,
        now: Instant,
        journaled: u64,
    ) {
        let mut c = self.counters.lock();
        if c.epoch != Some(grant.epoch) {
            // A new epoch: the previous lease is gone (charged by the ledger up to the cap
            // this node sent), and reservations still in flight are carried into the new one.
            if let Some(old) = c.epoch {
                c.closed_epochs.push(old);
            }
            c.epoch = Some(grant.epoch);
            c.used_total = c.inflight;
            c.journaled = journaled;
            c.journal_wanted = 0;
        }
        c.granted_total = grant.granted_total;
        c.max_debt = grant.max_debt_tokens;
        self.shares
            .set_shares(grant.rate_share_per_s, grant.concurrency_share);
        let ttl = Duration::from_millis(grant.ttl_ms);
        c.deadline = ttl.checked_sub(margin).map(|usable| sent_at + usable);
        c.expiry_counted = false;
        c.next_attempt = None;
        c.renewed_at = Some(now);
        c.used_at_renewal = c.used_total;
        c.granted_at_renewal = c.granted_total;
    }

    /// The ledger refused a lease: nothing can be spent until a later grant, which is not
    /// asked for before `retry_at` (an exhausted budget must not turn into a write storm).
    pub fn clear(&self, retry_at: Instant) {
        let mut c = self.counters.lock();
        if let Some(old) = c.epoch.take() {
            c.closed_epochs.push(old);
        }
        c.deadline = None;
        c.granted_total = c.used_total;
        c.next_attempt = Some(retry_at);
    }

    /// Stops spending (shutdown); answers the release to send, if a lease is held.
    pub fn close_for_release(&self) -> Option<(u64, u64)> {
        let mut c = self.counters.lock();
        c.deadline = None;
        c.granted_total = c.used_total;
        c.epoch.map(|epoch| (epoch, c.used_total))
    }
}

#[cfg(test)]
#[path = "local_cover_tests.rs"]
mod cover_tests;

#[cfg(test)]
#[path = "local_tests.rs"]
mod tests;
