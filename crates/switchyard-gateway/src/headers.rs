//! The header names the gateway reads from clients and sends to workers, in one place.

/// The request's id: the caller's when it sent a usable one, else a fresh UUID; echoed on
/// the response and sent to every worker attempt.
pub const REQUEST_ID: &str = "x-request-id";
/// The worker that answered, on every proxied response.
pub const WORKER: &str = "x-switchyard-worker";
/// The request's tags, sent to the worker with every attempt.
pub const CALLER: &str = "x-switchyard-caller";
pub const PRIORITY: &str = "x-switchyard-priority";
pub const PURPOSE: &str = "x-switchyard-purpose";
