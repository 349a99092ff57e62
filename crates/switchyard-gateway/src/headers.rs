//! The header names the gateway reads from clients and sends to workers, typed once as
//! `HeaderName`s from the shared vocabulary (`switchyard_core::header_names`): a name given as
//! text is parsed, and a non-standard one copied into a fresh allocation, every time it is used.

use http::HeaderName;
use switchyard_core::header_names;

/// The request's id: the caller's when it sent a usable one, else a fresh UUID; echoed on
/// the response and sent to every worker attempt.
pub const REQUEST_ID: HeaderName = HeaderName::from_static(header_names::REQUEST_ID);
/// The worker that answered, on every proxied response.
pub const WORKER: HeaderName = HeaderName::from_static(header_names::WORKER);
/// The request's tags, sent to the worker with every attempt.
pub const CALLER: HeaderName = HeaderName::from_static(header_names::CALLER);
pub const PRIORITY: HeaderName = HeaderName::from_static(header_names::PRIORITY);
pub const PURPOSE: HeaderName = HeaderName::from_static(header_names::PURPOSE);
/// The W3C trace context each worker attempt carries.
pub const TRACEPARENT: HeaderName = HeaderName::from_static(header_names::TRACEPARENT);
/// Millisecond retry hint beside `Retry-After` on every refusal that carries one.
pub const RETRY_AFTER_MS: HeaderName = HeaderName::from_static(header_names::RETRY_AFTER_MS);
/// An API key given without the `Authorization: Bearer` form.
pub const API_KEY: HeaderName = HeaderName::from_static(header_names::API_KEY);
