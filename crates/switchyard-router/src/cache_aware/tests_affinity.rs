//! Cache-aware routing with a ring: hash placement across replicas, migration, events.

use super::*;
use crate::{AffinityReason, ConsistentHashConfig, DiscardAffinity, RoutingKeyConfig};
use parking_lot::Mutex as PlMutex;
use std::sync::{OnceLock, Weak};
use switchyard_core::WallClock;

pub(super) const NAMES: [&str; 4] = ["gpu-a", "gpu-b", "gpu-c", "gpu-d"];

#[derive(Default)]
pub(super) struct Recorder(PlMutex<Vec<AffinityEvent>>);

impl AffinitySink for Recorder {
    fn publish(&self, event: AffinityEvent) {
        self.0.lock().push(event);
    }
}

impl Recorder {
    pub(super) fn take(&self) -> Vec<AffinityEvent> {
        std::mem::take(&mut *self.0.lock())
    }
}

/// One gateway replica: the same worker names as every other, its own worker ids.
fn replica(id_base: u32, sink: Arc<dyn AffinitySink>) -> CacheAwarePolicy {
    replica_with(id_base, sink, CacheAwareConfig::default())
}

/// The recent-share bound switched off: placement by the ring and in-flight counts only.
pub(super) fn without_share_bound() -> CacheAwareConfig {
    CacheAwareConfig {
        placement_load_factor: 1e9,
        ..Default::default()
    }
}

/// A clock that never moves, so recent-share counts do not depend on how fast tests run.
pub(super) fn frozen_clock() -> WallClock {
    let manual = switchyard_core::ManualClock::new();
    WallClock::new(
        Arc::new(manual),
        std::time::Duration::from_secs(1_700_000_000),
    )
}

pub(super) fn replica_with(
    id_base: u32,
    sink: Arc<dyn AffinitySink>,
    config: CacheAwareConfig,
) -> CacheAwarePolicy {
    let policy = CacheAwarePolicy::new(
        config,
        &ConsistentHashConfig::default(),
        RoutingKeyConfig::default(),
        frozen_clock(),
        sink,
    )
    .unwrap();
    // Registered in a different order on each replica, too.
    for (offset, name) in (0u32..4).zip(NAMES).rev() {
        policy.worker_added(WorkerId(id_base + offset), name);
    }
    policy
}

pub(super) fn fleet(policy: &CacheAwarePolicy, loads: &[(&str, u64)]) -> Vec<Candidate> {
    let ring = policy.membership.ring();
    loads
        .iter()
        .map(|&(name, in_flight)| Candidate {
            id: ring.id_of(name).unwrap(),
            in_flight,
            reported: None,
        })
        .collect()
}

pub(super) fn idle_except(policy: &CacheAwarePolicy, filtered: &[&str]) -> Vec<Candidate> {
    let loads: Vec<(&str, u64)> = NAMES
        .iter()
        .filter(|name| !filtered.contains(name))
        .map(|&name| (name, 0))
        .collect();
    fleet(policy, &loads)
}

/// Every worker, `busy` with 5 requests in flight (below the imbalance guard), the rest idle:
/// a recovered old holder is then the idler one, which is when flipping back would tempt.
fn busy(policy: &CacheAwarePolicy, busy: &str) -> Vec<Candidate> {
    let loads: Vec<(&str, u64)> = NAMES
        .iter()
        .map(|&name| (name, if name == busy { 5 } else { 0 }))
        .collect();
    fleet(policy, &loads)
}

/// Routes and returns (worker name, branch).
fn route(
    policy: &CacheAwarePolicy,
    prompt: &str,
    candidates: &[Candidate],
) -> (String, &'static str) {
    let request = RouteRequest {
        prompt,
        ..Default::default()
    };
    let decision = policy.select(&request, candidates).unwrap();
    assert!(policy.branches().contains(&decision.branch));
    let ring = policy.membership.ring();
    (
        ring.name_of(decision.worker).unwrap().to_string(),
        decision.branch,
    )
}

fn conversation(i: usize) -> String {
    format!(
        "conversation {i}: you are assistant number {i}. user: tell me about topic {i} in detail."
    )
}

#[test]
fn replicas_that_saw_different_traffic_place_new_prompts_identically() {
    // The ring and the in-flight bound depend on worker names and loads only; the recent-share
    // bound depends on each replica's own history, so it is off here (tests_keys covers it).
    let a = replica_with(0, Arc::new(DiscardAffinity), without_share_bound());
    let b = replica_with(100, Arc::new(DiscardAffinity), without_share_bound());
    for i in 0..200 {
        route(&a, &conversation(i), &idle_except(&a, &[]));
        route(&b, &conversation(1_000 + i), &idle_except(&b, &[]));
    }
    let mut used = std::collections::HashSet::new();
    for i in 5_000..5_100 {
        let prompt = conversation(i);
        let (on_a, branch_a) = route(&a, &prompt, &idle_except(&a, &[]));
        let (on_b, branch_b) = route(&b, &prompt, &idle_except(&b, &[]));
        assert_eq!((branch_a, branch_b), ("hash_placement", "hash_placement"));
        assert_eq!(on_a, on_b, "replicas disagree on {prompt}");
        used.insert(on_a);
    }
    assert_eq!(used.len(), NAMES.len(), "placement spreads over the fleet");
}

#[test]
fn filtered_holder_migrates_at_once_and_does_not_win_the_prefix_back() {
    let recorder = Arc::new(Recorder::default());
    let policy = replica(0, recorder.clone());
    let mut prompt = conversation(1);
    let (holder, branch) = route(&policy, &prompt, &idle_except(&policy, &[]));
    assert_eq!(branch, "hash_placement");

    prompt.push_str(" assistant: sure.");
    let filtered = idle_except(&policy, &[&holder]);
    let (new_holder, branch) = route(&policy, &prompt, &filtered);
    assert_eq!(branch, "migrated");
    assert_ne!(new_holder, holder);
    assert_eq!(policy.stats().migrations, 1);
    let events = recorder.take();
    assert_eq!(events.len(), 1);
    let event = &events[0];
    assert_eq!(event.reason, AffinityReason::Migration);
    assert_eq!(event.worker, new_holder);
    assert_eq!(event.displaced, vec![holder.clone()]);
    assert_eq!(event.prefix.as_ref(), conversation(1));
    // Keyed by the request's routing key (the whole prompt: shorter than the 256-byte prefix).
    assert_eq!(event.prefix_key, stable_hash(prompt.as_bytes()));

    // The old holder is back, and idler than the new one: the original prefix and the
    // growing conversation both stay where the cache now is.
    assert_eq!(
        route(&policy, &conversation(1), &busy(&policy, &new_holder)),
        (new_holder.clone(), "prefix_hit")
    );
    for turn in 0..3 {
        prompt.push_str(&format!(" user: more {turn}."));
        assert_eq!(
            route(&policy, &prompt, &busy(&policy, &new_holder)),
            (new_holder.clone(), "prefix_hit")
        );
    }
    assert!(recorder.take().is_empty(), "hits announce nothing");

    // Only when the new holder is filtered in turn does the prefix move again.
    prompt.push_str(" user: last one.");
    let (third, branch) = route(&policy, &prompt, &idle_except(&policy, &[&new_holder]));
    assert_eq!(branch, "migrated");
    assert_ne!(third, new_holder);
    assert_eq!(policy.stats().migrations, 2);
    policy.state.lock().tree.check_invariants();
}

#[test]
fn another_replica_applies_migrations_idempotently_and_follows_them() {
    let recorder = Arc::new(Recorder::default());
    let a = replica(0, recorder.clone());
    let b = replica(50, Arc::new(DiscardAffinity));
    let mut prompt = conversation(7);
    // Both replicas placed the conversation by hash, on the same worker.
    let (holder, _) = route(&a, &prompt, &idle_except(&a, &[]));
    assert_eq!(route(&b, &prompt, &idle_except(&b, &[])).0, holder);

    prompt.push_str(" assistant: ok.");
    let (new_holder, _) = route(&a, &prompt, &idle_except(&a, &[&holder]));
    let events = recorder.take();
    assert_eq!(events.len(), 1);

    for _ in 0..2 {
        assert_eq!(b.apply_affinity(&events[0]), AffinityApplied::Applied);
        b.state.lock().tree.check_invariants();
    }
    let bytes_after = b.tree_bytes();
    assert_eq!(b.apply_affinity(&events[0]), AffinityApplied::Applied);
    assert_eq!(
        b.tree_bytes(),
        bytes_after,
        "a repeated event changes nothing"
    );
    assert_eq!(b.stats().affinity_events_applied, 3);

    // B never saw the old holder filtered, yet follows the migration even though the old
    // holder is healthy and idler.
    assert_eq!(
        route(&b, &conversation(7), &busy(&b, &new_holder)),
        (new_holder.clone(), "prefix_hit")
    );
    prompt.push_str(" user: go on.");
    assert_eq!(
        route(&b, &prompt, &busy(&b, &new_holder)),
        (new_holder, "prefix_hit")
    );

    let mut stranger = events[0].clone();
    stranger.worker = "gpu-unknown".into();
    assert_eq!(b.apply_affinity(&stranger), AffinityApplied::UnknownWorker);
    assert_eq!(b.stats().affinity_events_ignored, 1);
}

#[test]
fn load_moves_are_announced_and_followed_by_every_replica() {
    let recorder = Arc::new(Recorder::default());
    // In-flight load moves only: with the share bound on, A's one request to the new worker
    // would already count as above the mean of an otherwise idle replica.
    let a = replica_with(0, recorder.clone(), without_share_bound());
    let b = replica_with(10, Arc::new(DiscardAffinity), without_share_bound());
    let system = format!("SYSTEM: {}", "be precise and cite sources. ".repeat(12));
    assert!(system.len() > 256);
    let tail = |i: usize| format!("user {i}: {}", "question words ".repeat(50));
    let c = replica(20, Arc::new(DiscardAffinity));
    let (owner, branch) = route(&c, &format!("{system}{}", tail(0)), &idle_except(&c, &[]));
    assert_eq!(branch, "hash_placement");

    // The owner is far above the bound (cap = ceil(1.25 × 21 / 4) = 7).
    let loads: Vec<(&str, u64)> = NAMES
        .iter()
        .map(|&name| (name, if name == owner { 20 } else { 0 }))
        .collect();
    let (moved_to, branch) = route(&a, &format!("{system}{}", tail(1)), &fleet(&a, &loads));
    assert_eq!(branch, "load_move");
    assert_ne!(moved_to, owner);
    let events = recorder.take();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, AffinityReason::LoadMove);
    assert_eq!(events[0].prefix.as_ref(), &system[..256]);
    assert!(events[0].displaced.is_empty());
    assert_eq!(
        (a.stats().load_moves, a.stats().placement_overrides),
        (1, 1)
    );

    // Loads are even again. A keeps the block where it moved it, and B follows the event.
    assert_eq!(b.apply_affinity(&events[0]), AffinityApplied::Applied);
    for (policy, i) in [(&a, 2), (&b, 3)] {
        let prompt = format!("{system}{}", tail(i));
        assert_eq!(
            route(policy, &prompt, &idle_except(policy, &[])),
            (moved_to.clone(), "placement_override")
        );
    }
    // Forgetting the worker drops its overrides.
    let moved_id = b.membership.ring().id_of(&moved_to).unwrap();
    b.worker_removed(moved_id);
    assert_eq!(b.stats().placement_overrides, 0);
}

/// A sink that feeds events straight back into the policy that emitted them.
#[derive(Default)]
struct Echo(OnceLock<Weak<CacheAwarePolicy>>);

impl AffinitySink for Echo {
    fn publish(&self, event: AffinityEvent) {
        if let Some(policy) = self.0.get().and_then(Weak::upgrade) {
            assert_eq!(policy.apply_affinity(&event), AffinityApplied::Applied);
        }
    }
}

#[test]
fn a_sink_may_apply_events_back_into_the_emitting_policy() {
    let echo = Arc::new(Echo::default());
    let policy = Arc::new(replica(0, echo.clone()));
    assert!(echo.0.set(Arc::downgrade(&policy)).is_ok());
    let mut prompt = conversation(3);
    let (holder, _) = route(&policy, &prompt, &idle_except(&policy, &[]));
    prompt.push_str(" more.");
    let (new_holder, branch) = route(&policy, &prompt, &idle_except(&policy, &[&holder]));
    assert_eq!(branch, "migrated");
    assert_eq!(policy.stats().affinity_events_applied, 1);
    prompt.push_str(" and more.");
    assert_eq!(
        route(&policy, &prompt, &idle_except(&policy, &[])),
        (new_holder, "prefix_hit")
    );
    policy.state.lock().tree.check_invariants();
}

#[test]
fn mixed_traffic_filtering_events_and_eviction_keep_the_tree_consistent() {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    let recorder = Arc::new(Recorder::default());
    let config = CacheAwareConfig {
        max_tree_bytes: 4_096,
        ..Default::default()
    };
    let ring = ConsistentHashConfig::default();
    let a = CacheAwarePolicy::new(
        config.clone(),
        &ring,
        RoutingKeyConfig::default(),
        frozen_clock(),
        recorder.clone(),
    )
    .unwrap();
    let b = CacheAwarePolicy::new(
        config,
        &ring,
        RoutingKeyConfig::default(),
        frozen_clock(),
        Arc::new(DiscardAffinity),
    )
    .unwrap();
    for (offset, name) in (0u32..).zip(NAMES) {
        a.worker_added(WorkerId(offset), name);
        b.worker_added(WorkerId(30 + offset), name);
    }
    let mut rng = SmallRng::seed_from_u64(17);
    let mut conversations: Vec<String> = (0..12).map(conversation).collect();
    for step in 0..2_000 {
        let which = rng.random_range(0..conversations.len());
        conversations[which].push_str(&format!(" turn {step}."));
        let filtered: Vec<&str> = NAMES
            .iter()
            .copied()
            .filter(|_| rng.random_bool(0.3))
            .collect();
        let candidates = idle_except(&a, &filtered);
        if candidates.is_empty() {
            continue;
        }
        route(&a, &conversations[which], &candidates);
        for event in recorder.take() {
            assert_eq!(b.apply_affinity(&event), AffinityApplied::Applied);
        }
        if step % 250 == 0 {
            a.state.lock().tree.check_invariants();
            b.state.lock().tree.check_invariants();
        }
    }
    a.state.lock().tree.check_invariants();
    b.state.lock().tree.check_invariants();
    let stats = a.stats();
    assert!(stats.migrations > 0, "{stats:?}");
    assert_eq!(
        b.stats().affinity_events_applied,
        stats.migrations + stats.load_moves
    );
}
