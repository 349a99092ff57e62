use http::Uri;
use serde::{Deserialize, Serialize};

use crate::engine::EngineKind;

/// What an operator says about a worker: its name, where it listens, optionally which models
/// it serves (when absent the worker actor discovers them from `GET /v1/models`) and which
/// path answers health checks (when absent, its engine's health path, else `health.path` of the
/// health config, `/health`), and which engine it runs (which decides the health path and the
/// `/metrics` names read; absent keeps the generic behaviour).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerSpec {
    pub name: String,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineKind>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpecError {
    #[error("worker url `{0}` is not a valid http URL (expected http://host:port)")]
    BadUrl(String),
    #[error("worker url `{0}` must use http:// or https://")]
    NotHttp(String),
    #[error("worker name must be 1-64 characters of [A-Za-z0-9._:-], got `{0}`")]
    BadName(String),
    #[error("worker health_path must be a path starting with `/`, got `{0}`")]
    BadHealthPath(String),
}

impl WorkerSpec {
    /// Parses the `--worker-url` form: `URL` (named `host:port`) or `name=URL`.
    pub fn parse_flag(value: &str) -> Result<Self, SpecError> {
        let (name, url) = match value.split_once('=') {
            Some((name, url)) if !name.contains("://") => (Some(name.to_string()), url.to_string()),
            _ => (None, value.to_string()),
        };
        let authority = authority_of(&url)?;
        let spec = WorkerSpec {
            name: name.unwrap_or(authority),
            url,
            models: None,
            health_path: None,
            engine: None,
        };
        spec.validate()?;
        Ok(spec)
    }

    pub fn validate(&self) -> Result<(), SpecError> {
        authority_of(&self.url)?;
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
        if !name_ok {
            return Err(SpecError::BadName(self.name.clone()));
        }
        if let Some(path) = &self.health_path
            && (!path.starts_with('/') || path.parse::<http::uri::PathAndQuery>().is_err())
        {
            return Err(SpecError::BadHealthPath(path.clone()));
        }
        Ok(())
    }

    /// The URL without a trailing slash, so paths can be appended.
    pub fn base_url(&self) -> &str {
        self.url.trim_end_matches('/')
    }
}

fn authority_of(url: &str) -> Result<String, SpecError> {
    let uri: Uri = url
        .parse()
        .map_err(|_| SpecError::BadUrl(url.to_string()))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(_) => return Err(SpecError::NotHttp(url.to_string())),
        None => return Err(SpecError::BadUrl(url.to_string())),
    }
    uri.authority()
        .map(|a| a.to_string())
        .ok_or_else(|| SpecError::BadUrl(url.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_url_is_named_by_host_and_port() {
        let spec = WorkerSpec::parse_flag("http://127.0.0.1:9001").unwrap();
        assert_eq!(spec.name, "127.0.0.1:9001");
        assert_eq!(spec.base_url(), "http://127.0.0.1:9001");
    }

    #[test]
    fn named_url_keeps_the_name() {
        let spec = WorkerSpec::parse_flag("gpu-a=http://10.0.0.1:8000/").unwrap();
        assert_eq!(spec.name, "gpu-a");
        assert_eq!(spec.base_url(), "http://10.0.0.1:8000");
    }

    #[test]
    fn rejects_bad_urls_and_names() {
        assert!(matches!(
            WorkerSpec::parse_flag("not a url"),
            Err(SpecError::BadUrl(_))
        ));
        assert!(matches!(
            WorkerSpec::parse_flag("ftp://x:1"),
            Err(SpecError::NotHttp(_))
        ));
        assert!(WorkerSpec::parse_flag("https://x:1").is_ok());
        assert!(matches!(
            WorkerSpec::parse_flag("bad name=http://x:1"),
            Err(SpecError::BadName(_))
        ));
        let mut spec = WorkerSpec::parse_flag("http://x:1").unwrap();
        spec.health_path = Some("v1/models".into());
        assert!(matches!(spec.validate(), Err(SpecError::BadHealthPath(_))));
        spec.health_path = Some("/v1/models".into());
        assert!(spec.validate().is_ok());
    }

    #[test]
    fn health_path_is_optional_in_serde() {
        let spec: WorkerSpec =
            serde_json::from_str(r#"{"name":"a","url":"http://x:1","health_path":"/v1/models"}"#)
                .unwrap();
        assert_eq!(spec.health_path.as_deref(), Some("/v1/models"));
        let json = serde_json::to_string(&WorkerSpec::parse_flag("http://x:1").unwrap()).unwrap();
        assert!(!json.contains("health_path"));
        assert!(!json.contains("engine"));
    }

    #[test]
    fn engine_kind_is_named_in_lowercase_and_unknown_kinds_are_refused() {
        let spec: WorkerSpec =
            serde_json::from_str(r#"{"name":"a","url":"http://x:1","engine":"llamacpp"}"#).unwrap();
        assert_eq!(spec.engine, Some(EngineKind::Llamacpp));
        let spec: WorkerSpec =
            toml::from_str("name = \"v\"\nurl = \"http://x:1\"\nengine = \"vllm\"\n").unwrap();
        assert_eq!(spec.engine, Some(EngineKind::Vllm));
        let error =
            serde_json::from_str::<WorkerSpec>(r#"{"name":"a","url":"http://x:1","engine":"tgi"}"#)
                .unwrap_err();
        assert!(error.to_string().contains("vllm"), "{error}");
    }
}
