//! Budget gate: the period budget after this request's estimate. Above the soft limit P2 and
//! warmup traffic stop; above the hard limit only core callers' P0 still passes.

use http::StatusCode;
use switchyard_core::{
    FleetLimit, Priority, Purpose, QuotaError, QuotaLedger, QuotaScope, RequestTags, SpendTags,
};

use super::holdings::Holdings;
use crate::config::GatesConfig;
use crate::refusal::{Refusal, code, gate};

/// Which threshold, if any, refuses a request of these tags at this water level. Levels
/// exactly at a threshold still pass.
pub(crate) fn threshold_code(
    level: f64,
    tags: &RequestTags,
    config: &GatesConfig,
) -> Option<&'static str> {
    let survives_hard = tags.core_caller && tags.priority == Priority::P0;
    let shed_at_soft = tags.priority == Priority::P2 || tags.purpose == Purpose::Warmup;
    if level > config.hard_limit && !survives_hard {
        Some(code::BUDGET_HARD_LIMIT)
    } else if level > config.soft_limit && shed_at_soft {
        Some(code::BUDGET_SOFT_LIMIT)
    } else {
        None
    }
}

/// Reserves the estimate against `scope` and judges the resulting water level, so the check
/// covers "spent + reserved + this request" with nothing but the ledger trait. A replicated
/// ledger may hold the request briefly while its local lease is renewed.
pub(super) async fn pass(
    ledger: &dyn QuotaLedger,
    scope: &QuotaScope,
    tags: &RequestTags,
    estimated_tokens: u64,
    config: &GatesConfig,
    holdings: &mut Holdings,
) -> Result<(), Refusal> {
    let spend = SpendTags {
        scope: scope.clone(),
        purpose: tags.purpose,
        priority: tags.priority,
    };
    let reservation = ledger
        .reserve_or_wait(&spend, estimated_tokens)
        .await
        .map_err(|error| match error {
            QuotaError::Exhausted { .. } => Refusal::new(
                StatusCode::TOO_MANY_REQUESTS,
                gate::BUDGET,
                code::BUDGET_EXHAUSTED,
                error.to_string(),
            ),
            QuotaError::FleetShare {
                limit: FleetLimit::Rate,
                ..
            } => Refusal::new(
                StatusCode::TOO_MANY_REQUESTS,
                gate::RATE,
                code::RATE_LIMITED,
                error.to_string(),
            ),
            QuotaError::FleetShare {
                limit: FleetLimit::Concurrency,
                ..
            } => Refusal::new(
                StatusCode::TOO_MANY_REQUESTS,
                gate::CONCURRENCY,
                code::CONCURRENCY_LIMIT,
                error.to_string(),
            ),
            QuotaError::Unavailable { .. } => Refusal::new(
                StatusCode::SERVICE_UNAVAILABLE,
                gate::BUDGET,
                code::LEDGER_UNAVAILABLE,
                error.to_string(),
            ),
        })?;
    let level = ledger.water_level(scope);
    // Held before judging, so a refusal below releases it through the holdings.
    holdings.hold_reservation(reservation);
    let Some((level, code)) =
        level.and_then(|level| threshold_code(level, tags, config).map(|code| (level, code)))
    else {
        return Ok(());
    };
    let (who, limit) = if code == code::BUDGET_HARD_LIMIT {
        ("all but core P0", config.hard_limit)
    } else {
        ("P2 and warmup", config.soft_limit)
    };
    Err(Refusal::new(
        StatusCode::TOO_MANY_REQUESTS,
        gate::BUDGET,
        code,
        format!(
            "period token budget of `{scope}` would be {:.1} % used; {who} traffic is held back past {:.0} %",
            level * 100.0,
            limit * 100.0
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn tags(priority: Priority, purpose: Purpose, core: bool) -> RequestTags {
        RequestTags {
            caller: Arc::from("a"),
            purpose,
            priority,
            core_caller: core,
            client_retry: 0,
        }
    }

    #[test]
    fn soft_limit_sheds_p2_and_warmup_only() {
        let config = GatesConfig::default();
        let p2 = tags(Priority::P2, Purpose::Business, false);
        let warmup = tags(Priority::P0, Purpose::Warmup, true);
        let p1 = tags(Priority::P1, Purpose::Business, false);
        assert_eq!(
            threshold_code(0.80, &p2, &config),
            None,
            "at the limit still passes"
        );
        assert_eq!(
            threshold_code(0.801, &p2, &config),
            Some(code::BUDGET_SOFT_LIMIT)
        );
        assert_eq!(
            threshold_code(0.801, &warmup, &config),
            Some(code::BUDGET_SOFT_LIMIT)
        );
        assert_eq!(threshold_code(0.94, &p1, &config), None);
    }

    #[test]
    fn hard_limit_keeps_only_core_p0() {
        let config = GatesConfig::default();
        let core_p0 = tags(Priority::P0, Purpose::Business, true);
        let core_p1 = tags(Priority::P1, Purpose::Business, true);
        let other_p0 = tags(Priority::P0, Purpose::Business, false);
        assert_eq!(threshold_code(0.95, &other_p0, &config), None);
        assert_eq!(
            threshold_code(0.951, &other_p0, &config),
            Some(code::BUDGET_HARD_LIMIT)
        );
        assert_eq!(
            threshold_code(0.951, &core_p1, &config),
            Some(code::BUDGET_HARD_LIMIT)
        );
        assert_eq!(threshold_code(0.999, &core_p0, &config), None);
        let core_warmup = tags(Priority::P0, Purpose::Warmup, true);
        assert_eq!(
            threshold_code(0.99, &core_warmup, &config),
            Some(code::BUDGET_SOFT_LIMIT)
        );
    }
}
