//! List and watch pods over the Kubernetes API's HTTP interface: `GET .../pods?labelSelector=`
//! for a consistent snapshot and its `resourceVersion`, then `watch=true` from that version,
//! read as newline-delimited JSON events.

use bytes::Bytes;
use http::{Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::Value;
use std::time::Duration;

use super::config::DiscoveryConfig;
use super::pod::PodView;
use super::transport::Transport;

/// Largest list answer read (a namespace of inference pods is far smaller).
const LIST_LIMIT_BYTES: usize = 64 * 1024 * 1024;
/// Largest single watch event line.
const EVENT_LIMIT_BYTES: usize = 4 * 1024 * 1024;
const LIST_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("kubernetes API unreachable: {0}")]
    Transport(String),
    #[error("kubernetes API answered {status}: {message}")]
    Status { status: u16, message: String },
    /// The resource version is too old (410 Gone): list again.
    #[error("resource version expired")]
    Expired,
    #[error("kubernetes API sent an unreadable answer: {0}")]
    Decode(String),
    #[error("kubernetes API call timed out")]
    Timeout,
}

/// A consistent snapshot of the selected pods.
pub struct PodList {
    pub pods: Vec<PodView>,
    pub resource_version: String,
}

pub enum WatchEvent {
    Upsert(PodView),
    Deleted(PodView),
    /// Progress without a change: only the resource version moves.
    Bookmark(String),
}

pub struct Api {
    transport: Transport,
    config: DiscoveryConfig,
}

/// Percent-encodes a query value (everything but RFC 3986 unreserved characters).
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Api {
    pub fn new(transport: Transport, config: DiscoveryConfig) -> Self {
        Self { transport, config }
    }

    fn pods_uri(&self, extra: &str) -> Result<Uri, ApiError> {
        let text = format!(
            "{}/api/v1/namespaces/{}/pods?labelSelector={}{extra}",
            self.config.api_server.trim_end_matches('/'),
            encode(&self.config.namespace),
            encode(&self.config.label_selector),
        );
        text.parse()
            .map_err(|e| ApiError::Decode(format!("bad URI {text}: {e}")))
    }

    async fn get(&self, uri: Uri) -> Result<http::Response<Incoming>, ApiError> {
        let mut builder = Request::builder()
            .method(Method::GET)
            .uri(uri)
            .header(header::ACCEPT, "application/json");
        if !self.config.bearer_file.is_empty() {
            // A few bytes on a tmpfs: read synchronously (tokio's `fs` feature is not on here).
            let token = std::fs::read_to_string(&self.config.bearer_file).map_err(|e| {
                ApiError::Transport(format!("token {}: {e}", self.config.bearer_file))
            })?;
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {}", token.trim()));
        }
        let request = builder
            .body(Full::new(Bytes::new()))
            .map_err(|e| ApiError::Transport(e.to_string()))?;
        let response = self
            .transport
            .send(request)
            .await
            .map_err(ApiError::Transport)?;
        match response.status() {
            s if s.is_success() => Ok(response),
            StatusCode::GONE => Err(ApiError::Expired),
            status => {
                let body = read_limited(response.into_body(), 4096)
                    .await
                    .unwrap_or_default();
                Err(ApiError::Status {
                    status: status.as_u16(),
                    message: String::from_utf8_lossy(&body).into_owned(),
                })
            }
        }
    }

    pub async fn list(&self) -> Result<PodList, ApiError> {
        let uri = self.pods_uri("")?;
        let fetch = async {
            let response = self.get(uri).await?;
            let body = read_limited(response.into_body(), LIST_LIMIT_BYTES).await?;
            let list: Value =
                serde_json::from_slice(&body).map_err(|e| ApiError::Decode(e.to_string()))?;
            let pods = list["items"]
                .as_array()
                .map(|items| items.iter().filter_map(PodView::from_json).collect())
                .unwrap_or_default();
            let resource_version = list["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            Ok(PodList {
                pods,
                resource_version,
            })
        };
        tokio::time::timeout(LIST_TIMEOUT, fetch)
            .await
            .map_err(|_| ApiError::Timeout)?
    }

    /// Opens a watch from `resource_version`; the server ends it after the configured
    /// timeout.
    pub async fn watch(&self, resource_version: &str) -> Result<WatchStream, ApiError> {
        let uri = self.pods_uri(&format!(
            "&watch=true&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds={}",
            encode(resource_version),
            self.config.watch_timeout_secs
        ))?;
        let response = tokio::time::timeout(LIST_TIMEOUT, self.get(uri))
            .await
            .map_err(|_| ApiError::Timeout)??;
        Ok(WatchStream {
            body: response.into_body(),
            buffer: Vec::new(),
        })
    }
}

async fn read_limited(mut body: Incoming, limit: usize) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::Transport(e.to_string()))?;
        if let Some(data) = frame.data_ref() {
            if out.len() + data.len() > limit {
                return Err(ApiError::Decode(format!(
                    "answer larger than {limit} bytes"
                )));
            }
            out.extend_from_slice(data);
        }
    }
    Ok(out)
}

/// The events of one watch request.
pub struct WatchStream {
    body: Incoming,
    buffer: Vec<u8>,
}

impl WatchStream {
    /// The next event; `None` when the server ended the watch normally.
    pub async fn next(&mut self) -> Option<Result<WatchEvent, ApiError>> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match parse_event(&line) {
                    Ok(Some(event)) => return Some(Ok(event)),
                    Ok(None) => continue,
                    Err(e) => return Some(Err(e)),
                }
            }
            if self.buffer.len() > EVENT_LIMIT_BYTES {
                return Some(Err(ApiError::Decode("watch event too large".into())));
            }
            match self.body.frame().await? {
                Ok(frame) => {
                    if let Some(data) = frame.data_ref() {
                        self.buffer.extend_from_slice(data);
                    }
                }
                Err(e) => return Some(Err(ApiError::Transport(e.to_string()))),
            }
        }
    }
}

/// One watch line; `Ok(None)` for an event about an object that is not a usable pod.
fn parse_event(line: &[u8]) -> Result<Option<WatchEvent>, ApiError> {
    let event: Value = serde_json::from_slice(line).map_err(|e| ApiError::Decode(e.to_string()))?;
    let object = &event["object"];
    match event["type"].as_str() {
        Some("ADDED") | Some("MODIFIED") => Ok(PodView::from_json(object).map(WatchEvent::Upsert)),
        Some("DELETED") => Ok(PodView::from_json(object).map(WatchEvent::Deleted)),
        Some("BOOKMARK") => Ok(object["metadata"]["resourceVersion"]
            .as_str()
            .map(|rv| WatchEvent::Bookmark(rv.to_string()))),
        Some("ERROR") if object["code"] == 410 => Err(ApiError::Expired),
        Some("ERROR") => Err(ApiError::Status {
            status: object["code"]
                .as_u64()
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(500),
            message: object["message"].as_str().unwrap_or_default().to_string(),
        }),
        other => Err(ApiError::Decode(format!(
            "unknown watch event type {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_are_percent_encoded() {
        assert_eq!(
            encode("app=vllm,tier in (a b)"),
            "app%3Dvllm%2Ctier%20in%20%28a%20b%29"
        );
    }

    #[test]
    fn expired_and_error_events_are_told_apart() {
        let expired =
            br#"{"type":"ERROR","object":{"kind":"Status","code":410,"message":"too old"}}"#;
        assert!(matches!(parse_event(expired), Err(ApiError::Expired)));
        let forbidden = br#"{"type":"ERROR","object":{"kind":"Status","code":403,"message":"no"}}"#;
        assert!(matches!(
            parse_event(forbidden),
            Err(ApiError::Status { status: 403, .. })
        ));
        let bookmark = br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"42"}}}"#;
        assert!(matches!(parse_event(bookmark), Ok(Some(WatchEvent::Bookmark(rv))) if rv == "42"));
    }
}
