//! `[warmup]` and `[degradation]`: the crate's own checks (which name their fields), plus
//! what only the gateway knows: which context snapshots it can refresh.

use switchyard_warmup::ResourceKind;

use super::Config;
use super::error::ConfigError;

/// Context snapshots a warmup can refresh: `models` re-reads every worker's `/v1/models`.
pub const CONTEXT_SNAPSHOTS: &[&str] = &["models"];

pub(super) fn validate(config: &Config) -> Result<(), ConfigError> {
    let crate_error = |e: switchyard_warmup::ConfigError| ConfigError::invalid(e.field, e.message);
    config.warmup.validate().map_err(crate_error)?;
    config.degradation.validate().map_err(crate_error)?;
    for (index, resource) in config.warmup.resources.iter().enumerate() {
        if resource.kind != ResourceKind::Context {
            continue;
        }
        let snapshot = resource.target.snapshot.as_deref().unwrap_or_default();
        if !CONTEXT_SNAPSHOTS.contains(&snapshot) {
            return Err(ConfigError::invalid(
                format!("warmup.resources[{index}].target.snapshot"),
                format!(
                    "unknown snapshot `{snapshot}` (this gateway refreshes: {})",
                    CONTEXT_SNAPSHOTS.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::config::validate::tests::error_path;

    #[test]
    fn warmup_and_degradation_errors_name_their_fields() {
        let two = r#"
            [[warmup.resources]]
            name = "a"
            kind = "instance"
            tier = "L0"
            estimated_cost_tokens = 10
            target = { model = "m" }
            [[warmup.resources]]
            name = "b"
            kind = "instance"
            tier = "L0"
            estimated_cost_tokens = 10
            target = { model = "" }
        "#;
        assert_eq!(error_path(two), "warmup.resources[1].target.model");
        assert_eq!(
            error_path("[warmup.budget]\nsafety = 0.4\n"),
            "warmup.budget.safety"
        );
        assert_eq!(error_path("[warmup]\ncallr = \"x\"\n"), "warmup.callr");
        assert_eq!(
            error_path("[[degradation.chains]]\nalias = \"a\"\nmodels = []\n"),
            "degradation.chains[0].models"
        );
        let context = r#"
            [[warmup.resources]]
            name = "routes"
            kind = "context"
            tier = "L0"
            target = { snapshot = "routing_table" }
        "#;
        assert_eq!(error_path(context), "warmup.resources[0].target.snapshot");
        let models = context.replace("routing_table", "models");
        assert!(Config::parse(&models).is_ok());
    }
}
