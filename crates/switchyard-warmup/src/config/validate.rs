//! Validation of `[warmup]`: every error names its field.

use std::collections::HashSet;

use super::{ResourceConfig, ResourceKind, Tier, WarmupConfig, WarmupRampConfig};
use crate::error::{ConfigError, invalid};

/// Below this the budget is too small to keep even L0 warm.
pub(crate) const MIN_SAFETY: f64 = 0.5;
const RECOMMENDED_SAFETY: (f64, f64) = (0.7, 0.85);

fn share(field: &str, value: f64, open_low: bool) -> Result<(), ConfigError> {
    let ok = value.is_finite() && value <= 1.0 && if open_low { value > 0.0 } else { value >= 0.0 };
    if ok {
        Ok(())
    } else {
        let range = if open_low { "(0, 1]" } else { "[0, 1]" };
        Err(invalid(
            field,
            format!("must be within {range}, got {value}"),
        ))
    }
}

fn positive(field: &str, value: u64) -> Result<(), ConfigError> {
    if value == 0 {
        Err(invalid(field, "must be > 0"))
    } else {
        Ok(())
    }
}

// The methods live here, beside the rules they apply, so the config types themselves do
// not depend on their validation.
impl WarmupConfig {
    /// Checks every value; the error names the field, e.g. `resources[1].target.model`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        validate(self)
    }

    /// Values that load but sit outside the range the seeds recommend (logged at load).
    pub fn warnings(&self) -> Vec<String> {
        warnings(self)
    }
}

fn validate(config: &WarmupConfig) -> Result<(), ConfigError> {
    if config.caller.trim().is_empty() {
        return Err(invalid("warmup.caller", "must not be empty"));
    }
    positive("warmup.hit_window_secs", config.hit_window_secs)?;
    positive("warmup.cold_after_secs", config.cold_after_secs)?;
    positive("warmup.failure_retry_secs", config.failure_retry_secs)?;
    share("warmup.demotion_hit_rate", config.demotion_hit_rate, false)?;
    positive("warmup.demotion_min_samples", config.demotion_min_samples)?;
    let budget = &config.budget;
    positive("warmup.budget.total_quota", budget.total_quota)?;
    if budget.period_secs < 60 {
        return Err(invalid("warmup.budget.period_secs", "must be >= 60"));
    }
    if !(budget.business_peak_share.is_finite() && (0.0..1.0).contains(&budget.business_peak_share))
    {
        return Err(invalid(
            "warmup.budget.business_peak_share",
            format!("must be within [0, 1), got {}", budget.business_peak_share),
        ));
    }
    if !(budget.safety.is_finite() && (MIN_SAFETY..=1.0).contains(&budget.safety)) {
        return Err(invalid(
            "warmup.budget.safety",
            format!(
                "must be within [{MIN_SAFETY}, 1] (0.7–0.85 recommended; below {MIN_SAFETY} the \
                 budget cannot keep even L0 warm), got {}",
                budget.safety
            ),
        ));
    }
    positive(
        "warmup.budget.mean_cost_min_samples",
        budget.mean_cost_min_samples,
    )?;
    if !(budget.cascade_factor.is_finite() && budget.cascade_factor >= 1.0) {
        return Err(invalid(
            "warmup.budget.cascade_factor",
            "must be a finite number >= 1.0",
        ));
    }
    validate_ramp(&config.ramp)?;
    let mut names = HashSet::new();
    for (index, resource) in config.resources.iter().enumerate() {
        let at = |field: &str| format!("warmup.resources[{index}].{field}");
        if !names.insert(resource.name.as_str()) {
            return Err(invalid(
                at("name"),
                format!("`{}` is used twice", resource.name),
            ));
        }
        validate_resource(resource, &at)?;
    }
    Ok(())
}

fn validate_ramp(ramp: &WarmupRampConfig) -> Result<(), ConfigError> {
    if ramp.steps.is_empty() {
        return Err(invalid("warmup.ramp.steps", "must name at least one step"));
    }
    let mut previous = 0.0;
    for (index, &step) in ramp.steps.iter().enumerate() {
        share(&format!("warmup.ramp.steps[{index}]"), step, true)?;
        if step <= previous {
            return Err(invalid("warmup.ramp.steps", "must be strictly increasing"));
        }
        previous = step;
    }
    if previous != 1.0 {
        return Err(invalid("warmup.ramp.steps", "the last step must be 1.0"));
    }
    if ramp.windows_secs.len() != ramp.steps.len() {
        return Err(invalid(
            "warmup.ramp.windows_secs",
            format!("needs one window per step ({})", ramp.steps.len()),
        ));
    }
    for (index, &window) in ramp.windows_secs.iter().enumerate() {
        positive(&format!("warmup.ramp.windows_secs[{index}]"), window)?;
    }
    positive(
        "warmup.ramp.target_concurrency",
        u64::from(ramp.target_concurrency),
    )?;
    positive("warmup.ramp.min_warm_load", u64::from(ramp.min_warm_load))?;
    if ramp.min_warm_load > ramp.target_concurrency {
        return Err(invalid(
            "warmup.ramp.min_warm_load",
            "must be <= target_concurrency",
        ));
    }
    share(
        "warmup.ramp.advance_max_error_rate",
        ramp.advance_max_error_rate,
        false,
    )?;
    share(
        "warmup.ramp.backoff_error_rate",
        ramp.backoff_error_rate,
        false,
    )?;
    if ramp.backoff_error_rate < ramp.advance_max_error_rate {
        return Err(invalid(
            "warmup.ramp.backoff_error_rate",
            "must be >= advance_max_error_rate",
        ));
    }
    if !(ramp.advance_max_p95_ratio.is_finite() && ramp.advance_max_p95_ratio >= 1.0) {
        return Err(invalid(
            "warmup.ramp.advance_max_p95_ratio",
            "must be >= 1.0",
        ));
    }
    positive("warmup.ramp.steady_p95_ms", ramp.steady_p95_ms)?;
    positive("warmup.ramp.steady_window_secs", ramp.steady_window_secs)?;
    positive("warmup.ramp.steady_min_samples", ramp.steady_min_samples)?;
    positive(
        "warmup.ramp.max_consecutive_backoffs",
        u64::from(ramp.max_consecutive_backoffs),
    )
}

fn validate_resource(
    resource: &ResourceConfig,
    at: &dyn Fn(&str) -> String,
) -> Result<(), ConfigError> {
    if resource.name.trim().is_empty() {
        return Err(invalid(at("name"), "must not be empty"));
    }
    let target = &resource.target;
    let require = |value: &Option<String>, field: &str| match value.as_deref() {
        Some(text) if !text.is_empty() => Ok(()),
        _ => Err(invalid(
            at(&format!("target.{field}")),
            format!("is required for a {} warmup", resource.kind.as_str()),
        )),
    };
    match resource.kind {
        ResourceKind::Connection => require(&target.worker, "worker")?,
        ResourceKind::Instance => require(&target.model, "model")?,
        ResourceKind::Cache => {
            require(&target.model, "model")?;
            require(&target.prompt, "prompt")?;
        }
        ResourceKind::Context => require(&target.snapshot, "snapshot")?,
    }
    if matches!(resource.kind, ResourceKind::Instance | ResourceKind::Cache)
        && resource.estimated_cost_tokens == 0
    {
        return Err(invalid(
            at("estimated_cost_tokens"),
            "must be > 0 for warmups that run a completion",
        ));
    }
    positive(&at("interval_secs"), resource.interval_secs)?;
    match resource.tier {
        Tier::L1 if resource.peak_windows.is_empty() => Err(invalid(
            at("peak_windows"),
            "an L1 resource needs at least one peak window",
        )),
        Tier::L0 | Tier::L2 if !resource.peak_windows.is_empty() => Err(invalid(
            at("peak_windows"),
            "only L1 resources have peak windows",
        )),
        _ => Ok(()),
    }
}

fn warnings(config: &WarmupConfig) -> Vec<String> {
    let safety = config.budget.safety;
    let (low, high) = RECOMMENDED_SAFETY;
    let mut out = Vec::new();
    if safety < low || safety > high {
        out.push(format!(
            "warmup.budget.safety = {safety} is outside the recommended {low}–{high}"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TargetConfig;

    fn instance(name: &str, tier: Tier) -> ResourceConfig {
        ResourceConfig {
            target: TargetConfig {
                model: Some("m".into()),
                ..Default::default()
            },
            estimated_cost_tokens: 100,
            ..ResourceConfig::new(name, ResourceKind::Instance, tier)
        }
    }

    fn field_of(config: &WarmupConfig) -> String {
        config.validate().unwrap_err().field
    }

    #[test]
    fn defaults_are_valid_and_safety_below_half_is_refused() {
        assert_eq!(WarmupConfig::default().validate(), Ok(()));
        let mut config = WarmupConfig::default();
        config.budget.safety = 0.45;
        assert_eq!(field_of(&config), "warmup.budget.safety");
        config.budget.safety = 0.6;
        assert_eq!(config.validate(), Ok(()));
        assert_eq!(config.warnings().len(), 1, "0.6 loads, with a warning");
    }

    #[test]
    fn resource_errors_name_the_resource_field() {
        let mut config = WarmupConfig {
            resources: vec![instance("a", Tier::L0), instance("a", Tier::L0)],
            ..Default::default()
        };
        assert_eq!(field_of(&config), "warmup.resources[1].name");
        config.resources = vec![instance("a", Tier::L1)];
        assert_eq!(field_of(&config), "warmup.resources[0].peak_windows");
        let mut cache = instance("c", Tier::L2);
        cache.kind = ResourceKind::Cache;
        config.resources = vec![cache];
        assert_eq!(field_of(&config), "warmup.resources[0].target.prompt");
        config.resources = vec![ResourceConfig::new("w", ResourceKind::Connection, Tier::L0)];
        assert_eq!(field_of(&config), "warmup.resources[0].target.worker");
    }

    #[test]
    fn ramp_shape_is_checked() {
        let mut config = WarmupConfig::default();
        config.ramp.steps = vec![0.05, 0.5, 0.4, 1.0];
        assert_eq!(field_of(&config), "warmup.ramp.steps");
        let mut config = WarmupConfig::default();
        config.ramp.windows_secs.pop();
        assert_eq!(field_of(&config), "warmup.ramp.windows_secs");
    }
}
