//! The contract between the gateway and every routing policy.

use crate::affinity::{AffinityApplied, AffinityEvent};
use crate::routing_key::{RoutingKeyInputs, RoutingKeySource};
use switchyard_core::WorkerId;

/// What a policy may look at when it routes one request.
#[derive(Clone, Copy, Debug, Default)]
pub struct RouteRequest<'a> {
    /// The request's prompt text; chat messages are already flattened by the gateway.
    pub prompt: &'a str,
    /// The session header's value (header name: `RoutingKeyConfig::session_header`).
    pub session_id: Option<&'a str>,
    /// The request's `user` field.
    pub user: Option<&'a str>,
}

impl<'a> RouteRequest<'a> {
    /// The inputs of [`crate::routing_key`], the function warmup shares with routing.
    pub fn key_inputs(&self) -> RoutingKeyInputs<'a> {
        RoutingKeyInputs {
            session_id: self.session_id,
            user: self.user,
            prompt: self.prompt,
        }
    }
}

/// A routable worker (already past the gateway's prefilters), built per request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub id: WorkerId,
    /// Requests this gateway replica has on the worker now (its private view).
    pub in_flight: u64,
    /// The worker's own load gauges from the last scrape, when it publishes them: the same
    /// figures every replica scraping it sees.
    pub reported: Option<ReportedLoad>,
}

/// An engine's own load gauges, as every gateway replica scrapes them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReportedLoad {
    /// Requests in the running batch.
    pub running: u64,
    /// Requests waiting for a batch slot.
    pub queued: u64,
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
    /// consistent_hash and cache_aware: where the request's routing key came from (None: no
    /// key, or the policy does not key).
    pub key_source: Option<RoutingKeySource>,
}

/// Counters and gauges a policy keeps; the gateway exports them (see the crate docs for
/// metric names). Counters only grow; fields a policy has no use for stay zero.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RoutingStats {
    /// Gauge: workers on the hash ring.
    pub ring_workers: u64,
    /// Gauge: virtual nodes on the hash ring.
    pub ring_vnodes: u64,
    /// Ring rebuilds caused by membership changes.
    pub membership_changes: u64,
    /// Gauge: share (0..=1) of the key space whose owner changed in the last rebuild.
    pub keys_moved_on_last_membership_change: f64,
    /// Gauge: hot keys currently being spread.
    pub hot_keys_spread: u64,
    /// Decisions that placed a hot key by its time-slice secondary hash.
    pub hot_spread_decisions: u64,
    /// Affinity migrations away from a filtered holder.
    pub migrations: u64,
    /// Hash placements moved past their owner by the load bound.
    pub load_moves: u64,
    /// Affinity events from other replicas (or echoed back) that changed local state.
    pub affinity_events_applied: u64,
    /// Affinity events naming a worker this replica does not know.
    pub affinity_events_ignored: u64,
    /// Gauge: placement overrides held (cache_aware).
    pub placement_overrides: u64,
    /// Gauge: prompt bytes held by the prefix tree (cache_aware).
    pub tree_bytes: u64,
    /// Gauge: replicas placing alongside this one, itself included, as the shared affinity
    /// events show (cache_aware: 1 alone or where events are not shared; 0 for policies that
    /// keep no affinity). A first turn's load bound reads local counts at this scale.
    pub placement_replicas: f64,
    /// Gauge: share of the conversations this replica met lately that it met at their
    /// opening (cache_aware; about 1 for a replica routing whole conversations, 1/N for one
    /// of N independent replicas fed at random, 0 before any).
    pub openings_met_share: f64,
    /// Gauge: of the busiest system prompts' conversation traffic, the share whose worker the
    /// last re-plan of their groups changed (cache_aware, sampled; 0 before a second plan).
    /// Where later turns follow the plan (replicas sharing no placements), those
    /// conversations' next turns move.
    pub plan_moved_share: f64,
    /// Gauge: the share the re-plan on the last membership change moved between workers there
    /// before and after it: beyond what the change forces (a departed worker's conversations
    /// out, a new worker's share in).
    pub plan_moved_beyond_membership_change: f64,
}

/// A routing policy shared by every request handler of a gateway.
pub trait RoutingPolicy: Send + Sync + 'static {
    fn name(&self) -> &'static str;

    /// `candidates` is non-empty when called by the gateway; returns None only if it is empty.
    fn select(&self, request: &RouteRequest<'_>, candidates: &[Candidate]) -> Option<Decision>;

    /// A worker joined the registry (call from the registry observer, before it is offered
    /// as a candidate). Hash-based policies place it on the ring by `name`.
    fn worker_added(&self, _id: WorkerId, _name: &str) {}

    /// The worker left the registry: forget everything about it.
    fn worker_removed(&self, _id: WorkerId) {}

    /// An affinity event from another replica (or this one's own, echoed back); idempotent.
    fn apply_affinity(&self, _event: &AffinityEvent) -> AffinityApplied {
        AffinityApplied::NotSupported
    }

    fn stats(&self) -> RoutingStats {
        RoutingStats::default()
    }

    /// Every branch label `select` can return, so the gateway can pre-register metric series.
    fn branches(&self) -> &'static [&'static str];
}
