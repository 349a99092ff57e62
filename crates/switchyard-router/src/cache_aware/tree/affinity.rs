//! Moving a prefix's affinity: the workers displaced from a prefix stop holding it and
//! everything cached below it, so they cannot win it back when they return.

use super::{LruKey, NodeId, PrefixTree};
use switchyard_core::WorkerId;

impl PrefixTree {
    /// Removes `displaced` from the node ending exactly at `prefix` and from its whole
    /// subtree (splitting an edge if the prefix ends inside it), pruning nodes left without
    /// holders. Does nothing if the tree does not hold all of `prefix`. Idempotent.
    ///
    /// Ancestors keep the displaced workers: they may still cache the shorter shared prefix
    /// (e.g. a system prompt) for other conversations.
    pub(crate) fn displace(&mut self, prefix: &str, displaced: &[WorkerId]) {
        if prefix.is_empty() || displaced.is_empty() {
            return;
        }
        self.walk(prefix.as_bytes());
        let Some(last) = self.path.last().copied() else {
            return;
        };
        if last.matched_end < prefix.len() {
            return;
        }
        let top = if self.nodes[last.node].depth > prefix.len() {
            self.split(last.node, prefix.len())
        } else {
            last.node
        };
        let mut subtree: Vec<NodeId> = vec![top];
        let mut next = 0;
        while let Some(&node) = subtree.get(next) {
            subtree.extend(self.nodes[node].children.iter().map(|&(_, child)| child));
            next += 1;
        }
        for &node in &subtree {
            let entry = &mut self.nodes[node];
            let depth = entry.depth;
            let mut removed = Vec::new();
            entry.holders.retain(|holder| {
                let drop = displaced.contains(&holder.worker);
                if drop {
                    removed.push(*holder);
                }
                !drop
            });
            for holder in removed {
                self.lru.remove(&LruKey::new(holder, node, depth));
            }
        }
        // Holders of a child are a subset of its parent's, so emptied nodes form whole
        // subtrees: unlink each one's top (its parent still has holders), free them all.
        for &node in &subtree {
            if !self.nodes[node].holders.is_empty() {
                continue;
            }
            let parent = self.nodes[node].parent;
            if !self.nodes[parent].holders.is_empty() || parent == super::ROOT {
                self.unlink(node);
            }
        }
        for node in subtree {
            if self.nodes[node].live && self.nodes[node].holders.is_empty() {
                self.release(node);
            }
        }
    }
}
