//! Every HTTP header name Switchyard reads or writes, in one place, as lowercase wire text.
//! Gateway, admission, ledger, workers, the simulator and the load tool all take their names
//! from here, so a renamed header cannot drift between the side that sends it and the side
//! that reads it.

/// The request's id: the caller's when usable, else a fresh one; echoed on the response and
/// sent to every worker attempt.
pub const REQUEST_ID: &str = "x-request-id";
/// An API key given without the `Authorization: Bearer` form.
pub const API_KEY: &str = "x-api-key";
/// A client's conversation key, used for cache affinity when present.
pub const SESSION_ID: &str = "x-session-id";
/// The request's priority class (`p0`, `p1`, `p2`).
pub const PRIORITY: &str = "x-switchyard-priority";
/// Why the request is sent (`user`, `retry`, `probe`, …).
pub const PURPOSE: &str = "x-switchyard-purpose";
/// How many times the client has already retried this request.
pub const RETRY_COUNT: &str = "x-switchyard-retry-count";
/// The caller the gateway identified, sent to the worker with every attempt.
pub const CALLER: &str = "x-switchyard-caller";
/// The worker that answered, on every proxied response.
pub const WORKER: &str = "x-switchyard-worker";
/// Set on an answer served in a degraded mode (smaller model, cached answer, …).
pub const DEGRADED: &str = "x-switchyard-degraded";
/// A human-readable note explaining a degraded answer.
pub const NOTICE: &str = "x-switchyard-notice";
/// Age in seconds of an answer served from the response cache.
pub const CACHE_AGE: &str = "x-switchyard-cache-age";
/// Sent by a client that refuses a cached answer.
pub const FRESH: &str = "x-switchyard-fresh";
/// Wait before retrying, in milliseconds (honoured by the OpenAI SDKs beside `Retry-After`).
pub const RETRY_AFTER_MS: &str = "retry-after-ms";
/// W3C trace context.
pub const TRACEPARENT: &str = "traceparent";
/// The shared secret on every Raft RPC between replicas.
pub const CLUSTER_SECRET: &str = "x-switchyard-cluster-secret";
/// The sending replica's node id on every Raft RPC.
pub const CLUSTER_NODE: &str = "x-switchyard-node";
/// The simulated worker that answered (simulator only).
pub const SIM_WORKER: &str = "x-sim-worker";
