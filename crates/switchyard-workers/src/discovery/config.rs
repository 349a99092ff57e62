//! What Kubernetes discovery watches and how it reaches the API server.

use serde::{Deserialize, Serialize};

/// `[discovery]` in the gateway config. Off unless `enabled`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DiscoveryConfig {
    pub enabled: bool,
    /// Base URL of the Kubernetes API: the API server itself over HTTPS (in a pod
    /// `https://kubernetes.default.svc`, with `ca_file` and `bearer_file` from the service
    /// account), or plain HTTP to a `kubectl proxy` sidecar (`http://127.0.0.1:8001`, the
    /// default) or another authenticating proxy.
    pub api_server: String,
    /// PEM bundle the API server's certificate is verified against (https only; read at
    /// start); empty = the service account's `ca.crt`.
    pub ca_file: String,
    /// Namespace whose pods are watched; empty = this pod's own namespace (from the service
    /// account's namespace file), else `default`.
    pub namespace: String,
    /// Kubernetes label selector, e.g. `app.kubernetes.io/component=inference-worker`.
    pub label_selector: String,
    /// Port of the worker's OpenAI API on each pod; the pod annotation named by
    /// `port_annotation` overrides it per pod.
    pub port: u16,
    pub port_annotation: String,
    /// Models come from this annotation (comma-separated), else this label, else the pod's
    /// `GET /v1/models`. A pod is never routed to before its models are known.
    pub model_annotation: String,
    pub model_label: String,
    /// Bearer token file sent on every API call (re-read each time, so rotation works);
    /// empty sends none.
    pub bearer_file: String,
    /// Full re-list this often, whatever the watch says.
    pub resync_interval_ms: u64,
    /// Pods whose models could not be learned yet, or whose name is still taken by a
    /// draining predecessor, are retried this often.
    pub retry_interval_ms: u64,
    /// Each watch request asks the server to end it after this long (then it is renewed).
    pub watch_timeout_secs: u64,
    /// Health path of discovered workers; empty = the health config's default.
    pub health_path: String,
}

impl Default for DiscoveryConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            api_server: "http://127.0.0.1:8001".into(),
            ca_file: String::new(),
            namespace: String::new(),
            label_selector: "app.kubernetes.io/component=inference-worker".into(),
            port: 8000,
            port_annotation: "switchyard.io/port".into(),
            model_annotation: "switchyard.io/models".into(),
            model_label: "switchyard.io/model".into(),
            bearer_file: String::new(),
            resync_interval_ms: 300_000,
            retry_interval_ms: 2_000,
            watch_timeout_secs: 290,
            health_path: String::new(),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("discovery.{field}: {message}")]
pub struct DiscoveryConfigError {
    pub field: &'static str,
    pub message: String,
}

/// Where Kubernetes mounts the pod's namespace.
const NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
/// Where Kubernetes mounts the cluster CA that signed the API server's certificate.
pub const SERVICE_ACCOUNT_CA_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";

impl DiscoveryConfig {
    /// The namespace to watch: the configured one, else this pod's, else `default`.
    pub fn effective_namespace(&self) -> String {
        if !self.namespace.is_empty() {
            return self.namespace.clone();
        }
        std::fs::read_to_string(NAMESPACE_FILE)
            .ok()
            .map(|ns| ns.trim().to_string())
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| "default".to_string())
    }

    /// The CA bundle for an https API server: the configured one, else the service account's.
    pub fn effective_ca_file(&self) -> String {
        if self.ca_file.is_empty() {
            SERVICE_ACCOUNT_CA_FILE.to_string()
        } else {
            self.ca_file.clone()
        }
    }

    pub fn validate(&self) -> Result<(), DiscoveryConfigError> {
        let fail = |field, message: &str| {
            Err(DiscoveryConfigError {
                field,
                message: message.to_string(),
            })
        };
        if !self.enabled {
            return Ok(());
        }
        match self.api_server.parse::<http::Uri>() {
            Ok(uri)
                if matches!(uri.scheme_str(), Some("http" | "https"))
                    && uri.authority().is_some()
                    && uri.path().trim_end_matches('/').is_empty() => {}
            _ => {
                return fail(
                    "api_server",
                    "must be an https://host[:port] or http://host:port URL without a path",
                );
            }
        }
        if self.label_selector.is_empty() {
            return fail(
                "label_selector",
                "must not be empty (it would route to every pod of the namespace)",
            );
        }
        if self.port == 0 {
            return fail("port", "must be a TCP port (1-65535)");
        }
        if self.resync_interval_ms < 1_000 {
            return fail("resync_interval_ms", "must be at least 1000");
        }
        if self.retry_interval_ms == 0 {
            return fail("retry_interval_ms", "must be positive");
        }
        if self.watch_timeout_secs == 0 {
            return fail("watch_timeout_secs", "must be positive");
        }
        if !self.health_path.is_empty() && !self.health_path.starts_with('/') {
            return fail("health_path", "must start with `/`");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_config_is_valid_and_enabled_one_is_checked() {
        assert_eq!(DiscoveryConfig::default().validate(), Ok(()));
        let mut config = DiscoveryConfig {
            enabled: true,
            ..DiscoveryConfig::default()
        };
        assert_eq!(config.validate(), Ok(()));
        config.api_server = "https://kubernetes.default.svc".into();
        assert_eq!(config.validate(), Ok(()));
        assert_eq!(config.effective_ca_file(), SERVICE_ACCOUNT_CA_FILE);
        for bad in ["kubernetes.default.svc", "ftp://x", "https://x/api"] {
            config.api_server = bad.into();
            assert_eq!(
                config.validate().map_err(|e| e.field),
                Err("api_server"),
                "{bad}"
            );
        }
        config.api_server = "http://127.0.0.1:8001".into();
        config.label_selector.clear();
        assert_eq!(
            config.validate().map_err(|e| e.field),
            Err("label_selector")
        );
    }
}
