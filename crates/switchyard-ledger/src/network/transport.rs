//! Pooled HTTP/1 client for node-to-node calls: bincode bodies, the cluster secret, the
//! sender's id, and a hard timeout on every call; over mutual TLS when the node has
//! [`PeerTls`] (then only `https://` is spoken).

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::header_names;

use super::fault::FaultSwitch;
use super::peer_tls::PeerTls;
use crate::command::NodeId;

/// Largest answer read from a peer (snapshots travel in chunks well below it).
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("fault switch dropped the call")]
    Dropped,
    #[error("building request: {0}")]
    Request(String),
    #[error("connecting or sending: {0}")]
    Connect(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("peer answered {status}: {body}")]
    Status { status: StatusCode, body: String },
}

pub struct HttpTransport {
    client: PeerClient,
    secret: Arc<str>,
    node_id: NodeId,
    faults: Arc<FaultSwitch>,
}

impl HttpTransport {
    pub fn new(
        node_id: NodeId,
        secret: Arc<str>,
        faults: Arc<FaultSwitch>,
        connect_timeout: Duration,
        tls: Option<&PeerTls>,
    ) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(connect_timeout));
        connector.set_nodelay(true);
        let mut builder = Client::builder(TokioExecutor::new());
        builder.pool_idle_timeout(Duration::from_secs(30));
        let client = match tls {
            Some(tls) => {
                connector.enforce_http(false);
                PeerClient::Tls(
                    builder.build(
                        HttpsConnectorBuilder::new()
                            .with_tls_config((*tls.client).clone())
                            .https_only()
                            .enable_http1()
                            .wrap_connector(connector),
                    ),
                )
            }
            None => PeerClient::Plain(builder.build(connector)),
        };
        Self {
            client,
            secret,
            node_id,
            faults,
        }
    }

    /// The id this node sends its calls as.
    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    /// POSTs `body` to `http(s)://{addr}{path}` and returns the answer's bytes.
    pub async fn post(
        &self,
        peer: Option<NodeId>,
        addr: &str,
        path: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Bytes, TransportError> {
        if !self.faults.allows(peer) {
            return Err(TransportError::Dropped);
        }
        let request = Request::builder()
            .method(Method::POST)
            .uri(format!("{}://{addr}{path}", self.client.scheme()))
            .header(http::header::CONTENT_TYPE, "application/octet-stream")
            .header(header_names::CLUSTER_SECRET, &*self.secret)
            .header(header_names::CLUSTER_NODE, self.node_id.to_string())
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| TransportError::Request(e.to_string()))?;
        let delay = self.faults.one_way_delay();
        let call = async {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| TransportError::Connect(e.to_string()))?;
            let status = response.status();
            // A peer's answer is read only up to a bound, like every body from the network.
            let bytes = Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
                .collect()
                .await
                .map_err(|e| TransportError::Connect(e.to_string()))?
                .to_bytes();
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if status != StatusCode::OK {
                return Err(TransportError::Status {
                    status,
                    body: String::from_utf8_lossy(&bytes).into_owned(),
                });
            }
            Ok(bytes)
        };
        tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| TransportError::Timeout(timeout))?
    }
}

/// The pooled client: plain, or speaking only mutual TLS.
enum PeerClient {
    Plain(Client<HttpConnector, Full<Bytes>>),
    Tls(Client<HttpsConnector<HttpConnector>, Full<Bytes>>),
}

impl PeerClient {
    fn scheme(&self) -> &'static str {
        match self {
            Self::Plain(_) => "http",
            Self::Tls(_) => "https",
        }
    }

    async fn request(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<http::Response<hyper::body::Incoming>, hyper_util::client::legacy::Error> {
        match self {
            Self::Plain(client) => client.request(request).await,
            Self::Tls(client) => client.request(request).await,
        }
    }
}
