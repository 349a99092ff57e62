//! Forgetting: LRU eviction under the byte bound, and dropping a departed worker.

use super::{LruKey, NodeId, PrefixTree, ROOT};
use switchyard_core::WorkerId;

impl PrefixTree {
    /// Evicts least-recently-used (node, worker) leaves until the text fits the bound.
    ///
    /// Each pop is O(log n) and removes a key some insert created, so eviction costs
    /// amortised O(log n) per insert, with no full-tree scans. Evicting only down to the
    /// bound (rather than to a low-water mark) spreads that cost evenly over requests
    /// instead of stalling one request behind a large batch.
    pub(super) fn evict_to_bound(&mut self) {
        while self.text_bytes > self.max_text_bytes {
            let Some(oldest) = self.lru.pop_first() else {
                debug_assert!(false, "text bytes without LRU entries");
                tracing::error!(
                    text_bytes = self.text_bytes,
                    "prefix tree byte count has no LRU entries behind it"
                );
                break;
            };
            let node = &mut self.nodes[oldest.node];
            if let Ok(index) = node
                .holders
                .binary_search_by_key(&oldest.worker, |h| h.worker)
            {
                node.holders.remove(index);
            }
            // Holders of a child are a subset of its parent's: no holders means no children.
            if node.holders.is_empty() {
                self.unlink(oldest.node);
                self.release(oldest.node);
            }
        }
    }

    /// Drops `worker` from every node and prunes the nodes nobody holds any more. O(tree),
    /// which is fine for an event as rare as a worker leaving the registry.
    pub(crate) fn remove_worker(&mut self, worker: WorkerId) {
        for id in 1..self.nodes.len() {
            let node = &mut self.nodes[id];
            if !node.live {
                continue;
            }
            if let Ok(index) = node.holders.binary_search_by_key(&worker, |h| h.worker) {
                let holder = node.holders.remove(index);
                self.lru.remove(&LruKey::new(holder, id, node.depth));
            }
        }
        let orphaned: Vec<NodeId> = (1..self.nodes.len())
            .filter(|&id| self.nodes[id].live && self.nodes[id].holders.is_empty())
            .collect();
        // Only the top of each orphaned subtree hangs off a surviving parent.
        for &id in &orphaned {
            let parent = self.nodes[id].parent;
            if parent == ROOT || !self.nodes[parent].holders.is_empty() {
                self.unlink(id);
            }
        }
        for id in orphaned {
            self.release(id);
        }
    }

    pub(super) fn unlink(&mut self, node: NodeId) {
        let parent = self.nodes[node].parent;
        self.nodes[parent]
            .children
            .retain(|&(_, child)| child != node);
    }

    pub(super) fn release(&mut self, node: NodeId) {
        let freed = std::mem::take(&mut self.nodes[node]);
        self.text_bytes -= freed.edge.len();
        self.free.push(node);
    }
}
