//! Where requests go and how: target URL resolution, the pooled HTTP/1.1 client, model discovery.

use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::LoadError;

pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// Idle keep-alive connections are dropped after this long; long enough to span arrival gaps.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The resolved target: endpoint URIs plus the extra headers sent with every request.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub chat_completions: Uri,
    pub models: Uri,
    pub extra_headers: HeaderMap,
}

impl Endpoint {
    pub fn new(target: &str, headers: &[(String, String)]) -> Result<Self, LoadError> {
        let invalid = |reason: &str| LoadError::InvalidTarget {
            target: target.to_owned(),
            reason: reason.to_owned(),
        };
        let base: Uri = target
            .trim()
            .parse()
            .map_err(|error: http::uri::InvalidUri| invalid(&error.to_string()))?;
        if base.scheme_str() != Some("http") {
            return Err(invalid("only plain http:// targets are supported"));
        }
        let authority = base.authority().ok_or_else(|| invalid("missing host"))?;
        if !is_loopback_host(authority.host()) {
            return Err(invalid(
                "only loopback targets (127.0.0.0/8, ::1, localhost) are allowed",
            ));
        }
        // Accept both `http://host` and the OpenAI-SDK style `http://host/v1`.
        let path = base.path().trim_end_matches('/');
        let path = path.strip_suffix("/v1").unwrap_or(path);
        let endpoint_uri = |suffix: &str| -> Result<Uri, LoadError> {
            format!("http://{authority}{path}{suffix}")
                .parse()
                .map_err(|error: http::uri::InvalidUri| invalid(&error.to_string()))
        };
        Ok(Self {
            chat_completions: endpoint_uri("/v1/chat/completions")?,
            models: endpoint_uri("/v1/models")?,
            extra_headers: parse_headers(headers)?,
        })
    }
}

/// The tool generates heavy synthetic load: it must never be pointed at someone else's host.
/// An unspecified address (`0.0.0.0`, what a server bound to all interfaces reports) is
/// reached over loopback, so it is accepted too.
fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified())
}

fn parse_headers(headers: &[(String, String)]) -> Result<HeaderMap, LoadError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let invalid = |reason: String| LoadError::InvalidHeader {
            header: format!("{name}: {value}"),
            reason,
        };
        let name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|error| invalid(error.to_string()))?;
        let value =
            HeaderValue::from_str(value.trim()).map_err(|error| invalid(error.to_string()))?;
        map.append(name, value);
    }
    Ok(map)
}

pub fn build_client(max_in_flight: usize, connect_timeout: Duration) -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(connect_timeout));
    Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .pool_max_idle_per_host(max_in_flight)
        .build(connector)
}

/// `GET /v1/models` and return the first model id.
pub async fn discover_model(
    client: &HttpClient,
    endpoint: &Endpoint,
    timeout: Duration,
) -> Result<String, LoadError> {
    let failed = |reason: String| LoadError::ModelDiscovery {
        uri: endpoint.models.to_string(),
        reason,
    };
    let mut request = Request::get(endpoint.models.clone())
        .body(Full::new(Bytes::new()))
        .map_err(|error| failed(error.to_string()))?;
    request.headers_mut().extend(endpoint.extra_headers.clone());
    let exchange = async {
        let response = client
            .request(request)
            .await
            .map_err(|error| failed(error.to_string()))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|error| failed(error.to_string()))?
            .to_bytes();
        if status != StatusCode::OK {
            return Err(failed(format!(
                "status {status}: {}",
                String::from_utf8_lossy(&body)
            )));
        }
        first_model_id(&body).ok_or_else(|| failed("no model id in the response".into()))
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| failed(format!("no answer within {timeout:?}")))?
}

fn first_model_id(body: &[u8]) -> Option<String> {
    let json: serde_json::Value = serde_json::from_slice(body).ok()?;
    json.get("data")?
        .as_array()?
        .first()?
        .get("id")?
        .as_str()
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect()
    }

    #[test]
    fn endpoint_accepts_bare_and_v1_base_urls() {
        for target in [
            "http://127.0.0.1:8080",
            "http://127.0.0.1:8080/",
            "http://127.0.0.1:8080/v1",
            "http://127.0.0.1:8080/v1/",
        ] {
            let endpoint = Endpoint::new(target, &[]).expect("valid target");
            assert_eq!(
                endpoint.chat_completions,
                "http://127.0.0.1:8080/v1/chat/completions"
            );
            assert_eq!(endpoint.models, "http://127.0.0.1:8080/v1/models");
        }
        let prefixed = Endpoint::new("http://localhost:80/tenant-a", &[]).expect("valid target");
        assert_eq!(
            prefixed.chat_completions,
            "http://localhost:80/tenant-a/v1/chat/completions"
        );
    }

    #[test]
    fn endpoint_rejects_https_and_garbage() {
        assert!(matches!(
            Endpoint::new("https://example.com", &[]),
            Err(LoadError::InvalidTarget { .. })
        ));
        assert!(Endpoint::new("not a url", &[]).is_err());
        assert!(Endpoint::new("127.0.0.1:8080", &[]).is_err());
    }

    #[test]
    fn only_loopback_targets_are_accepted() {
        for target in [
            "http://127.0.0.1:1",
            "http://127.8.9.10:1",
            "http://localhost:1",
            "http://[::1]:1",
            "http://0.0.0.0:1",
        ] {
            assert!(Endpoint::new(target, &[]).is_ok(), "{target}");
        }
        for target in [
            "http://10.0.0.1:1",
            "http://example.com",
            "http://[2001:db8::1]:1",
        ] {
            assert!(
                matches!(
                    Endpoint::new(target, &[]),
                    Err(LoadError::InvalidTarget { .. })
                ),
                "{target}"
            );
        }
    }

    #[test]
    fn extra_headers_are_parsed_and_bad_ones_rejected() {
        let endpoint = Endpoint::new(
            "http://127.0.0.1:1",
            &headers(&[("authorization", "Bearer k"), ("x-priority", " p0 ")]),
        )
        .expect("valid headers");
        assert_eq!(endpoint.extra_headers["authorization"], "Bearer k");
        assert_eq!(endpoint.extra_headers["x-priority"], "p0");
        let bad = Endpoint::new("http://127.0.0.1:1", &headers(&[("bad header", "v")]));
        assert!(matches!(bad, Err(LoadError::InvalidHeader { .. })));
    }

    #[test]
    fn first_model_id_reads_openai_model_lists() {
        let body = br#"{"object":"list","data":[{"id":"m1"},{"id":"m2"}]}"#;
        assert_eq!(first_model_id(body), Some("m1".into()));
        assert_eq!(first_model_id(br#"{"data":[]}"#), None);
        assert_eq!(first_model_id(b"oops"), None);
    }
}
