//! The node's HTTP server: Raft RPCs under `/raft/...` and the ledger calls other nodes
//! forward to the leader under `/ledger/...`. Every route checks the cluster secret and the
//! fault switch first; bodies are bincode both ways.

use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Serialize;
use std::sync::Arc;
use switchyard_core::header_names;

use super::wire::MAX_RPC_BODY_BYTES;
use crate::codec::{decode, encode};
use crate::command::WriteRequest;
use crate::error::WireError;
use crate::node::core::{LedgerCore, MembershipChange};
use crate::node::reads::ReadQuery;

pub(crate) fn router(core: Arc<LedgerCore>) -> Router {
    Router::new()
        .route("/raft/append", post(append))
        .route("/raft/vote", post(vote))
        .route("/raft/snapshot", post(snapshot))
        .route("/ledger/write", post(write))
        .route("/ledger/read", post(read))
        .route("/ledger/membership", post(membership))
        .layer(DefaultBodyLimit::max(MAX_RPC_BODY_BYTES))
        .layer(middleware::from_fn_with_state(core.clone(), guard))
        .with_state(core)
}

/// Compares without an early exit so the secret cannot be guessed byte by byte from timing.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    if given.len() != expected.len() {
        return false;
    }
    given
        .iter()
        .zip(expected)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

async fn guard(
    State(core): State<Arc<LedgerCore>>,
    headers: HeaderMap,
    request: Request,
    next: Next,
) -> Response {
    let secret = headers
        .get(header_names::CLUSTER_SECRET)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if !same_secret(secret, core.config.cluster_secret.expose().as_bytes()) {
        return (StatusCode::UNAUTHORIZED, "bad cluster secret").into_response();
    }
    let from = headers
        .get(header_names::CLUSTER_NODE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    if !core.faults.allows(from) {
        return (StatusCode::SERVICE_UNAVAILABLE, "dropped by fault switch").into_response();
    }
    next.run(request).await
}

fn reply<T: Serialize>(value: &T) -> Response {
    match encode(value) {
        Ok(bytes) => (StatusCode::OK, bytes).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

fn bad_request(error: impl std::fmt::Display) -> Response {
    (StatusCode::BAD_REQUEST, error.to_string()).into_response()
}

async fn append(State(core): State<Arc<LedgerCore>>, body: Bytes) -> Response {
    match decode(&body) {
        Ok(request) => reply(&core.raft.append_entries(request).await),
        Err(e) => bad_request(e),
    }
}

async fn vote(State(core): State<Arc<LedgerCore>>, body: Bytes) -> Response {
    match decode(&body) {
        Ok(request) => reply(&core.raft.vote(request).await),
        Err(e) => bad_request(e),
    }
}

async fn snapshot(State(core): State<Arc<LedgerCore>>, body: Bytes) -> Response {
    match decode(&body) {
        Ok(request) => reply(&core.raft.install_snapshot(request).await),
        Err(e) => bad_request(e),
    }
}

async fn write(State(core): State<Arc<LedgerCore>>, body: Bytes) -> Response {
    let request: WriteRequest = match decode(&body) {
        Ok(request) => request,
        Err(e) => return bad_request(e),
    };
    // The forwarder gives up after its rpc timeout: waiting longer helps nobody.
    let result = core.write_local(request, core.config.rpc_timeout).await;
    reply(&result.map_err(|e| WireError::from(&e)))
}

async fn read(State(core): State<Arc<LedgerCore>>, body: Bytes) -> Response {
    let query: ReadQuery = match decode(&body) {
        Ok(query) => query,
        Err(e) => return bad_request(e),
    };
    let result = core.read_local(&query, core.config.rpc_timeout).await;
    reply(&result.map_err(|e| WireError::from(&e)))
}

async fn membership(State(core): State<Arc<LedgerCore>>, body: Bytes) -> Response {
    let change: MembershipChange = match decode(&body) {
        Ok(change) => change,
        Err(e) => return bad_request(e),
    };
    let result = core
        .change_membership_local(&change, core.config.write_timeout)
        .await;
    reply(&result.map_err(|e| WireError::from(&e)))
}
