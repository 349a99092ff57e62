//! What every stage of one request shares: the stack's handles, the route, the client's
//! headers, the request id, its trace context and when the request arrived.

use http::{HeaderMap, Method};
use std::time::Instant;

use crate::openai::Route;
use crate::state::Stack;
use crate::trace_context::TraceContext;

/// One request in flight through the stages.
pub struct RequestContext<'a> {
    pub stack: &'a Stack,
    pub route: Route,
    /// The client's method, forwarded as is: `POST` but for bodiless pass-through.
    pub method: &'a Method,
    /// Path (and query) of the worker's endpoint.
    pub upstream_path: &'a str,
    pub client_headers: &'a HeaderMap,
    pub request_id: &'a str,
    /// The request's W3C trace context (the client's, or derived from the request id): each
    /// attempt's `traceparent` is built from it.
    pub trace: &'a TraceContext,
    pub started: Instant,
}
