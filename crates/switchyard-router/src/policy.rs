//! The contract between the gateway and every routing policy.

use switchyard_core::WorkerId;

/// What a policy may look at when it routes one request.
#[derive(Clone, Copy, Debug)]
pub struct RouteRequest<'a> {
    /// The request's prompt text; chat messages are already flattened by the gateway.
    pub prompt: &'a str,
    /// E.g. a session id. Unused by the policies here; kept for key-based policies.
    pub routing_key: Option<&'a str>,
}

/// A routable worker (already past the gateway's prefilters), built per request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub id: WorkerId,
    pub in_flight: u64,
}

/// The longest cached prefix of the prompt, over every worker the policy knows,
/// including workers that were filtered out of the candidate set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrefixMatch {
    pub holder: WorkerId,
    /// Matched prompt bytes / prompt bytes, cut back to a character boundary.
    pub matched_ratio: f32,
    /// False means the best cache was unreachable: a "virtual hit".
    pub holder_is_candidate: bool,
}

/// Where a request goes and why.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    pub worker: WorkerId,
    /// Which branch of the policy decided; one of [`RoutingPolicy::branches`], used as a metric label.
    pub branch: &'static str,
    /// Cache-aware only: the best prefix holder over all workers the tree knows.
    pub prefix_match: Option<PrefixMatch>,
}

/// A routing policy shared by every request handler of a gateway.
pub trait RoutingPolicy: Send + Sync + 'static {
    fn name(&self) -> &'static str;

    /// `candidates` is non-empty when called by the gateway; returns None only if it is empty.
    fn select(&self, request: &RouteRequest<'_>, candidates: &[Candidate]) -> Option<Decision>;

    /// The worker left the registry: forget everything about it.
    fn worker_removed(&self, _id: WorkerId) {}

    /// Every branch label `select` can return, so the gateway can pre-register metric series.
    fn branches(&self) -> &'static [&'static str];
}
