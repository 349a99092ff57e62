//! The three per-caller gates in series, cheapest first: period budget (ledger), token
//! bucket (rate), concurrency (in flight). What each gate grants is held in `Holdings`, which
//! gives it all back if the request is refused further on or abandoned.

mod budget;
pub(crate) mod callers;
mod holdings;
pub(crate) mod token_bucket;

use http::StatusCode;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::{Clock, QuotaLedger, QuotaScope, RequestTags};

use crate::config::GatesConfig;
use crate::refusal::{Refusal, code, gate};
use callers::{CallerDirectory, CallerGates};
pub(crate) use holdings::Holdings;
pub(crate) use token_bucket::Settlement;

pub(crate) struct GateChain {
    pub(crate) ledger: Arc<dyn QuotaLedger>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) config: GatesConfig,
    pub(crate) callers: CallerDirectory,
}

impl GateChain {
    pub(crate) fn caller(&self, caller: &str) -> &Arc<CallerGates> {
        self.callers.get(caller)
    }

    /// Passes the request through budget → rate → concurrency for every scope it belongs to.
    pub(crate) async fn pass(
        &self,
        tags: &RequestTags,
        estimated_tokens: u64,
    ) -> Result<Holdings, Refusal> {
        let gates = self.caller(&tags.caller).clone();
        let mut holdings = Holdings::new(self.ledger.clone(), self.clock.clone(), estimated_tokens);
        for scope in gates.scopes(tags.purpose).filter(|s| s.reserve) {
            let scope = QuotaScope {
                caller: tags.caller.clone(),
                purpose: scope.scope.purpose,
            };
            budget::pass(
                &*self.ledger,
                &scope,
                tags,
                estimated_tokens,
                &self.config,
                &mut holdings,
            )
            .await?;
        }
        let now = self.clock.now();
        for scope in gates.scopes(tags.purpose) {
            let Some(bucket) = &scope.bucket else {
                continue;
            };
            let taken = bucket.lock().try_take(estimated_tokens, now);
            match taken {
                Ok(taken) => holdings.hold_bucket(gates.clone(), scope.scope.purpose, taken),
                Err(wait) => {
                    let mut refusal = Refusal::new(
                        StatusCode::TOO_MANY_REQUESTS,
                        gate::RATE,
                        code::RATE_LIMITED,
                        format!(
                            "token rate quota of `{}` exceeded ({estimated_tokens} tokens estimated)",
                            scope.scope
                        ),
                    );
                    refusal.retry_after = wait;
                    return Err(refusal);
                }
            }
        }
        // One deadline for all scopes: the wait is bounded per request, not per scope.
        let wait = Duration::from_millis(self.config.concurrency_wait_ms);
        let deadline = tokio::time::Instant::now() + wait;
        for scope in gates.scopes(tags.purpose) {
            let Some(semaphore) = &scope.in_flight else {
                continue;
            };
            let acquired = if wait.is_zero() {
                semaphore.clone().try_acquire_owned().ok()
            } else {
                tokio::time::timeout_at(deadline, semaphore.clone().acquire_owned())
                    .await
                    .ok()
                    .and_then(Result::ok)
            };
            match acquired {
                Some(permit) => holdings.hold_in_flight(permit),
                None => {
                    return Err(Refusal::new(
                        StatusCode::TOO_MANY_REQUESTS,
                        gate::CONCURRENCY,
                        code::CONCURRENCY_LIMIT,
                        format!(
                            "`{}` already has {} requests in flight (waited {} ms)",
                            scope.scope,
                            scope.max_in_flight.unwrap_or(0),
                            wait.as_millis()
                        ),
                    ));
                }
            }
        }
        Ok(holdings)
    }
}
