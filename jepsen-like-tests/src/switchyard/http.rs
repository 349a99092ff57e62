//! A small pooled HTTP/1 client (hyper-util, like the rest of the repo) that tells apart the
//! failures the history must tell apart: nothing was sent (connect failed: the operation
//! certainly had no effect) versus lost in flight or timed out (it may have had one).

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;
use switchyard_core::header_names;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The connection could not be opened: the request was never sent.
    #[error("connect failed: {0}")]
    Connect(String),
    /// Sent (or maybe sent) and then the connection failed: outcome unknown.
    #[error("lost in flight: {0}")]
    Lost(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("invalid request: {0}")]
    Invalid(String),
}

/// One answer, body read in full.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    /// `x-switchyard-degraded`: how the answer was degraded (`cache`: served from the
    /// response cache, without admission or spend).
    pub degraded: Option<String>,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// `error.code` and `error.message` of the OpenAI-shaped error body.
    pub fn error(&self) -> (String, String) {
        let json = self.json();
        let field = |name: &str| {
            json.as_ref()
                .and_then(|j| j["error"][name].as_str())
                .map(str::to_owned)
        };
        (
            field("code").unwrap_or_else(|| format!("http_{}", self.status)),
            field("message").unwrap_or_default(),
        )
    }
}

#[derive(Clone)]
pub struct HttpClient {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Default for HttpClient {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpClient {
    pub fn new() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(Duration::from_secs(1)));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(5))
            .pool_max_idle_per_host(32)
            .build(connector);
        Self { client }
    }

    /// One request, answered within `limit` or `CallError::Timeout`.
    pub async fn call(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<String>,
        limit: Duration,
    ) -> Result<Reply, CallError> {
        let mut builder = Request::builder().method(method).uri(url);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        if body.is_some() {
            builder = builder.header("content-type", "application/json");
        }
        let request = builder
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| CallError::Invalid(e.to_string()))?;
        let exchange = async {
            let response = self.client.request(request).await.map_err(|e| {
                if e.is_connect() {
                    CallError::Connect(e.to_string())
                } else {
                    CallError::Lost(e.to_string())
                }
            })?;
            let status = response.status().as_u16();
            let degraded = response
                .headers()
                .get(header_names::DEGRADED)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| CallError::Lost(e.to_string()))?
                .to_bytes();
            Ok(Reply {
                status,
                degraded,
                body,
            })
        };
        tokio::time::timeout(limit, exchange)
            .await
            .unwrap_or(Err(CallError::Timeout(limit)))
    }
}
