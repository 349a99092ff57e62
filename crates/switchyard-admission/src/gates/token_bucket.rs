//! Rate gate: a token bucket in LLM tokens. A request costs its estimate (prompt tokens +
//! `max_tokens`) up front; when it ends the charge is corrected to real usage.

use std::time::{Duration, Instant};

/// How a settlement corrected the up-front charge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Settlement {
    Exact,
    Refund,
    Debt,
    /// More debt than allowed was due; the rest is forgiven.
    DebtCapped,
}

impl Settlement {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Settlement::Exact => "exact",
            Settlement::Refund => "refund",
            Settlement::Debt => "debt",
            Settlement::DebtCapped => "debt_capped",
        }
    }

    pub(crate) const ALL: [Settlement; 4] = [
        Settlement::Exact,
        Settlement::Refund,
        Settlement::Debt,
        Settlement::DebtCapped,
    ];
}

#[derive(Debug)]
pub(crate) struct TokenBucket {
    rate_per_sec: f64,
    capacity: f64,
    max_debt: f64,
    /// Negative while in debt.
    level: f64,
    last_refill: Instant,
}

impl TokenBucket {
    /// Starts full.
    pub(crate) fn new(rate_per_sec: f64, capacity: f64, max_debt: f64, now: Instant) -> Self {
        Self {
            rate_per_sec,
            capacity,
            max_debt,
            level: capacity,
            last_refill: now,
        }
    }

    /// From a per-minute quota: rate = quota/60 × `rate_factor`, capacity = rate × `burst_seconds`.
    pub(crate) fn for_quota(
        tokens_per_minute: u64,
        rate_factor: f64,
        burst_seconds: f64,
        max_debt_ratio: f64,
        now: Instant,
    ) -> Self {
        let rate = tokens_per_minute as f64 / 60.0 * rate_factor;
        let capacity = rate * burst_seconds;
        Self::new(rate, capacity, capacity * max_debt_ratio, now)
    }

    pub(crate) fn level(&mut self, now: Instant) -> f64 {
        self.refill(now);
        self.level
    }

    pub(crate) fn capacity(&self) -> f64 {
        self.capacity
    }

    /// Takes `cost` tokens, or says how long until it could. A request larger than the whole
    /// bucket needs a full bucket and leaves the rest as (bounded) debt, so big prompts are
    /// slowed down rather than refused forever. Returns the tokens actually taken.
    pub(crate) fn try_take(&mut self, cost: u64, now: Instant) -> Result<f64, Duration> {
        self.refill(now);
        let cost = cost as f64;
        let needed = cost.min(self.capacity);
        if self.level + 1e-9 < needed {
            let missing = needed - self.level;
            return Err(Duration::from_secs_f64(missing / self.rate_per_sec));
        }
        let before = self.level;
        self.level = (self.level - cost).max(-self.max_debt);
        Ok(before - self.level)
    }

    /// Gives back tokens taken for a request that was not admitted after all.
    pub(crate) fn refund(&mut self, taken: f64, now: Instant) {
        self.refill(now);
        self.level = (self.level + taken).min(self.capacity);
    }

    /// Corrects a charge of `taken` tokens to the request's real usage.
    pub(crate) fn settle(&mut self, taken: f64, actual: u64, now: Instant) -> Settlement {
        self.refill(now);
        let difference = taken - actual as f64;
        if difference.abs() < 0.5 {
            Settlement::Exact
        } else if difference > 0.0 {
            self.level = (self.level + difference).min(self.capacity);
            Settlement::Refund
        } else if self.level + difference < -self.max_debt {
            self.level = -self.max_debt;
            Settlement::DebtCapped
        } else {
            self.level += difference;
            Settlement::Debt
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now
            .saturating_duration_since(self.last_refill)
            .as_secs_f64();
        self.level = (self.level + elapsed * self.rate_per_sec).min(self.capacity);
        self.last_refill = self.last_refill.max(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn rate_and_capacity_follow_the_quota() {
        let t0 = Instant::now();
        // 60 000 tokens/min → 900 tokens/s after the 0.9 headroom, 1 350 burst.
        let mut bucket = TokenBucket::for_quota(60_000, 0.9, 1.5, 1.0, t0);
        assert_eq!(bucket.capacity(), 1_350.0);
        assert!(bucket.try_take(1_350, t0).is_ok(), "a full burst passes");
        let wait = bucket.try_take(900, t0).unwrap_err();
        assert_eq!(wait, SECOND, "900 tokens refill in one second");
        assert!(
            bucket.try_take(900, t0 + SECOND / 2).is_err(),
            "half refilled"
        );
        assert!(
            bucket.try_take(900, t0 + SECOND).is_ok(),
            "boundary: exactly enough"
        );
        assert!(bucket.try_take(1, t0 + SECOND).is_err());
    }

    #[test]
    fn refill_stops_at_capacity() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::for_quota(60_000, 0.9, 1.5, 1.0, t0);
        bucket.try_take(1_350, t0).unwrap();
        assert_eq!(bucket.level(t0 + SECOND * 3600), 1_350.0);
        assert!(
            bucket.try_take(1_351, t0 + SECOND * 3600).is_ok(),
            "oversize needs only a full bucket"
        );
        assert_eq!(bucket.level(t0 + SECOND * 3600), -1.0);
    }

    #[test]
    fn settlement_refunds_overestimates_and_books_bounded_debt() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(100.0, 1_000.0, 500.0, t0);
        let taken = bucket.try_take(800, t0).unwrap();
        assert_eq!(bucket.settle(taken, 300, t0), Settlement::Refund);
        assert_eq!(bucket.level(t0), 700.0);
        let taken = bucket.try_take(700, t0).unwrap();
        assert_eq!(bucket.settle(taken, 1_000, t0), Settlement::Debt);
        assert_eq!(bucket.level(t0), -300.0, "300 tokens of debt");
        assert!(
            bucket.try_take(1, t0 + SECOND * 3).is_err(),
            "debt is paid back by refill first"
        );
        let taken = 0.0;
        assert_eq!(
            bucket.settle(taken, 10_000, t0 + SECOND * 3),
            Settlement::DebtCapped
        );
        assert_eq!(bucket.level(t0 + SECOND * 3), -500.0, "debt bounded");
        assert_eq!(bucket.settle(5.0, 5, t0 + SECOND * 3), Settlement::Exact);
    }

    #[test]
    fn refund_returns_what_was_taken() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(100.0, 1_000.0, 0.0, t0);
        let taken = bucket.try_take(600, t0).unwrap();
        bucket.refund(taken, t0);
        assert_eq!(bucket.level(t0), 1_000.0);
    }
}
