use super::*;

fn workers(loads: &[(u32, u64)]) -> Vec<Candidate> {
    loads
        .iter()
        .map(|&(id, in_flight)| Candidate {
            id: WorkerId(id),
            in_flight,
            reported: None,
        })
        .collect()
}

fn idle(ids: &[u32]) -> Vec<Candidate> {
    workers(&ids.iter().map(|&id| (id, 0)).collect::<Vec<_>>())
}

fn route(policy: &CacheAwarePolicy, prompt: &str, candidates: &[Candidate]) -> Decision {
    let request = RouteRequest {
        prompt,
        ..Default::default()
    };
    let decision = policy.select(&request, candidates).unwrap();
    assert!(policy.branches().contains(&decision.branch));
    assert!(candidates.iter().any(|c| c.id == decision.worker));
    decision
}

fn policy() -> CacheAwarePolicy {
    policy_with(CacheAwareConfig::default())
}

/// A policy that was told about no workers: placement falls back to least loaded, which is
/// what these tests pin down (tests_affinity covers the ring).
fn policy_with(config: CacheAwareConfig) -> CacheAwarePolicy {
    CacheAwarePolicy::new(
        config,
        &crate::ConsistentHashConfig::default(),
        crate::RoutingKeyConfig::default(),
        switchyard_core::WallClock::system(),
        std::sync::Arc::new(crate::DiscardAffinity),
    )
    .unwrap()
}

const SYSTEM_A: &str = "You are a helpful travel assistant. Answer concisely. ";
const SYSTEM_B: &str = "You are a code reviewer. Point out bugs first, then style. ";

#[test]
fn multi_turn_conversation_stays_on_its_worker_while_another_goes_elsewhere() {
    let policy = policy();
    let fleet = idle(&[0, 1, 2, 3]);
    let mut conversation_a = format!("{SYSTEM_A}user: plan a trip to Kyoto.");
    let first = route(&policy, &conversation_a, &fleet);
    assert_eq!(first.branch, "least_loaded");
    assert_eq!(first.prefix_match, None);

    let mut conversation_b = format!("{SYSTEM_B}user: review this diff.");
    let other = route(&policy, &conversation_b, &fleet);
    assert_eq!(other.branch, "least_loaded");
    assert_ne!(
        other.worker, first.worker,
        "idle ties rotate to another worker"
    );

    for turn in [
        "assistant: day one, temples.",
        "user: and food?",
        "assistant: ramen.",
    ] {
        conversation_a.push_str(turn);
        conversation_b.push_str(turn);
        let next_a = route(&policy, &conversation_a, &fleet);
        assert_eq!((next_a.worker, next_a.branch), (first.worker, "prefix_hit"));
        let matched = next_a.prefix_match.unwrap();
        assert_eq!(matched.holder, first.worker);
        assert!(matched.holder_is_candidate);
        assert!(matched.matched_ratio > 0.5 && matched.matched_ratio < 1.0);
        let next_b = route(&policy, &conversation_b, &fleet);
        assert_eq!((next_b.worker, next_b.branch), (other.worker, "prefix_hit"));
    }
}

#[test]
fn prefix_hit_prefers_the_holder_even_when_it_is_somewhat_busier() {
    let policy = policy();
    let prompt = format!("{SYSTEM_A}user: hello");
    route(&policy, &prompt, &idle(&[0]));
    let decision = route(&policy, &prompt, &workers(&[(0, 20), (1, 0)]));
    assert_eq!(
        (decision.worker, decision.branch),
        (WorkerId(0), "prefix_hit")
    );
}

#[test]
fn several_holders_at_the_best_depth_pick_the_least_busy() {
    let policy = policy();
    let prompt = format!("{SYSTEM_A}user: hello");
    route(&policy, &prompt, &idle(&[0]));
    route(&policy, &prompt, &idle(&[1]));
    let decision = route(&policy, &prompt, &workers(&[(0, 9), (1, 4), (2, 0)]));
    assert_eq!(
        (decision.worker, decision.branch),
        (WorkerId(1), "prefix_hit")
    );
}

#[test]
fn match_below_threshold_goes_least_loaded_but_is_still_reported() {
    let policy = policy();
    route(
        &policy,
        &format!("{SYSTEM_A}user: a long question"),
        &idle(&[0]),
    );
    let prompt = format!(
        "{SYSTEM_A}{}",
        "an entirely different and much longer tail. ".repeat(4)
    );
    let decision = route(&policy, &prompt, &workers(&[(0, 5), (1, 2), (2, 3)]));
    assert_eq!(
        (decision.worker, decision.branch),
        (WorkerId(1), "least_loaded")
    );
    let matched = decision.prefix_match.unwrap();
    assert_eq!(matched.holder, WorkerId(0));
    assert!(matched.holder_is_candidate);
    let expected = SYSTEM_A.len() as f32 / prompt.len() as f32;
    assert!((matched.matched_ratio - expected).abs() < 1e-6);
}

#[test]
fn filtered_holder_is_reported_and_the_affinity_moves_to_the_new_worker() {
    let policy = policy();
    let mut prompt = format!("{SYSTEM_B}user: review my parser");
    route(&policy, &prompt, &idle(&[0, 1, 2]));
    let holder = route(&policy, &prompt, &idle(&[0, 1, 2])).worker;

    prompt.push_str(" assistant: looks fine.");
    let survivors: Vec<u32> = (0..3).filter(|&id| WorkerId(id) != holder).collect();
    let fallback = route(&policy, &prompt, &idle(&survivors));
    assert_ne!(fallback.worker, holder);
    assert_eq!(fallback.branch, "migrated");
    let matched = fallback.prefix_match.unwrap();
    assert_eq!(matched.holder, holder);
    assert!(!matched.holder_is_candidate);
    assert!(matched.matched_ratio > 0.5);

    // The holder is back, but the fallback worker now has the longer prefix.
    prompt.push_str(" user: thanks");
    let next = route(&policy, &prompt, &idle(&[0, 1, 2]));
    assert_eq!((next.worker, next.branch), (fallback.worker, "prefix_hit"));
}

#[test]
fn imbalance_guard_overrides_the_cache() {
    let policy = policy();
    let prompt = format!("{SYSTEM_A}user: hello");
    route(&policy, &prompt, &idle(&[0]));
    // Spread 90 > 32 and 100 > 10 × 1.5.
    let decision = route(&policy, &prompt, &workers(&[(0, 100), (1, 10), (2, 40)]));
    assert_eq!(
        (decision.worker, decision.branch),
        (WorkerId(1), "imbalanced")
    );
    assert_eq!(decision.prefix_match.map(|m| m.holder), Some(WorkerId(0)));
    // Spread 30 is within the absolute threshold: affinity wins again.
    let decision = route(&policy, &prompt, &workers(&[(0, 40), (1, 10)]));
    assert_eq!(decision.branch, "prefix_hit");
}

#[test]
fn removed_worker_is_forgotten() {
    let policy = policy();
    let prompt = format!("{SYSTEM_A}user: hello");
    route(&policy, &prompt, &idle(&[0]));
    assert!(policy.tree_bytes() > 0);
    policy.worker_removed(WorkerId(0));
    assert_eq!(policy.tree_bytes(), 0);
    // Worker 0 is still offered (a new incarnation would have a new id anyway): no match.
    let decision = route(&policy, &prompt, &workers(&[(0, 0), (1, 1)]));
    assert_eq!(decision.prefix_match, None);
    assert_eq!(decision.branch, "least_loaded");
}

#[test]
fn tree_stays_within_its_byte_bound_and_evicts_the_oldest_conversation() {
    let config = CacheAwareConfig {
        max_tree_bytes: 100,
        ..Default::default()
    };
    let policy = policy_with(config);
    let [a, b, c] = ["a", "b", "c"].map(|letter| letter.repeat(40));
    route(&policy, &a, &idle(&[0]));
    route(&policy, &b, &idle(&[1]));
    route(&policy, &a, &idle(&[0])); // b becomes the least recently used
    route(&policy, &c, &idle(&[2]));
    assert!(policy.tree_bytes() <= 100);
    let fleet = idle(&[0, 1, 2]);
    assert_eq!(
        route(&policy, &a, &fleet).prefix_match.map(|m| m.holder),
        Some(WorkerId(0))
    );
    assert_eq!(
        route(&policy, &c, &fleet).prefix_match.map(|m| m.holder),
        Some(WorkerId(2))
    );
    assert_eq!(route(&policy, &b, &fleet).prefix_match, None);
    assert!(policy.tree_bytes() <= 100);
}

#[test]
fn empty_and_short_prompts_go_least_loaded_without_touching_the_tree() {
    let config = CacheAwareConfig {
        min_prompt_bytes: 8,
        ..Default::default()
    };
    let policy = policy_with(config);
    let fleet = workers(&[(0, 3), (1, 1)]);
    for prompt in ["", "short"] {
        let decision = route(&policy, prompt, &fleet);
        assert_eq!(
            (decision.worker, decision.branch),
            (WorkerId(1), "least_loaded")
        );
    }
    assert_eq!(policy.tree_bytes(), 0);
    let request = RouteRequest {
        prompt: "anything",
        ..Default::default()
    };
    assert_eq!(policy.select(&request, &[]), None);
}

#[test]
fn ratio_never_counts_half_a_character() {
    let policy = policy();
    route(&policy, "abc\u{e9}", &idle(&[0])); // é = C3 A9
    let decision = route(&policy, "abc\u{e8}", &idle(&[1])); // è = C3 A8
    let matched = decision.prefix_match.unwrap();
    assert_eq!(matched.matched_ratio, 3.0 / 5.0);
    assert!(!matched.holder_is_candidate);
}

#[test]
fn concurrent_selects_keep_the_tree_consistent() {
    let config = CacheAwareConfig {
        max_tree_bytes: 4096,
        ..Default::default()
    };
    let policy = policy_with(config);
    let fleet = idle(&[0, 1, 2, 3]);
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let (policy, fleet) = (&policy, &fleet);
            scope.spawn(move || {
                for i in 0..300 {
                    let prompt = format!("{SYSTEM_A}session {} turn {i}", (thread * 7 + i) % 13);
                    route(policy, &prompt, fleet);
                }
            });
        }
    });
    policy.state.lock().tree.check_invariants();
    assert!(policy.tree_bytes() <= 4096);
}
