//! The few fields of a Kubernetes Pod that discovery needs, read from its JSON.

use serde_json::Value;

use super::config::DiscoveryConfig;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodView {
    pub uid: String,
    pub name: String,
    pub resource_version: String,
    pub ip: Option<String>,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// A deletion timestamp is set: the pod is going away, whatever its readiness says.
    pub terminating: bool,
    pub labels: Vec<(String, String)>,
    pub annotations: Vec<(String, String)>,
}

fn string_map(value: &Value) -> Vec<(String, String)> {
    value
        .as_object()
        .map(|map| {
            map.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

impl PodView {
    /// `None` when the object lacks a uid or name (not a pod worth tracking).
    pub fn from_json(object: &Value) -> Option<Self> {
        let metadata = &object["metadata"];
        let uid = metadata["uid"].as_str().filter(|s| !s.is_empty())?;
        let name = metadata["name"].as_str().filter(|s| !s.is_empty())?;
        let status = &object["status"];
        let ready = status["conditions"].as_array().is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
        Some(Self {
            uid: uid.to_string(),
            name: name.to_string(),
            resource_version: metadata["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            ip: status["podIP"]
                .as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            ready,
            terminating: !metadata["deletionTimestamp"].is_null(),
            labels: string_map(&metadata["labels"]),
            annotations: string_map(&metadata["annotations"]),
        })
    }

    fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Ready, not terminating, with an address.
    pub fn routable(&self) -> bool {
        self.ready && !self.terminating && self.ip.is_some()
    }

    /// `http://ip:port/` with the per-pod port annotation honoured.
    pub fn url(&self, config: &DiscoveryConfig) -> Option<String> {
        let ip = self.ip.as_deref()?;
        let port = self
            .annotation(&config.port_annotation)
            .and_then(|p| p.trim().parse::<u16>().ok())
            .filter(|p| *p != 0)
            .unwrap_or(config.port);
        let host = if ip.contains(':') {
            format!("[{ip}]")
        } else {
            ip.to_string()
        };
        Some(format!("http://{host}:{port}"))
    }

    /// Models the pod declares in its annotation or label, if any.
    pub fn declared_models(&self, config: &DiscoveryConfig) -> Option<Vec<String>> {
        let listed = self
            .annotation(&config.model_annotation)
            .or_else(|| self.label(&config.model_label))?;
        let models: Vec<String> = listed
            .split(',')
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(str::to_string)
            .collect();
        (!models.is_empty()).then_some(models)
    }

    /// A registry name: the pod name when it fits the worker-name rules, else a shortened
    /// form that stays unique by the uid's tail.
    pub fn worker_name(&self) -> String {
        let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
        if self.name.len() <= 64 && self.name.chars().all(valid) {
            return self.name.clone();
        }
        let cleaned: String = self
            .name
            .chars()
            .map(|c| if valid(c) { c } else { '-' })
            .take(48)
            .collect();
        let tail: String = self
            .uid
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(12)
            .collect();
        format!("{cleaned}-{tail}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(ready: &str, deleting: bool) -> Value {
        json!({
            "metadata": {
                "uid": "u-1", "name": "vllm-0", "resourceVersion": "17",
                "deletionTimestamp": if deleting { json!("2026-01-01T00:00:00Z") } else { Value::Null },
                "labels": {"switchyard.io/model": "llama"},
                "annotations": {"switchyard.io/models": "meta/llama-3, qwen", "switchyard.io/port": "9000"}
            },
            "status": {"podIP": "10.0.0.7", "conditions": [{"type": "Ready", "status": ready}]}
        })
    }

    #[test]
    fn readiness_termination_address_and_models_are_read() {
        let config = DiscoveryConfig::default();
        let view = PodView::from_json(&pod("True", false)).expect("pod");
        assert!(view.routable());
        assert_eq!(view.url(&config).as_deref(), Some("http://10.0.0.7:9000"));
        assert_eq!(
            view.declared_models(&config),
            Some(vec!["meta/llama-3".to_string(), "qwen".to_string()]),
            "the annotation wins over the label"
        );
        assert!(
            !PodView::from_json(&pod("False", false))
                .expect("pod")
                .routable()
        );
        assert!(
            !PodView::from_json(&pod("True", true))
                .expect("pod")
                .routable()
        );
        assert!(PodView::from_json(&json!({"metadata": {"name": "x"}})).is_none());
    }

    #[test]
    fn long_names_are_shortened_but_stay_distinct() {
        let mut view = PodView::from_json(&pod("True", false)).expect("pod");
        view.name = "x".repeat(80);
        view.uid = "0f3c9a1b-2222-4444-8888-abcdefabcdef".into();
        let name = view.worker_name();
        assert!(name.len() <= 64, "{name}");
        assert!(name.ends_with("0f3c9a1b2222"), "{name}");
    }
}
