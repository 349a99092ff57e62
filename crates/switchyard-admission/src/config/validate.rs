use std::collections::HashSet;
use switchyard_core::Purpose;

use super::{AdmissionConfig, PerClass, TenantConfig};
use crate::AdmissionError;
use crate::identity::RESERVED_CALLERS;

type Check = Result<(), AdmissionError>;

pub(super) fn validate(config: &AdmissionConfig) -> Check {
    positive("max_concurrent", u64::from(config.max_concurrent))?;
    positive("max_queued", u64::from(config.max_queued))?;
    if config.identity.request_id_window_ms > 0 {
        positive(
            "identity.request_id_capacity",
            config.identity.request_id_capacity as u64,
        )?;
    }
    validate_wfq(config)?;
    validate_gates(config)?;
    validate_recovery(config)?;
    validate_adaptive(config)?;
    validate_tenants(&config.tenants)
}

fn validate_adaptive(config: &AdmissionConfig) -> Check {
    let adaptive = &config.adaptive;
    positive("adaptive.min_limit", u64::from(adaptive.min_limit))?;
    if adaptive.enabled && adaptive.min_limit > config.max_concurrent {
        return Err(AdmissionError::invalid(
            "adaptive.min_limit",
            "must not exceed max_concurrent",
        ));
    }
    positive("adaptive.update_interval_ms", adaptive.update_interval_ms)?;
    positive("adaptive.min_rtt_interval_ms", adaptive.min_rtt_interval_ms)?;
    positive(
        "adaptive.min_rtt_samples",
        u64::from(adaptive.min_rtt_samples),
    )?;
    if !(adaptive.rtt_tolerance.is_finite() && (0.0..=2.0).contains(&adaptive.rtt_tolerance)) {
        return Err(AdmissionError::invalid(
            "adaptive.rtt_tolerance",
            "must be within 0.0..=2.0",
        ));
    }
    Ok(())
}

fn validate_wfq(config: &AdmissionConfig) -> Check {
    let wfq = &config.wfq;
    per_class(
        "wfq.weights",
        &wfq.weights,
        |w| w.is_finite() && w > 0.0,
        "a number > 0",
    )?;
    per_class("wfq.min_shares", &wfq.min_shares, unit, "within 0.0..=1.0")?;
    if wfq.min_shares.to_array().iter().sum::<f64>() > 1.0 + 1e-9 {
        return Err(AdmissionError::invalid(
            "wfq.min_shares",
            "must sum to at most 1.0",
        ));
    }
    per_class(
        "wfq.queue_timeout_ms",
        &wfq.queue_timeout_ms,
        |t| t > 0,
        "> 0",
    )
}

fn validate_gates(config: &AdmissionConfig) -> Check {
    let gates = &config.gates;
    fraction("gates.soft_limit", gates.soft_limit)?;
    fraction("gates.hard_limit", gates.hard_limit)?;
    if gates.soft_limit > gates.hard_limit {
        return Err(AdmissionError::invalid(
            "gates.soft_limit",
            "must not exceed gates.hard_limit",
        ));
    }
    positive_f64("gates.bucket_rate_factor", gates.bucket_rate_factor)?;
    positive_f64("gates.bucket_burst_seconds", gates.bucket_burst_seconds)?;
    if !(gates.bucket_max_debt_ratio.is_finite() && gates.bucket_max_debt_ratio >= 0.0) {
        return Err(AdmissionError::invalid(
            "gates.bucket_max_debt_ratio",
            "must be a number >= 0",
        ));
    }
    fraction("gates.peak_factor", gates.peak_factor)
}

fn validate_recovery(config: &AdmissionConfig) -> Check {
    let retry = &config.retry_after;
    positive("retry_after.base_ms", retry.base_ms)?;
    if retry.cap_ms < retry.base_ms {
        return Err(AdmissionError::invalid(
            "retry_after.cap_ms",
            "must be >= retry_after.base_ms",
        ));
    }
    if !(retry.jitter_ratio.is_finite() && (0.0..=4.0).contains(&retry.jitter_ratio)) {
        return Err(AdmissionError::invalid(
            "retry_after.jitter_ratio",
            "must be within 0.0..=4.0",
        ));
    }

    let detector = &config.detector;
    positive("detector.window_ms", detector.window_ms)?;
    positive("detector.min_samples", detector.min_samples)?;
    for (field, value) in [
        (
            "detector.enter_filtered_share",
            detector.enter_filtered_share,
        ),
        ("detector.exit_filtered_share", detector.exit_filtered_share),
        ("detector.enter_refusal_rate", detector.enter_refusal_rate),
        ("detector.enter_error_rate", detector.enter_error_rate),
        ("detector.exit_error_rate", detector.exit_error_rate),
    ] {
        if !unit(value) {
            return Err(AdmissionError::invalid(field, "must be within 0.0..=1.0"));
        }
    }
    if detector.exit_filtered_share > detector.enter_filtered_share {
        return Err(AdmissionError::invalid(
            "detector.exit_filtered_share",
            "must not exceed detector.enter_filtered_share (hysteresis)",
        ));
    }
    if detector.exit_error_rate > detector.enter_error_rate {
        return Err(AdmissionError::invalid(
            "detector.exit_error_rate",
            "must not exceed detector.enter_error_rate (hysteresis)",
        ));
    }

    let ramp = &config.ramp;
    if ramp.levels.is_empty() {
        return Err(AdmissionError::invalid("ramp.levels", "must not be empty"));
    }
    for (i, level) in ramp.levels.iter().enumerate() {
        if !(level.is_finite() && *level > 0.0 && *level <= 1.0) {
            return Err(AdmissionError::invalid(
                format!("ramp.levels[{i}]"),
                "must be within (0.0, 1.0]",
            ));
        }
        if i > 0 && *level <= ramp.levels[i - 1] {
            return Err(AdmissionError::invalid(
                format!("ramp.levels[{i}]"),
                "levels must increase",
            ));
        }
    }
    if ramp.levels.last().is_some_and(|last| *last < 1.0) {
        return Err(AdmissionError::invalid(
            "ramp.levels",
            "the last level must be 1.0",
        ));
    }
    fraction_or_zero("ramp.rebound_error_rate", ramp.rebound_error_rate)?;
    positive("ramp.min_samples", ramp.min_samples)?;
    if !(ramp.retry_share.is_finite() && (0.0..1.0).contains(&ramp.retry_share)) {
        return Err(AdmissionError::invalid(
            "ramp.retry_share",
            "must be within 0.0..1.0",
        ));
    }
    Ok(())
}

fn validate_tenants(tenants: &[TenantConfig]) -> Check {
    let mut keys = HashSet::new();
    let mut callers = HashSet::new();
    for (i, tenant) in tenants.iter().enumerate() {
        let at = |field: &str| format!("tenants[{i}].{field}");
        if tenant.api_key.expose().trim().is_empty() {
            return Err(AdmissionError::invalid(at("api_key"), "must not be empty"));
        }
        if !keys.insert(tenant.api_key.expose()) {
            return Err(AdmissionError::invalid(at("api_key"), "duplicate api key"));
        }
        if tenant.caller.trim().is_empty() {
            return Err(AdmissionError::invalid(at("caller"), "must not be empty"));
        }
        if RESERVED_CALLERS.contains(&tenant.caller.as_str()) {
            return Err(AdmissionError::invalid(
                at("caller"),
                format!("`{}` is reserved", tenant.caller),
            ));
        }
        if !callers.insert(tenant.caller.as_str()) {
            return Err(AdmissionError::invalid(
                at("caller"),
                format!("duplicate caller `{}`", tenant.caller),
            ));
        }
        if tenant.default_priority().index() < tenant.max_priority.index() {
            return Err(AdmissionError::invalid(
                at("default_priority"),
                "must not be more urgent than max_priority",
            ));
        }
        limits(
            &at(""),
            tenant.tokens_per_day,
            tenant.tokens_per_month,
            tenant.tokens_per_minute,
        )?;
        in_flight(&at(""), tenant.peak_in_flight, tenant.max_in_flight)?;
        let mut purposes = HashSet::new();
        for (j, limits_of) in tenant.purposes.iter().enumerate() {
            let prefix = at(&format!("purposes[{j}]."));
            if matches!(limits_of.purpose, Purpose::Retry | Purpose::Probe) {
                return Err(AdmissionError::invalid(
                    format!("{prefix}purpose"),
                    "only business and warmup requests pass admission",
                ));
            }
            if !purposes.insert(limits_of.purpose) {
                return Err(AdmissionError::invalid(
                    format!("{prefix}purpose"),
                    "duplicate purpose",
                ));
            }
            limits(
                &prefix,
                limits_of.tokens_per_day,
                limits_of.tokens_per_month,
                limits_of.tokens_per_minute,
            )?;
            in_flight(&prefix, limits_of.peak_in_flight, limits_of.max_in_flight)?;
        }
    }
    Ok(())
}

fn limits(prefix: &str, day: Option<u64>, month: Option<u64>, minute: Option<u64>) -> Check {
    for (field, value) in [
        ("tokens_per_day", day),
        ("tokens_per_month", month),
        ("tokens_per_minute", minute),
    ] {
        if value == Some(0) {
            return Err(AdmissionError::invalid(
                format!("{prefix}{field}"),
                "must be > 0 when set",
            ));
        }
    }
    Ok(())
}

fn in_flight(prefix: &str, peak: Option<u32>, direct: Option<u32>) -> Check {
    if peak.is_some() && direct.is_some() {
        return Err(AdmissionError::invalid(
            format!("{prefix}max_in_flight"),
            "set either peak_in_flight or max_in_flight, not both",
        ));
    }
    for (field, value) in [("peak_in_flight", peak), ("max_in_flight", direct)] {
        if value == Some(0) {
            return Err(AdmissionError::invalid(
                format!("{prefix}{field}"),
                "must be > 0 when set",
            ));
        }
    }
    Ok(())
}

fn per_class<T: Copy>(
    field: &str,
    values: &PerClass<T>,
    ok: impl Fn(T) -> bool,
    requirement: &str,
) -> Check {
    for (class, value) in ["p0", "p1", "p2"].into_iter().zip(values.to_array()) {
        if !ok(value) {
            return Err(AdmissionError::invalid(
                format!("{field}.{class}"),
                format!("must be {requirement}"),
            ));
        }
    }
    Ok(())
}

fn unit(value: f64) -> bool {
    value.is_finite() && (0.0..=1.0).contains(&value)
}

fn positive(field: &str, value: u64) -> Check {
    if value == 0 {
        return Err(AdmissionError::invalid(field, "must be > 0"));
    }
    Ok(())
}

fn positive_f64(field: &str, value: f64) -> Check {
    if !(value.is_finite() && value > 0.0) {
        return Err(AdmissionError::invalid(field, "must be a number > 0"));
    }
    Ok(())
}

fn fraction(field: &str, value: f64) -> Check {
    if !(value.is_finite() && value > 0.0 && value <= 1.0) {
        return Err(AdmissionError::invalid(field, "must be within (0.0, 1.0]"));
    }
    Ok(())
}

fn fraction_or_zero(field: &str, value: f64) -> Check {
    if !unit(value) {
        return Err(AdmissionError::invalid(field, "must be within 0.0..=1.0"));
    }
    Ok(())
}

impl AdmissionConfig {
    /// Checks every value; the error names the field, e.g. `tenants[1].api_key`.
    pub fn validate(&self) -> Result<(), crate::AdmissionError> {
        validate(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(text: &str) -> String {
        let config: AdmissionConfig = toml::from_str(text).unwrap();
        match config.validate() {
            Err(AdmissionError::InvalidConfig { field, .. }) => field,
            other => panic!("expected an invalid-config error, got {other:?}"),
        }
    }

    #[test]
    fn empty_section_gives_the_documented_defaults() {
        let config: AdmissionConfig = toml::from_str("").unwrap();
        assert_eq!(config, AdmissionConfig::default());
        config.validate().unwrap();
        assert_eq!(config.max_concurrent, 256);
        assert_eq!(config.wfq.weights.to_array(), [5.0, 2.0, 1.0]);
        assert_eq!(config.ramp.levels, vec![0.3, 0.5, 0.8, 1.0]);
        assert_eq!(config.gates.concurrency_wait_ms, 300);
    }

    #[test]
    fn unknown_keys_are_rejected() {
        assert!(toml::from_str::<AdmissionConfig>("max_concurent = 3").is_err());
        assert!(
            toml::from_str::<AdmissionConfig>(
                "[wfq.weights]\np0 = 1.0\np1 = 1.0\np2 = 1.0\np3 = 1.0"
            )
            .is_err()
        );
        assert!(
            toml::from_str::<AdmissionConfig>(
                "[[tenants]]\napi_key = \"k\"\ncaller = \"a\"\nbudget = 3"
            )
            .is_err()
        );
    }

    #[test]
    fn invalid_values_name_their_field() {
        assert_eq!(field_of("max_concurrent = 0"), "max_concurrent");
        assert_eq!(
            field_of("[wfq.weights]\np0 = 5.0\np1 = 0.0\np2 = 1.0"),
            "wfq.weights.p1"
        );
        assert_eq!(
            field_of("[wfq.min_shares]\np0 = 0.9\np1 = 0.15\np2 = 0.05"),
            "wfq.min_shares"
        );
        assert_eq!(field_of("[gates]\nsoft_limit = 0.99"), "gates.soft_limit");
        assert_eq!(
            field_of("[ramp]\nlevels = [0.5, 0.3, 1.0]"),
            "ramp.levels[1]"
        );
        assert_eq!(field_of("[ramp]\nlevels = [0.3, 0.5]"), "ramp.levels");
        assert_eq!(
            field_of("[detector]\nexit_filtered_share = 0.9"),
            "detector.exit_filtered_share"
        );
        assert_eq!(field_of("[retry_after]\ncap_ms = 10"), "retry_after.cap_ms");
        assert_eq!(
            field_of("max_concurrent = 4\n[adaptive]\nenabled = true\nmin_limit = 5"),
            "adaptive.min_limit"
        );
        assert_eq!(
            field_of("[adaptive]\nrtt_tolerance = -1.0"),
            "adaptive.rtt_tolerance"
        );
    }

    #[test]
    fn tenant_errors_name_the_tenant() {
        let two = "[[tenants]]\napi_key = \"k1\"\ncaller = \"a\"\n[[tenants]]\napi_key = \"k1\"\ncaller = \"b\"\n";
        assert_eq!(field_of(two), "tenants[1].api_key");
        let dup_caller = "[[tenants]]\napi_key = \"k1\"\ncaller = \"a\"\n[[tenants]]\napi_key = \"k2\"\ncaller = \"a\"\n";
        assert_eq!(field_of(dup_caller), "tenants[1].caller");
        assert_eq!(
            field_of("[[tenants]]\napi_key = \"k\"\ncaller = \"other\""),
            "tenants[0].caller"
        );
        assert_eq!(
            field_of("[[tenants]]\ncaller = \"a\""),
            "tenants[0].api_key"
        );
        let both =
            "[[tenants]]\napi_key = \"k\"\ncaller = \"a\"\npeak_in_flight = 3\nmax_in_flight = 2";
        assert_eq!(field_of(both), "tenants[0].max_in_flight");
        let eager = "[[tenants]]\napi_key = \"k\"\ncaller = \"a\"\nmax_priority = \"P1\"\ndefault_priority = \"P0\"";
        assert_eq!(field_of(eager), "tenants[0].default_priority");
        let retry = "[[tenants]]\napi_key = \"k\"\ncaller = \"a\"\n[[tenants.purposes]]\npurpose = \"retry\"";
        assert_eq!(field_of(retry), "tenants[0].purposes[0].purpose");
        let zero = "[[tenants]]\napi_key = \"k\"\ncaller = \"a\"\n[[tenants.purposes]]\npurpose = \"warmup\"\ntokens_per_day = 0";
        assert_eq!(field_of(zero), "tenants[0].purposes[0].tokens_per_day");
    }
}
