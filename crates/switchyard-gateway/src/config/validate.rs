//! Whole-config validation: every section's checks, each error naming its field.

use std::collections::HashSet;
use switchyard_router::RouterError;

use super::Config;
use super::error::{ConfigError, check_admin_key_strength};

pub(super) fn validate(config: &Config) -> Result<(), ConfigError> {
    let positive = [
        ("server.max_body_bytes", config.server.max_body_bytes as u64),
        (
            "upstream.connect_timeout_ms",
            config.upstream.connect_timeout_ms,
        ),
        (
            "upstream.request_timeout_ms",
            config.upstream.request_timeout_ms,
        ),
        (
            "upstream.pool_idle_timeout_ms",
            config.upstream.pool_idle_timeout_ms,
        ),
        (
            "upstream.stream_idle_timeout_ms",
            config.upstream.stream_idle_timeout_ms,
        ),
    ];
    for (path, value) in positive {
        if value == 0 {
            return Err(ConfigError::invalid(path, "must be greater than 0"));
        }
    }
    super::limits::validate(&config.limits, &config.listener)?;
    if config.server.host.trim().is_empty() {
        return Err(ConfigError::invalid("server.host", "must not be empty"));
    }
    config.routing.validate().map_err(|e| match &e {
        RouterError::UnknownPolicy { .. } => ConfigError::invalid("routing.policy", e.to_string()),
        RouterError::InvalidConfig { field, .. } => {
            ConfigError::invalid(format!("routing.{field}"), e.to_string())
        }
    })?;
    config
        .retry
        .validate()
        .map_err(|(path, message)| ConfigError::invalid(path, message))?;
    config
        .upstream
        .first_byte
        .validate()
        .map_err(|(path, message)| ConfigError::invalid(path, message))?;
    config.admission.validate().map_err(|e| match e.field() {
        Some(field) => ConfigError::invalid(format!("admission.{field}"), e.to_string()),
        None => ConfigError::invalid("admission", e.to_string()),
    })?;
    config
        .health
        .validate()
        .map_err(|e| ConfigError::invalid(format!("health.{}", e.field), e.reason.clone()))?;
    super::warmup::validate(config)?;
    config
        .cluster
        .validate()
        .map_err(|(path, message)| ConfigError::invalid(path, message))?;
    if !config.admin.api_key.is_empty() {
        check_admin_key_strength("admin.api_key", config.admin.api_key.expose())?;
    }
    for (i, key) in config.admin.keys.iter().enumerate() {
        if key.name.is_empty() || key.name.len() > 64 {
            return Err(ConfigError::invalid(
                format!("admin.keys[{i}].name"),
                "must be 1-64 characters",
            ));
        }
        check_admin_key_strength(&format!("admin.keys[{i}].key"), key.key.expose())?;
        // One key, one principal: otherwise its holder's name and role would be ambiguous.
        if let Some(j) = config.admin.keys[..i].iter().position(|k| k.key == key.key) {
            return Err(ConfigError::invalid(
                format!("admin.keys[{i}].key"),
                format!("is the same key as admin.keys[{j}]; every principal needs its own"),
            ));
        }
    }
    config
        .discovery
        .validate()
        .map_err(|e| ConfigError::invalid(format!("discovery.{}", e.field), e.message))?;
    let mut names = HashSet::new();
    for (i, worker) in config.workers.iter().enumerate() {
        worker
            .validate()
            .map_err(|e| ConfigError::invalid(format!("workers[{i}]"), e.to_string()))?;
        if !names.insert(worker.name.as_str()) {
            return Err(ConfigError::invalid(
                format!("workers[{i}].name"),
                format!("duplicate worker name `{}`", worker.name),
            ));
        }
        if worker.url.starts_with("https://") && config.upstream.tls_ca_path.is_empty() {
            return Err(ConfigError::invalid(
                format!("workers[{i}].url"),
                "an https:// worker needs upstream.tls_ca_path (the CA its certificate chains to)",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The field path an invalid config's error names.
    pub(in crate::config) fn error_path(text: &str) -> String {
        match Config::parse(text) {
            Err(ConfigError::Invalid { path, .. }) => path,
            other => panic!("expected an invalid-config error, got {other:?}"),
        }
    }

    #[test]
    fn empty_file_gives_documented_defaults() {
        let config = Config::parse("").unwrap();
        assert_eq!(config, Config::default());
        assert_eq!(config.server.port, 8080);
        assert_eq!(config.server.max_body_bytes, 32 * 1024 * 1024);
        assert_eq!(config.routing.policy, "cache_aware");
    }

    #[test]
    fn unknown_keys_are_rejected_with_their_path() {
        assert_eq!(error_path("[server]\nprot = 1\n"), "server.prot");
        assert_eq!(
            error_path("[routing.cache_aware]\nfoo = 1\n"),
            "routing.cache_aware.foo"
        );
        assert_eq!(error_path("bogus = 1\n"), "bogus");
    }

    #[test]
    fn wrong_types_name_the_field() {
        assert_eq!(error_path("[server]\nport = \"eighty\"\n"), "server.port");
        assert_eq!(error_path("[server]\nport = 70000\n"), "server.port");
    }

    #[test]
    fn invalid_values_name_the_field() {
        assert_eq!(
            error_path("[routing]\npolicy = \"random\"\n"),
            "routing.policy"
        );
        assert_eq!(
            error_path("[routing.consistent_hash]\nvnodes_per_worker = 0\n"),
            "routing.consistent_hash.vnodes_per_worker"
        );
        assert_eq!(
            error_path("[upstream]\nrequest_timeout_ms = 0\n"),
            "upstream.request_timeout_ms"
        );
        let dup = "[[workers]]\nname = \"a\"\nurl = \"http://h:1\"\n[[workers]]\nname = \"a\"\nurl = \"http://h:2\"\n";
        assert_eq!(error_path(dup), "workers[1].name");
        assert_eq!(
            error_path("[[workers]]\nname = \"a\"\nurl = \"ftp://h\"\n"),
            "workers[0]"
        );
        assert_eq!(
            error_path("[cluster]\naudit_retention_entries = 0\n"),
            "cluster.audit_retention_entries"
        );
    }

    #[test]
    fn short_secrets_are_refused_naming_the_field() {
        assert_eq!(
            error_path("[admin]\napi_key = \"short\"\n"),
            "admin.api_key"
        );
        assert_eq!(
            error_path("[cluster]\nsecret = \"short\"\n"),
            "cluster.secret"
        );
        assert_eq!(
            error_path("[listener]\nmetrics_token = \"short\"\n"),
            "listener.metrics_token"
        );
        assert_eq!(
            error_path("[listener]\ntls_cert_path = \"/c.pem\"\n"),
            "listener.tls_key_path"
        );
        let strong =
            "[admin]\napi_key = \"0123456789abcdef\"\n[cluster]\nsecret = \"0123456789abcdef\"\n";
        assert!(Config::parse(strong).is_ok());
    }

    #[test]
    fn the_shipped_reference_config_is_valid_and_equals_the_defaults() {
        let text = include_str!("../../../../config/switchyard.toml");
        let config = Config::parse(text).unwrap();
        assert_eq!(config, Config::default());
    }
}
