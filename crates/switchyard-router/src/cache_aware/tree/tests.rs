use super::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;

impl PrefixTree {
    /// Panics if any structural invariant from the module docs is broken.
    pub(crate) fn check_invariants(&self) {
        let mut holder_entries = 0;
        let mut text = 0;
        for (id, node) in self.nodes.iter().enumerate().skip(1) {
            if !node.live {
                assert!(
                    self.free.contains(&id),
                    "dead node {id} not on the free list"
                );
                continue;
            }
            let parent = &self.nodes[node.parent];
            assert!(parent.live, "node {id} hangs off a dead parent");
            assert!(!node.edge.is_empty(), "node {id} has an empty edge");
            assert_eq!(node.depth, parent.depth + node.edge.len(), "depth of {id}");
            assert!(
                parent.children.contains(&(node.edge[0], id)),
                "{id} unlinked"
            );
            assert!(!node.holders.is_empty(), "node {id} has no holders");
            assert!(node.holders.windows(2).all(|w| w[0].worker < w[1].worker));
            assert!(node.children.windows(2).all(|w| w[0].0 < w[1].0));
            for holder in &node.holders {
                assert!(self.lru.contains(&LruKey::new(*holder, id, node.depth)));
                if node.parent != ROOT {
                    let above = parent.holders.iter().find(|h| h.worker == holder.worker);
                    let above = above.unwrap_or_else(|| panic!("{id}: holder not in parent"));
                    assert!(above.last_used >= holder.last_used, "{id}: parent older");
                }
            }
            holder_entries += node.holders.len();
            text += node.edge.len();
        }
        assert_eq!(self.lru.len(), holder_entries, "LRU keys vs holder entries");
        assert_eq!(self.text_bytes, text, "byte accounting");
        assert!(self.text_bytes <= self.max_text_bytes, "byte bound");
    }

    /// Test shorthand: cache `prompt` on `worker`.
    fn record(&mut self, prompt: &str, worker: u32) {
        self.lookup(prompt).insert(WorkerId(worker));
    }

    /// Test shorthand: (matched bytes, holders) of the longest cached prefix.
    fn longest_of(&mut self, prompt: &str) -> Option<(usize, Vec<u32>)> {
        let lookup = self.lookup(prompt);
        let (len, holders) = lookup.longest()?;
        Some((len, holders.iter().map(|h| h.worker.0).collect()))
    }
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

#[test]
fn common_prefix_len_agrees_with_bytewise_comparison_across_block_edges() {
    let base: Vec<u8> = (0..100u8).collect();
    for cut in [0, 1, 15, 16, 17, 31, 32, 33, 99] {
        let mut other = base.clone();
        other[cut] ^= 0xff;
        assert_eq!(common_prefix_len(&base, &other), cut);
    }
    assert_eq!(common_prefix_len(&base, &base[..40]), 40);
    assert_eq!(common_prefix_len(&[], &base), 0);
}

#[test]
fn shared_prefix_is_split_and_held_by_both_workers() {
    let mut tree = PrefixTree::new(1 << 20);
    tree.record("system: be brief. user: hi", 1);
    tree.record("system: be brief. user: bye", 2);
    tree.check_invariants();
    assert_eq!(
        tree.longest_of("system: be brief. user: hi"),
        Some((26, vec![1]))
    );
    assert_eq!(
        tree.longest_of("system: be brief. user: ok"),
        Some((24, vec![1, 2]))
    );
    assert_eq!(tree.longest_of("system: be"), Some((10, vec![1, 2])));
    assert_eq!(tree.longest_of("unrelated"), None);
    // Shared prefix stored once: 24 + "hi".len() + "bye".len().
    assert_eq!(tree.text_bytes(), 24 + 2 + 3);
}

/// Test shorthand: (matched bytes, holders) of the longest prefix `prompt` continues.
fn continuation_of(tree: &mut PrefixTree, prompt: &str) -> Option<(usize, Vec<u32>)> {
    let lookup = tree.lookup(prompt);
    let (len, holders) = lookup.longest_continuation_held_by(|_| true)?;
    Some((len, holders.iter().map(|h| h.worker.0).collect()))
}

#[test]
fn only_a_whole_earlier_prompt_counts_as_continued() {
    let mut tree = PrefixTree::new(1 << 20);
    let system = "system: be brief. ";
    let first_turn = format!("{system}user: hi");
    tree.record(&first_turn, 1);
    tree.record(&format!("{system}user: bye"), 2);
    // The next turn of worker 1's conversation continues it; both workers share the system
    // prompt, but a new conversation continues nothing.
    let next_turn = format!("{first_turn} assistant: hello user: more");
    assert_eq!(
        continuation_of(&mut tree, &next_turn),
        Some((first_turn.len(), vec![1]))
    );
    let new_conversation = format!("{system}user: something else");
    assert_eq!(continuation_of(&mut tree, &new_conversation), None);
    assert_eq!(
        tree.longest_of(&new_conversation),
        Some((system.len() + "user: ".len(), vec![1, 2])),
        "the shared beginning is still reported as a cache match"
    );
    // A conversation that grows by extending its leaf still ends where its last prompt did.
    tree.record(&next_turn, 1);
    let third_turn = format!("{next_turn} assistant: ok user: go");
    assert_eq!(
        continuation_of(&mut tree, &third_turn),
        Some((next_turn.len(), vec![1]))
    );
    // Once someone sent the system prompt alone, prompts continue it.
    tree.record(system, 3);
    assert_eq!(
        continuation_of(&mut tree, &new_conversation),
        Some((system.len(), vec![1, 2, 3]))
    );
    tree.check_invariants();
}

#[test]
fn growing_conversation_on_one_worker_keeps_a_single_leaf() {
    let mut tree = PrefixTree::new(1 << 20);
    let mut prompt = String::from("system prompt.");
    for turn in 0..20 {
        prompt.push_str(&format!(" turn {turn}"));
        tree.record(&prompt, 4);
    }
    tree.check_invariants();
    assert_eq!(
        tree.nodes.iter().filter(|n| n.live).count(),
        2,
        "root + one leaf"
    );
    assert_eq!(tree.text_bytes(), prompt.len());
}

#[test]
fn match_ending_inside_a_character_counts_whole_characters_only() {
    let mut tree = PrefixTree::new(1 << 20);
    tree.record("caf\u{e9}!", 1); // é = C3 A9
    // è = C3 A8: the bytes agree on C3, but the character differs.
    assert_eq!(tree.longest_of("caf\u{e8}!"), Some((3, vec![1])));
    assert_eq!(tree.longest_of("\u{e8}"), None);
}

#[test]
fn eviction_keeps_the_bound_and_takes_the_least_recently_used_leaf_first() {
    let mut tree = PrefixTree::new(100);
    let shared = "s".repeat(20);
    let (a, b, c) = (
        format!("{shared}{}", "a".repeat(30)),
        format!("{shared}{}", "b".repeat(30)),
        format!("{shared}{}", "c".repeat(30)),
    );
    tree.record(&a, 1);
    tree.record(&b, 2);
    tree.record(&a, 1); // a is now more recent than b
    assert_eq!(tree.text_bytes(), 80);
    tree.record(&c, 3); // 110 bytes: one 30-byte tail must go
    tree.check_invariants();
    assert_eq!(tree.text_bytes(), 80);
    assert_eq!(
        tree.longest_of(&b),
        Some((20, vec![1, 2, 3])),
        "only b's tail evicted"
    );
    assert_eq!(tree.longest_of(&a).map(|m| m.0), Some(50));
    assert_eq!(tree.longest_of(&c).map(|m| m.0), Some(50));
}

#[test]
fn a_prompt_larger_than_the_bound_is_not_kept() {
    let mut tree = PrefixTree::new(10);
    tree.record(&"x".repeat(11), 1);
    tree.check_invariants();
    assert_eq!(tree.text_bytes(), 0);
}

#[test]
fn removing_a_worker_prunes_what_only_it_held() {
    let mut tree = PrefixTree::new(1 << 20);
    tree.record("shared head, tail one", 1);
    tree.record("shared head, tail two", 2);
    tree.record("other", 1);
    tree.remove_worker(WorkerId(1));
    tree.check_invariants();
    assert_eq!(tree.longest_of("other"), None);
    assert_eq!(
        tree.longest_of("shared head, tail one"),
        Some((18, vec![2]))
    );
    assert_eq!(tree.text_bytes(), "shared head, tail two".len());
    tree.remove_worker(WorkerId(2));
    tree.check_invariants();
    assert_eq!(tree.text_bytes(), 0);
    assert_eq!(tree.nodes.iter().filter(|n| n.live).count(), 1);
}

fn random_prompt(rng: &mut SmallRng) -> String {
    let len = rng.random_range(0..24);
    (0..len)
        .map(|_| ['a', 'b', 'c'][rng.random_range(0..3)])
        .collect()
}

/// The tree must answer exactly like a brute-force scan over everything still cached.
#[test]
fn lookups_match_brute_force_longest_common_prefix() {
    for seed in 0..20 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut tree = PrefixTree::new(usize::MAX);
        let mut cached: Vec<(String, u32)> = Vec::new();
        for _ in 0..400 {
            let prompt = random_prompt(&mut rng);
            match rng.random_range(0..10) {
                0 => {
                    let gone = rng.random_range(0..5);
                    tree.remove_worker(WorkerId(gone));
                    cached.retain(|(_, worker)| *worker != gone);
                }
                1..=4 => {
                    let worker = rng.random_range(0..5);
                    tree.record(&prompt, worker);
                    cached.push((prompt, worker));
                }
                _ => {
                    let allowed: BTreeSet<u32> = (0..5).filter(|_| rng.random_bool(0.5)).collect();
                    check_against_brute_force(&mut tree, &cached, &prompt, &allowed);
                }
            }
        }
        tree.check_invariants();
    }
}

fn check_against_brute_force(
    tree: &mut PrefixTree,
    cached: &[(String, u32)],
    prompt: &str,
    allowed: &BTreeSet<u32>,
) {
    let best_len = |only_allowed: bool| {
        cached
            .iter()
            .filter(|(_, worker)| !only_allowed || allowed.contains(worker))
            .map(|(text, _)| common_prefix(text, prompt))
            .max()
            .filter(|&len| len > 0)
    };
    let holders_at = |len: usize| -> BTreeSet<u32> {
        cached
            .iter()
            .filter(|(text, _)| common_prefix(text, prompt) >= len)
            .map(|(_, worker)| *worker)
            .collect()
    };
    let lookup = tree.lookup(prompt);
    let any = lookup.longest();
    assert_eq!(
        any.map(|(len, _)| len),
        best_len(false),
        "prompt {prompt:?}"
    );
    if let Some((len, holders)) = any {
        let got: BTreeSet<u32> = holders.iter().map(|h| h.worker.0).collect();
        assert_eq!(got, holders_at(len), "holders for {prompt:?}");
    }
    let restricted = lookup.longest_held_by(|w| allowed.contains(&w.0));
    assert_eq!(
        restricted.map(|(len, _)| len),
        best_len(true),
        "prompt {prompt:?} restricted to {allowed:?}"
    );
}

#[test]
fn random_workload_under_a_tight_bound_keeps_every_invariant() {
    let mut rng = SmallRng::seed_from_u64(7);
    let mut tree = PrefixTree::new(120);
    for step in 0..3000 {
        let prompt = random_prompt(&mut rng);
        if step % 97 == 0 {
            tree.remove_worker(WorkerId(rng.random_range(0..4)));
        } else {
            tree.record(&prompt, rng.random_range(0..4));
        }
        if step % 50 == 0 {
            tree.check_invariants();
        }
    }
    tree.check_invariants();
    assert!(tree.text_bytes() > 0);
}

#[test]
fn displace_drops_workers_below_a_prefix_but_not_above_it() {
    let mut tree = PrefixTree::new(1 << 20);
    let (hi, bye) = ("system: be brief. user: hi", "system: be brief. user: bye");
    tree.record(hi, 1);
    tree.record(bye, 1);
    tree.record(hi, 2);
    // "…user: h" ends inside the "hi" edge: the edge is split there.
    tree.displace("system: be brief. user: h", &[WorkerId(1)]);
    tree.check_invariants();
    assert_eq!(tree.longest_of(hi), Some((26, vec![2])));
    // Worker 1 keeps the shared system prompt and its other conversation.
    assert_eq!(tree.longest_of(bye), Some((27, vec![1])));
    assert_eq!(
        tree.longest_of("system: be brief. user: "),
        Some((24, vec![1, 2]))
    );
    let bytes = tree.text_bytes();
    // Idempotent, and a prefix the tree does not hold changes nothing.
    tree.displace("system: be brief. user: h", &[WorkerId(1)]);
    tree.displace("system: be brief. user: hello there", &[WorkerId(2)]);
    tree.displace("unrelated", &[WorkerId(1)]);
    assert_eq!(tree.text_bytes(), bytes);
    // Displacing a conversation's only holder prunes it.
    tree.displace(bye, &[WorkerId(1)]);
    tree.check_invariants();
    assert_eq!(tree.text_bytes(), bytes - "bye".len());
    assert_eq!(tree.longest_of(bye), Some((24, vec![1, 2])));
}
