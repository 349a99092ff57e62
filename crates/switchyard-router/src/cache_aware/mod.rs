//! Cache-aware routing: send a request to the worker that already caches the longest part of
//! its prompt, unless the match is too short or the fleet is too unbalanced to afford it.

mod config;
#[cfg(test)]
mod tests;
mod tree;

pub use config::CacheAwareConfig;

use crate::error::RouterError;
use crate::load::{CandidateView, LeastLoaded, is_imbalanced};
use crate::policy::{Candidate, Decision, PrefixMatch, RouteRequest, RoutingPolicy};
use parking_lot::Mutex;
use std::cmp::Reverse;
use std::fmt;
use switchyard_core::WorkerId;
use tree::{Holder, PrefixTree};

const PREFIX_HIT: &str = "prefix_hit";
const LEAST_LOADED: &str = "least_loaded";
const IMBALANCED: &str = "imbalanced";
const BRANCHES: &[&str] = &[PREFIX_HIT, LEAST_LOADED, IMBALANCED];

pub struct CacheAwarePolicy {
    config: CacheAwareConfig,
    /// One lock acquisition per request covers lookup and insert.
    tree: Mutex<PrefixTree>,
    least_loaded: LeastLoaded,
}

impl CacheAwarePolicy {
    pub const NAME: &'static str = "cache_aware";

    pub fn new(config: CacheAwareConfig) -> Result<Self, RouterError> {
        config.validate()?;
        let max_tree_bytes = usize::try_from(config.max_tree_bytes).unwrap_or(usize::MAX);
        Ok(Self {
            config,
            tree: Mutex::new(PrefixTree::new(max_tree_bytes)),
            least_loaded: LeastLoaded::default(),
        })
    }

    pub fn config(&self) -> &CacheAwareConfig {
        &self.config
    }

    /// Prompt text bytes currently cached in the tree (bounded by `max_tree_bytes`).
    pub fn tree_bytes(&self) -> usize {
        self.tree.lock().text_bytes()
    }

    fn least_loaded_decision(&self, candidates: &[Candidate]) -> Option<Decision> {
        Some(Decision {
            worker: self.least_loaded.pick(candidates)?,
            branch: LEAST_LOADED,
            prefix_match: None,
        })
    }
}

impl fmt::Debug for CacheAwarePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheAwarePolicy")
            .field("config", &self.config)
            .field("tree_bytes", &self.tree_bytes())
            .finish_non_exhaustive()
    }
}

impl RoutingPolicy for CacheAwarePolicy {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn select(&self, request: &RouteRequest<'_>, candidates: &[Candidate]) -> Option<Decision> {
        if candidates.is_empty() {
            return None;
        }
        let prompt = request.prompt;
        let prompt_len = prompt.len();
        if prompt.is_empty() || (prompt_len as u64) < self.config.min_prompt_bytes {
            return self.least_loaded_decision(candidates);
        }
        let ratio = |matched: usize| matched as f32 / prompt_len as f32;
        // Built before locking so the critical section does not allocate for it.
        let view = CandidateView::new(candidates);
        let imbalanced = is_imbalanced(
            candidates,
            self.config.balance_abs_threshold,
            self.config.balance_rel_threshold,
        );

        let mut tree = self.tree.lock();
        let lookup = tree.lookup(prompt);
        let candidate_hit = lookup
            .longest_held_by(|worker| view.contains(worker))
            .and_then(|(len, holders)| Some((len, least_busy_holder(holders, &view)?)));
        let prefix_match = lookup.longest().and_then(|(len, holders)| {
            let (holder, holder_is_candidate) = match candidate_hit {
                Some((candidate_len, holder)) if candidate_len == len => (holder, true),
                _ => (most_recent_holder(holders)?, false),
            };
            Some(PrefixMatch {
                holder,
                matched_ratio: ratio(len),
                holder_is_candidate,
            })
        });
        let (worker, branch) = match candidate_hit {
            _ if imbalanced => (self.least_loaded.pick(candidates)?, IMBALANCED),
            Some((len, holder)) if ratio(len) > self.config.match_threshold => (holder, PREFIX_HIT),
            _ => (self.least_loaded.pick(candidates)?, LEAST_LOADED),
        };
        // Even off-affinity choices are recorded: the next, longer turn of this conversation
        // then follows the worker that actually has it cached now.
        lookup.insert(worker);
        drop(tree);

        Some(Decision {
            worker,
            branch,
            prefix_match,
        })
    }

    fn worker_removed(&self, id: WorkerId) {
        self.tree.lock().remove_worker(id);
    }

    fn branches(&self) -> &'static [&'static str] {
        BRANCHES
    }
}

/// Among holders that are candidates: fewest in flight, then the warmest cache, then lowest id.
fn least_busy_holder(holders: &[Holder], view: &CandidateView) -> Option<WorkerId> {
    holders
        .iter()
        .filter_map(|h| Some((view.in_flight(h.worker)?, Reverse(h.last_used), h.worker)))
        .min()
        .map(|(_, _, worker)| worker)
}

/// The holder most likely to still have the prefix cached: most recently used, then lowest id.
fn most_recent_holder(holders: &[Holder]) -> Option<WorkerId> {
    holders
        .iter()
        .max_by_key(|h| (h.last_used, Reverse(h.worker)))
        .map(|h| h.worker)
}
