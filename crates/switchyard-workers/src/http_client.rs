use bytes::Bytes;
use http::{Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::{Client, ResponseFuture};
use hyper_util::rt::TokioExecutor;
use std::sync::Arc;
use std::time::Duration;

use crate::upstream::UpstreamConnector;

/// The pooled keep-alive HTTP/1.1 client used for every call to a worker: `http://`, and
/// `https://` verified with [`HttpClientConfig::tls`]. Requests on the inference path go
/// through their worker's own pool instead ([`crate::WorkerHandle::send`]), made with the
/// same connector and limits, which this client hands to the registry.
#[derive(Clone, Debug)]
pub struct HttpClient {
    pooled: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// Shared: it is as large as the client itself, and rarely read.
    upstream: Arc<UpstreamConnector>,
}

impl HttpClient {
    /// Sends `request` (an absolute URI) on a pooled connection to its host.
    pub fn request(&self, request: Request<Full<Bytes>>) -> ResponseFuture {
        self.pooled.request(request)
    }

    /// How the workers' own pools connect, and their limits.
    pub(crate) fn upstream(&self) -> &UpstreamConnector {
        &self.upstream
    }
}

#[derive(Clone, Debug)]
pub struct HttpClientConfig {
    pub connect_timeout: Duration,
    pub pool_idle_timeout: Duration,
    pub pool_max_idle_per_host: usize,
    /// How `https://` workers are verified (trust anchors, optionally a client certificate).
    /// `None`: no anchors at all, so every `https://` call fails its handshake.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl Default for HttpClientConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(2),
            pool_idle_timeout: Duration::from_secs(90),
            pool_max_idle_per_host: 256,
            tls: None,
        }
    }
}

pub fn build_http_client(config: &HttpClientConfig) -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(config.connect_timeout));
    connector.set_nodelay(true);
    connector.enforce_http(false);
    let tls = match &config.tls {
        Some(tls) => (**tls).clone(),
        None => trust_nothing(),
    };
    let connector = HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(connector);
    let upstream = Arc::new(UpstreamConnector::new(
        connector.clone(),
        config.pool_idle_timeout,
        config.pool_max_idle_per_host,
    ));
    let pooled = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(config.pool_idle_timeout)
        .pool_max_idle_per_host(config.pool_max_idle_per_host)
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .build(connector);
    HttpClient { pooled, upstream }
}

/// A TLS client config with no trust anchors: an `https://` worker without a configured CA
/// is never trusted (the gateway's config refuses such a worker before this is reached).
fn trust_nothing() -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // ring supports the safe default versions, so this cannot fail; the fallback (the same
    // versions with the crate's built-in provider) only keeps an error path out of here.
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap_or_else(|_| {
            rustls::ClientConfig::builder_with_protocol_versions(rustls::DEFAULT_VERSIONS)
        })
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth()
}

#[derive(Debug, thiserror::Error)]
pub enum GetJsonError {
    #[error("request failed: {0}")]
    Transport(String),
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("status {0}")]
    Status(u16),
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Largest JSON body `get_json` reads (a model list is a few KiB).
pub const MAX_JSON_BODY_BYTES: usize = 1024 * 1024;

/// GETs `uri` and parses the body as JSON, bounded by `timeout` end to end and by
/// [`MAX_JSON_BODY_BYTES`] in size.
pub async fn get_json(
    client: &HttpClient,
    uri: Uri,
    timeout: Duration,
) -> Result<serde_json::Value, GetJsonError> {
    let request = Request::builder()
        .method(Method::GET)
        .uri(uri)
        .body(Full::new(Bytes::new()))
        .map_err(|e| GetJsonError::Transport(e.to_string()))?;
    let fetch = async {
        let response = client
            .request(request)
            .await
            .map_err(|e| GetJsonError::Transport(e.to_string()))?;
        let status = response.status();
        let body = http_body_util::Limited::new(response.into_body(), MAX_JSON_BODY_BYTES)
            .collect()
            .await
            .map_err(|e| GetJsonError::Transport(e.to_string()))?
            .to_bytes();
        if !status.is_success() {
            return Err(GetJsonError::Status(status.as_u16()));
        }
        Ok(serde_json::from_slice(&body)?)
    };
    tokio::time::timeout(timeout, fetch)
        .await
        .map_err(|_| GetJsonError::Timeout(timeout))?
}

/// Why a call made by the worker's own actors (health, metrics, probe) failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FetchError {
    #[error("connect failed: {0}")]
    Connect(String),
    #[error("request failed: {0}")]
    Transport(String),
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("body larger than {0} bytes")]
    TooLarge(usize),
}

/// Sends `request`; a refused or unreachable worker is told apart from a broken exchange.
pub(crate) async fn send(
    client: &HttpClient,
    request: Request<Full<Bytes>>,
) -> Result<http::Response<hyper::body::Incoming>, FetchError> {
    client.request(request).await.map_err(|e| {
        if e.is_connect() {
            FetchError::Connect(e.to_string())
        } else {
            FetchError::Transport(e.to_string())
        }
    })
}

/// Sends `request` and reads the whole body (at most `max_body` bytes), bounded by
/// `timeout` end to end. Any status is returned; the caller decides what it means.
pub(crate) async fn fetch(
    client: &HttpClient,
    request: Request<Full<Bytes>>,
    timeout: Duration,
    max_body: usize,
) -> Result<(http::StatusCode, Bytes), FetchError> {
    let exchange = async {
        let response = send(client, request).await?;
        let status = response.status();
        let body = http_body_util::Limited::new(response.into_body(), max_body)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    FetchError::TooLarge(max_body)
                } else {
                    FetchError::Transport(e.to_string())
                }
            })?
            .to_bytes();
        Ok((status, body))
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| FetchError::Timeout(timeout))?
}

pub(crate) fn get_request(uri: Uri) -> Result<Request<Full<Bytes>>, FetchError> {
    Request::builder()
        .method(Method::GET)
        .uri(uri)
        .body(Full::new(Bytes::new()))
        .map_err(|e| FetchError::Transport(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A peer that answers every request with a 200 whose body is `size` bytes (announced
    /// up front, then streamed), counting what it managed to send.
    async fn oversized_peer(size: usize) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut head = [0u8; 4096];
                    let _ = socket.read(&mut head).await;
                    let start = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {size}\r\n\r\n"
                    );
                    if socket.write_all(start.as_bytes()).await.is_err() {
                        return;
                    }
                    let chunk = vec![b' '; 64 * 1024];
                    let mut sent = 0;
                    while sent < size {
                        if socket.write_all(&chunk).await.is_err() {
                            return;
                        }
                        sent += chunk.len();
                    }
                });
            }
        });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn a_discovery_answer_past_its_bound_is_refused() {
        let base = oversized_peer(64 * MAX_JSON_BODY_BYTES).await;
        let client = build_http_client(&HttpClientConfig::default());
        let uri: Uri = format!("{base}/v1/models").parse().unwrap();
        let outcome = get_json(&client, uri, Duration::from_secs(10)).await;
        assert!(
            matches!(outcome, Err(GetJsonError::Transport(_))),
            "refused at the bound, not read whole: {outcome:?}"
        );
    }

    #[tokio::test]
    async fn a_health_or_metrics_answer_past_its_bound_is_refused() {
        let base = oversized_peer(8 * 1024 * 1024).await;
        let client = build_http_client(&HttpClientConfig::default());
        let request = get_request(format!("{base}/metrics").parse().unwrap()).unwrap();
        let outcome = fetch(&client, request, Duration::from_secs(10), 256 * 1024).await;
        assert!(
            matches!(outcome, Err(FetchError::TooLarge(262_144))),
            "{outcome:?}"
        );
    }
}
