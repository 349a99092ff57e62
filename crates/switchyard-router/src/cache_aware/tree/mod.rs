//! A radix tree (compressed edges) over prompt bytes that remembers which workers cached
//! which prefixes, and when each last used it (a logical tick, so behaviour is deterministic).
//!
//! Invariants (verified by `check_invariants` in the tests):
//! - every non-root node has at least one holder, and its holders are a subset of its parent's;
//! - for one worker, a node's `last_used` is never newer than its parent's (inserts stamp the
//!   whole path with one tick; splits copy stamps);
//! - `lru` holds exactly one key per (node, holder), and `text_bytes` sums the live edges.
//!
//! A node also remembers whether some inserted prompt ended exactly at its end: a prompt that
//! runs through such a point *continues* an earlier one (the next turn of a conversation),
//! while a match ending anywhere else only *shares a beginning* (a common system prompt).
//!
//! Together these make the smallest LRU key (oldest, then deepest) a leaf for its worker, so
//! eviction pops keys in O(log n) each instead of searching the tree for leaves.

mod affinity;
mod eviction;
#[cfg(test)]
mod tests;

use std::cmp::Reverse;
use std::collections::BTreeSet;
use switchyard_core::WorkerId;

type NodeId = usize;
const ROOT: NodeId = 0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Holder {
    pub(crate) worker: WorkerId,
    /// Tick of the last insert through this node for this worker.
    pub(crate) last_used: u64,
}

#[derive(Debug, Default)]
struct Node {
    edge: Box<[u8]>,
    /// Prompt bytes from the root to the end of `edge`.
    depth: usize,
    parent: NodeId,
    /// Sorted by the child's first edge byte, which is unique among siblings.
    children: Vec<(u8, NodeId)>,
    /// Sorted by worker.
    holders: Vec<Holder>,
    /// Some inserted prompt ended exactly at the end of this node's edge.
    ends_prompt: bool,
    live: bool,
}

/// Eviction order: oldest first; at equal age the deeper node first, so a parent stamped by
/// the same insert as its child outlives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct LruKey {
    last_used: u64,
    deeper_first: Reverse<usize>,
    node: NodeId,
    worker: WorkerId,
}

impl LruKey {
    fn new(holder: Holder, node: NodeId, depth: usize) -> Self {
        Self {
            last_used: holder.last_used,
            deeper_first: Reverse(depth),
            node,
            worker: holder.worker,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Step {
    node: NodeId,
    /// Prompt bytes matched once this node's edge, or a prefix of it, is consumed.
    matched_end: usize,
}

#[derive(Debug)]
pub(crate) struct PrefixTree {
    nodes: Vec<Node>,
    free: Vec<NodeId>,
    lru: BTreeSet<LruKey>,
    text_bytes: usize,
    max_text_bytes: usize,
    tick: u64,
    /// Path of the current lookup; reused so lookups do not allocate.
    path: Vec<Step>,
}

/// The result of walking one prompt down the tree. Inserting consumes it, so the path it
/// recorded cannot go stale in between.
pub(crate) struct Lookup<'t, 'p> {
    tree: &'t mut PrefixTree,
    prompt: &'p str,
}

impl PrefixTree {
    pub(crate) fn new(max_text_bytes: usize) -> Self {
        let root = Node {
            live: true,
            ..Node::default()
        };
        Self {
            nodes: vec![root],
            free: Vec::new(),
            lru: BTreeSet::new(),
            text_bytes: 0,
            max_text_bytes,
            tick: 0,
            path: Vec::new(),
        }
    }

    /// Prompt bytes stored in edges.
    pub(crate) fn text_bytes(&self) -> usize {
        self.text_bytes
    }

    pub(crate) fn lookup<'t, 'p>(&'t mut self, prompt: &'p str) -> Lookup<'t, 'p> {
        self.walk(prompt.as_bytes());
        Lookup { tree: self, prompt }
    }

    fn walk(&mut self, prompt: &[u8]) {
        self.path.clear();
        let mut node = ROOT;
        let mut matched = 0;
        while let Some(&next_byte) = prompt.get(matched) {
            let Some(child) = self.child(node, next_byte) else {
                break;
            };
            let edge = &self.nodes[child].edge;
            let common = common_prefix_len(edge, &prompt[matched..]);
            matched += common;
            self.path.push(Step {
                node: child,
                matched_end: matched,
            });
            if common < edge.len() {
                break;
            }
            node = child;
        }
    }

    fn child(&self, node: NodeId, first_byte: u8) -> Option<NodeId> {
        let children = &self.nodes[node].children;
        let index = children
            .binary_search_by_key(&first_byte, |&(byte, _)| byte)
            .ok()?;
        children.get(index).map(|&(_, child)| child)
    }

    fn insert_along_path(&mut self, prompt: &[u8], worker: WorkerId) {
        self.tick += 1;
        let tick = self.tick;
        let mut tip = ROOT;
        let mut matched = 0;
        for index in 0..self.path.len() {
            let Step { node, matched_end } = self.path[index];
            // Only the last step can end inside an edge.
            tip = if matched_end < self.nodes[node].depth {
                self.split(node, matched_end)
            } else {
                node
            };
            self.touch(tip, worker, tick);
            matched = matched_end;
        }
        if let Some(rest) = prompt.get(matched..).filter(|rest| !rest.is_empty()) {
            tip = self.append(tip, rest, worker, tick);
        }
        if tip != ROOT {
            self.nodes[tip].ends_prompt = true;
        }
    }

    /// Cuts `node`'s edge so that a new node ends exactly at `at_depth`; returns the new node.
    fn split(&mut self, node: NodeId, at_depth: usize) -> NodeId {
        let lower = &self.nodes[node];
        let upper_len = at_depth - (lower.depth - lower.edge.len());
        let upper_edge: Box<[u8]> = lower.edge[..upper_len].into();
        let lower_edge: Box<[u8]> = lower.edge[upper_len..].into();
        let upper = Node {
            edge: upper_edge,
            depth: at_depth,
            parent: lower.parent,
            children: vec![(lower_edge[0], node)],
            holders: lower.holders.clone(),
            ends_prompt: false,
            live: true,
        };
        let grandparent = lower.parent;
        let upper = self.allocate(upper);
        for &holder in &self.nodes[upper].holders {
            self.lru.insert(LruKey::new(holder, upper, at_depth));
        }
        let lower = &mut self.nodes[node];
        lower.edge = lower_edge;
        lower.parent = upper;
        if let Some(entry) = self.nodes[grandparent]
            .children
            .iter_mut()
            .find(|(_, child)| *child == node)
        {
            entry.1 = upper;
        }
        upper
    }

    fn touch(&mut self, node: NodeId, worker: WorkerId, tick: u64) {
        let target = &mut self.nodes[node];
        let depth = target.depth;
        match target.holders.binary_search_by_key(&worker, |h| h.worker) {
            Ok(index) => {
                let holder = &mut target.holders[index];
                self.lru.remove(&LruKey::new(*holder, node, depth));
                holder.last_used = tick;
            }
            Err(index) => target.holders.insert(
                index,
                Holder {
                    worker,
                    last_used: tick,
                },
            ),
        }
        let stamped = Holder {
            worker,
            last_used: tick,
        };
        self.lru.insert(LruKey::new(stamped, node, depth));
    }

    /// Stores the unmatched tail of a prompt below `tip` (already stamped with `tick`);
    /// returns the node that now ends at the prompt's end.
    fn append(&mut self, tip: NodeId, rest: &[u8], worker: WorkerId, tick: u64) -> NodeId {
        self.text_bytes += rest.len();
        let stamped = Holder {
            worker,
            last_used: tick,
        };
        let parent = &self.nodes[tip];
        let sole_holder_leaf = tip != ROOT
            && parent.children.is_empty()
            && matches!(parent.holders.as_slice(), [only] if only.worker == worker);
        if sole_holder_leaf {
            // A conversation growing turn by turn on one worker lengthens its leaf instead of
            // adding a node per turn, which keeps paths (and lookups) short.
            self.lru.remove(&LruKey::new(stamped, tip, parent.depth));
            let leaf = &mut self.nodes[tip];
            leaf.edge = [&leaf.edge[..], rest].concat().into_boxed_slice();
            leaf.depth += rest.len();
            self.lru.insert(LruKey::new(stamped, tip, leaf.depth));
            return tip;
        }
        let depth = parent.depth + rest.len();
        let leaf = self.allocate(Node {
            edge: rest.into(),
            depth,
            parent: tip,
            children: Vec::new(),
            holders: vec![stamped],
            ends_prompt: false,
            live: true,
        });
        self.lru.insert(LruKey::new(stamped, leaf, depth));
        let children = &mut self.nodes[tip].children;
        let position = children.partition_point(|&(byte, _)| byte < rest[0]);
        children.insert(position, (rest[0], leaf));
        leaf
    }

    fn allocate(&mut self, node: Node) -> NodeId {
        match self.free.pop() {
            Some(slot) => {
                self.nodes[slot] = node;
                slot
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        }
    }
}

impl Lookup<'_, '_> {
    /// The longest prompt prefix any worker holds: its length in bytes (cut back to a
    /// character boundary) and the holders of exactly that prefix.
    pub(crate) fn longest(&self) -> Option<(usize, &[Holder])> {
        self.longest_held_by(|_| true)
    }

    /// Like [`Self::longest`], but only counting prefixes held by a worker `held` accepts.
    /// The holders returned still include workers `held` rejects.
    pub(crate) fn longest_held_by(
        &self,
        mut held: impl FnMut(WorkerId) -> bool,
    ) -> Option<(usize, &[Holder])> {
        self.tree.path.iter().rev().find_map(|step| {
            let holders = &self.tree.nodes[step.node].holders;
            if !holders.iter().any(|holder| held(holder.worker)) {
                return None;
            }
            let len = floor_char_boundary(self.prompt, step.matched_end);
            (len > 0).then_some((len, holders.as_slice()))
        })
    }

    /// Like [`Self::longest_held_by`], but only counting prefixes that end exactly where an
    /// earlier whole prompt ended, i.e. this prompt continues that one.
    pub(crate) fn longest_continuation_held_by(
        &self,
        mut held: impl FnMut(WorkerId) -> bool,
    ) -> Option<(usize, &[Holder])> {
        self.tree.path.iter().rev().find_map(|step| {
            let node = &self.tree.nodes[step.node];
            let whole_prompt = node.ends_prompt && step.matched_end == node.depth;
            if !whole_prompt || !node.holders.iter().any(|holder| held(holder.worker)) {
                return None;
            }
            let len = floor_char_boundary(self.prompt, step.matched_end);
            (len > 0).then_some((len, node.holders.as_slice()))
        })
    }

    /// Records that `worker` now caches the whole prompt, then evicts back under the bound.
    pub(crate) fn insert(self, worker: WorkerId) {
        let Lookup { tree, prompt } = self;
        tree.insert_along_path(prompt.as_bytes(), worker);
        tree.evict_to_bound();
    }
}

/// Length of the common prefix, compared 16 bytes per step as integers (the first differing
/// byte falls out of the XOR), since long shared system prompts dominate the walk.
fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    const WORD: usize = 16;
    let len = a.len().min(b.len());
    let (a, b) = (&a[..len], &b[..len]);
    let mut same = 0;
    for (x, y) in a.chunks_exact(WORD).zip(b.chunks_exact(WORD)) {
        let difference = le_word(x) ^ le_word(y);
        if difference != 0 {
            // Little-endian: the lowest set bit belongs to the first differing byte.
            return same + (difference.trailing_zeros() / 8) as usize;
        }
        same += WORD;
    }
    same + a[same..]
        .iter()
        .zip(&b[same..])
        .take_while(|(x, y)| x == y)
        .count()
}

fn le_word(bytes: &[u8]) -> u128 {
    // `chunks_exact` guarantees 16 bytes, so the fallback is never taken.
    u128::from_le_bytes(bytes.try_into().unwrap_or_default())
}

/// A byte-level match may end inside a multi-byte character; only whole characters count.
fn floor_char_boundary(text: &str, index: usize) -> usize {
    (0..=index.min(text.len()))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}
