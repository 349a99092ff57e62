//! The header names the gateway reads from clients and sends to workers, in one place.
//! Built once as `HeaderName`s: a name given as text is parsed, and a non-standard one
//! copied into a fresh allocation, every time it is used.

use http::HeaderName;

/// The request's id: the caller's when it sent a usable one, else a fresh UUID; echoed on
/// the response and sent to every worker attempt.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// The worker that answered, on every proxied response.
pub const WORKER: HeaderName = HeaderName::from_static("x-switchyard-worker");
/// The request's tags, sent to the worker with every attempt.
pub const CALLER: HeaderName = HeaderName::from_static("x-switchyard-caller");
pub const PRIORITY: HeaderName = HeaderName::from_static("x-switchyard-priority");
pub const PURPOSE: HeaderName = HeaderName::from_static("x-switchyard-purpose");
