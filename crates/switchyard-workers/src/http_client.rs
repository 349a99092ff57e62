use bytes::Bytes;
use http::{Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

/// The pooled keep-alive HTTP/1.1 client used for every call to a worker.
pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

#[derive(Clone, Debug)]
pub struct HttpClientConfig {
    pub connect_timeout: Duration,
    pub pool_idle_timeout: Duration,
    pub pool_max_idle_per_host: usize,
}

impl Default for HttpClientConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(2),
            pool_idle_timeout: Duration::from_secs(90),
            pool_max_idle_per_host: 256,
        }
    }
}

pub fn build_http_client(config: &HttpClientConfig) -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(config.connect_timeout));
    connector.set_nodelay(true);
    connector.enforce_http(true);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(config.pool_idle_timeout)
        .pool_max_idle_per_host(config.pool_max_idle_per_host)
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .build(connector)
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

/// Sends `request` and reads the whole body (at most `max_body` bytes), bounded by
/// `timeout` end to end. Any status is returned; the caller decides what it means.
pub(crate) async fn fetch(
    client: &HttpClient,
    request: Request<Full<Bytes>>,
    timeout: Duration,
    max_body: usize,
) -> Result<(http::StatusCode, Bytes), FetchError> {
    let exchange = async {
        let response = client.request(request).await.map_err(|e| {
            if e.is_connect() {
                FetchError::Connect(e.to_string())
            } else {
                FetchError::Transport(e.to_string())
            }
        })?;
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
