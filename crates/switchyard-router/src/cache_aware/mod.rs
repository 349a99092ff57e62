//! Cache-aware routing: send a request to the worker that already caches its affinity prefix;
//! place the rest by hashing their routing key (session → user → prompt prefix, the function
//! warmup shares) onto the ring with bounded load, so every gateway replica agrees without
//! talking and sessions sharing one system prompt still spread. A chat is named by its
//! conversation (its opening, under the session or user key when one is sent: `conversation`):
//! only its first turn takes a (loose, in-flight) load bound on this replica's own counts, and
//! where its later turns follow it (a replica that routes its conversations whole, `openings`,
//! or replicas sharing placements, `fleet_share`) it evens out its group workers' cache
//! writes; elsewhere the prompts' group plan waits for enough conversations to agree across
//! replicas (`prompt_group`), and a replica that missed a later turn's previous turn follows
//! placement rather than its own older routing; across a worker joining or leaving, the
//! conversations opened before it keep the plan they opened under (`conversation_age`).
//! Later turns go where the conversation lives on every replica, unless that worker's engine
//! reports a queue or it carries a full batch (`escape`); when the holder of a prefix is
//! filtered, migrate the affinity to the fallback worker at once and say so to the other
//! replicas.

mod affinity;
mod branches;
mod choice;
mod config;
mod conversation;
mod conversation_age;
mod decayed;
mod deviation;
mod escape;
mod fleet_share;
mod group_shares;
mod key;
mod matching;
mod openings;
mod placement;
mod plan_churn;
mod prompt_group;
mod recent;
mod slot_draw;
mod state;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_affinity;
#[cfg(test)]
mod tests_anonymous;
#[cfg(test)]
mod tests_busy_escape;
#[cfg(test)]
mod tests_escape;
#[cfg(test)]
mod tests_group_balance;
#[cfg(test)]
mod tests_keys;
#[cfg(test)]
mod tests_prompt_group;
#[cfg(test)]
mod tests_replicas;
#[cfg(test)]
mod tests_ring_change;
mod tree;

pub use config::CacheAwareConfig;
pub use conversation::USER_TURN_MARKER;

use crate::affinity::{AffinityApplied, AffinityEvent, AffinitySink};
use crate::error::RouterError;
use crate::hash::stable_hash;
use crate::load::{CandidateLoads, CandidateView, LeastLoaded, LoadBound, is_imbalanced};
use crate::membership::Membership;
use crate::policy::{Candidate, Decision, RouteRequest, RoutingPolicy, RoutingStats};
use crate::ring::ConsistentHashConfig;
use crate::routing_key::{RoutingKeyConfig, routing_key};
use branches::*;
use choice::Choice;
use deviation::{AffinityCounters, Deviation};
use escape::{ReportedLoads, later_turn_escape};
use key::KeyOf;
use matching::{best_cache_match, least_busy_holder};
use parking_lot::Mutex;
use placement::{Grouping, PlacementKind};
use prompt_group::{GROUP_PLAN_EVERY, MIN_PLAN_CONVERSATIONS};
use state::AffinityState;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::WallClock;
use switchyard_core::WorkerId;

pub struct CacheAwarePolicy {
    config: CacheAwareConfig,
    keys: RoutingKeyConfig,
    load_factor: f64,
    membership: Membership,
    state: Mutex<AffinityState>,
    least_loaded: LeastLoaded,
    clock: WallClock,
    sink: Arc<dyn AffinitySink>,
    counters: AffinityCounters,
}

impl CacheAwarePolicy {
    pub const NAME: &'static str = "cache_aware";

    /// `keys` is the routing key shared with `consistent_hash` and warmup
    /// (`RoutingConfig::routing_key`): new requests are placed by it.
    pub fn new(
        config: CacheAwareConfig,
        ring: &ConsistentHashConfig,
        keys: RoutingKeyConfig,
        clock: WallClock,
        sink: Arc<dyn AffinitySink>,
    ) -> Result<Self, RouterError> {
        config.validate()?;
        ring.validate()?;
        keys.validate()?;
        if config.placement_block_bytes != keys.prompt_prefix_bytes {
            tracing::warn!(
                placement_block_bytes = config.placement_block_bytes,
                prompt_prefix_bytes = keys.prompt_prefix_bytes,
                "cache_aware.placement_block_bytes is ignored: placement hashes the routing key \
                 (routing_key.prompt_prefix_bytes for prompts without session or user)"
            );
        }
        let max_tree_bytes = usize::try_from(config.max_tree_bytes).unwrap_or(usize::MAX);
        let max_overrides = usize::try_from(config.max_placement_overrides).unwrap_or(usize::MAX);
        let half_life = Duration::from_millis(config.placement_load_half_life_ms);
        Ok(Self {
            config,
            keys,
            load_factor: ring.load_factor,
            membership: Membership::new(ring.vnodes_per_worker),
            state: Mutex::new(AffinityState::new(
                max_tree_bytes,
                max_overrides,
                half_life,
                clock.unix_now(),
            )),
            least_loaded: LeastLoaded::default(),
            clock,
            sink,
            counters: AffinityCounters::default(),
        })
    }

    pub fn config(&self) -> &CacheAwareConfig {
        &self.config
    }

    /// Prompt text bytes currently cached in the tree (bounded by `max_tree_bytes`).
    pub fn tree_bytes(&self) -> usize {
        self.state.lock().tree.text_bytes()
    }

    fn least_loaded_decision(&self, candidates: &[Candidate]) -> Option<Decision> {
        Some(Decision {
            worker: self.least_loaded.pick(candidates)?,
            branch: LEAST_LOADED,
            prefix_match: None,
            key_source: None,
        })
    }
}

impl fmt::Debug for CacheAwarePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheAwarePolicy")
            .field("config", &self.config)
            .field("keys", &self.keys)
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
        let strong =
            |matched: usize| matched as f32 / prompt_len as f32 > self.config.match_threshold;
        let key = routing_key(&self.keys, &request.key_inputs()).map(|key| KeyOf {
            hash: stable_hash(key.key.as_bytes()),
            text: key.key,
            source: key.source,
        });
        let (key, conversation, affinity) =
            conversation::identify(key, prompt, self.config.anonymous_conversations);
        // A later turn of a conversation goes where the conversation lives, whatever this
        // replica's load view says: other replicas, which cannot see that view, send its
        // other turns there too.
        let sticky = conversation.is_some_and(|conversation| !conversation.first_turn);
        // A conversation with a long enough system prompt is placed within that prompt's group.
        let group = conversation
            .filter(|_| self.config.prompt_groups)
            .and_then(|_| conversation::system_part(prompt))
            .filter(|system| system.len() as u64 >= self.config.prompt_group_min_bytes)
            .map(|system| stable_hash(system.as_bytes()));
        // Everything that allocates is built before locking.
        let ring = self.membership.ring();
        let ranking = group.map(|group| prompt_group::ranking(&ring, group));
        let turn = group.map_or(0, |_| conversation::turns(prompt));
        let view = CandidateView::new(candidates);
        let loads = CandidateLoads::new(&ring, candidates);
        let reported = ReportedLoads::new(&ring, candidates);
        let bound = LoadBound::new(candidates, self.load_factor);
        let imbalanced = is_imbalanced(
            candidates,
            self.config.balance_abs_threshold,
            self.config.balance_rel_threshold,
        );
        let share_buffer = Vec::with_capacity(ring.members().len());
        let mut written_buffer = match (&group, sticky) {
            (Some(_), false) => Vec::with_capacity(ring.members().len()),
            _ => Vec::new(),
        };
        let now = self.clock.unix_now();

        let mut state = self.state.lock();
        let AffinityState {
            tree,
            overrides,
            recent,
            written,
            opened,
            groups,
            plan,
            batches,
            fleet,
            openings,
        } = &mut *state;
        batches.observe(candidates);
        // A conversation's opening is bounded loosely and by in-flight counts alone: a replica
        // that never sees the opening sends the later turns where its own placement says, so
        // a deviation made on load signals the other replicas do not share splits the
        // conversation. The floor keeps a worker whose few requests here are noise.
        let opening_bound = LoadBound::new(candidates, self.config.opening_load_factor)
            .at_least(self.config.opening_min_in_flight);
        let share = recent.bound(
            candidates,
            ring.members().iter().map(|member| member.id),
            self.config.placement_load_factor,
            now,
            share_buffer,
        );
        // Whether a conversation's later turns go where its opening went on every replica:
        // this replica routes its conversations whole, or replicas share placements.
        let follows = openings.routes_whole(now) || fleet.shares_placements(now);
        let mut before_change = None;
        let grouping = match (group, ranking, conversation) {
            (Some(group), Some(ranking), Some(conversation)) => {
                if groups.observe(group, conversation.key, turn, now) {
                    openings.met(turn <= 1, now);
                }
                // Where later turns follow their opening anyway, a plan may start at once.
                plan.refresh(
                    &ring,
                    groups,
                    self.config.prompt_group_load_factor,
                    now,
                    GROUP_PLAN_EVERY,
                    if follows { 0 } else { MIN_PLAN_CONVERSATIONS },
                );
                let slots = plan.slots(group, &ranking);
                if sticky {
                    before_change = plan.drawn_before_change(group, conversation.key, now, |at| {
                        groups.opened_before(conversation.key, at)
                    });
                }
                Some(Grouping { ranking, slots })
            }
            _ => None,
        };
        // A first turn evens out its group workers' cache writes only where its later turns
        // follow it: this replica routes its conversations whole (and sees every write), or
        // every replica applies its placements (one Raft group) and sends the later turns
        // where it put the first; there the conversations every replica opened stand in for
        // the writes, of which this replica sees only its share.
        let writes = if !self.config.prompt_group_balance || sticky || grouping.is_none() {
            None
        } else if openings.routes_whole(now) {
            Some(&*written)
        } else if fleet.shares_placements(now) {
            Some(&*opened)
        } else {
            None
        };
        let balance = writes.map(|writes| {
            written_buffer.extend(ring.members().iter().map(|m| writes.relative(m.id)));
            written_buffer.as_slice()
        });
        let lookup = tree.lookup(prompt);
        let candidate_hit = affinity
            .longest(&lookup, |worker| view.contains(worker))
            .and_then(|(len, holders)| Some((len, least_busy_holder(holders, &view)?)));
        let longest = affinity.longest(&lookup, |_| true);
        // Among replicas that do not share placements, one that did not route a later turn's
        // previous turn knows only where it sent an older one (or moved it on its own), while
        // the turns since went where placement says: going back would move it once more.
        let missed_previous = sticky
            && !follows
            && !longest.is_some_and(|(len, _)| conversation::reaches_previous_turn(prompt, len));
        // Where the conversation was moved off its placement, as far as this turn follows.
        let moved_to = key.and_then(|key| {
            if missed_previous {
                overrides.get_shared(key.hash)
            } else {
                overrides.get(key.hash)
            }
        });
        let placing = placement::Placing {
            ring: &ring,
            loads: &loads,
            moved_to,
            grouping: grouping.as_ref(),
            before_change,
            key: key.map(|key| key.hash),
            sticky,
            conversation: conversation.is_some(),
            opening_bound,
            bound,
            share: &share,
            balance,
        };
        // Placed at most once: the missed-previous-turn check and the choice below both ask.
        let placement = std::cell::OnceCell::new();
        let placed = || *placement.get_or_init(|| placing.place());
        // Where another replica (or this one) last moved this conversation, if still routable.
        let home = moved_to
            .filter(|_| sticky)
            .filter(|&worker| view.contains(worker));
        // Having missed the previous turn, only a cache where the fleet keeps the
        // conversation counts as a hit.
        let (candidate_hit, longest) = if missed_previous {
            let kept = home.or_else(|| placed().map(|(worker, _)| worker));
            let on_kept = affinity.longest(&lookup, |worker| Some(worker) == kept);
            (on_kept.and_then(|(len, _)| Some((len, kept?))), on_kept)
        } else {
            (candidate_hit, longest)
        };
        let choice = match (candidate_hit, longest, home) {
            _ if imbalanced => Choice::Imbalanced(self.least_loaded.pick(candidates)?),
            (Some((len, holder)), _, Some(home)) if home == holder && strong(len) => {
                Choice::Hit(holder)
            }
            (_, _, Some(home)) => Choice::Placed(home, PlacementKind::Override),
            (Some((len, holder)), Some((longest_len, _)), None)
                if len == longest_len && strong(len) =>
            {
                Choice::Hit(holder)
            }
            // A strong affinity whose holders are all filtered out: migrate it, to a candidate
            // that holds a strong (shorter) part if there is one, else where placement says.
            (hit, Some((len, holders)), None) if strong(len) => {
                let worker = match hit {
                    Some((hit_len, holder)) if strong(hit_len) => holder,
                    _ => match placed() {
                        Some((worker, _)) => worker,
                        None => self.least_loaded.pick(candidates)?,
                    },
                };
                let displaced = holders
                    .iter()
                    .map(|h| h.worker)
                    .filter(|&w| !view.contains(w))
                    .collect();
                Choice::Migrate {
                    worker,
                    matched: len,
                    displaced,
                }
            }
            _ => match placed() {
                Some((worker, kind)) => Choice::Placed(worker, kind),
                None => Choice::LeastLoaded(self.least_loaded.pick(candidates)?),
            },
        };
        // Where the conversation lives is saturated by the figures every replica sees: this
        // turn goes to the same unsaturated worker on whichever replica sees it. Else, where
        // it lives carries a full batch by the freshest count: the turn would queue there.
        let escaped = match (&choice, key) {
            (
                Choice::Hit(home)
                | Choice::Placed(
                    home,
                    PlacementKind::Override
                    | PlacementKind::Hash
                    | PlacementKind::HashFallback
                    | PlacementKind::Group
                    | PlacementKind::GroupBeforeChange,
                ),
                Some(key),
            ) if sticky => later_turn_escape(
                &ring,
                &loads,
                &reported,
                key.hash,
                *home,
                &self.config,
                batches,
            ),
            _ => None,
        };
        let choice = escaped.unwrap_or(choice);
        let (worker, branch) = choice.worker_and_branch();
        let prefix_match = best_cache_match(&lookup, &view, worker, prompt_len);
        if self.config.prompt_group_balance {
            let cached_here = lookup
                .longest_held_by(|holder| holder == worker)
                .map_or(0, |(len, _)| len);
            written.record_amount(worker, prompt_len.saturating_sub(cached_here) as f64, now);
        }
        // Even off-affinity choices are recorded: the next, longer turn of this conversation
        // then follows the worker that actually has it cached now.
        lookup.insert(worker);
        recent.record(worker, now);
        let deviation = choice.into_deviation(sticky);
        if let Some(Deviation::Migration { matched, displaced }) = &deviation {
            tree.displace(&prompt[..*matched], displaced);
        }
        // The key follows every deviation, so replicas that share affinity events (and this
        // session's or block's next new conversation) go where its cache now is; the ledger
        // keeps only the key.
        if let (Some(_), Some(key)) = (&deviation, key) {
            overrides.set(key.hash, worker);
        }
        // A move of its own this replica just gave up on must not take the next turn back.
        if let Some(key) = key.filter(|key| missed_previous && overrides.is_private(key.hash)) {
            overrides.set(key.hash, worker);
        }
        if deviation.is_some() {
            fleet.announced(now);
        }
        drop(state);

        if let Some(deviation) = deviation {
            // Outside the lock: the sink may apply the event straight back to this policy.
            self.announce(&ring, deviation, prompt, key, worker);
        }
        Some(Decision {
            worker,
            branch,
            prefix_match,
            key_source: key.map(|key| key.source),
        })
    }

    fn worker_added(&self, id: WorkerId, name: &str) {
        self.membership.add(id, name);
    }

    fn worker_removed(&self, id: WorkerId) {
        self.membership.remove(id);
        self.state.lock().forget_worker(id);
    }

    fn apply_affinity(&self, event: &AffinityEvent) -> AffinityApplied {
        self.apply_event(event)
    }

    fn stats(&self) -> RoutingStats {
        let ring = self.membership.ring();
        let state = self.state.lock();
        let (plan_moved_share, plan_moved_beyond_membership_change) = state.plan.moved_shares();
        RoutingStats {
            ring_workers: ring.members().len() as u64,
            ring_vnodes: ring.vnode_count() as u64,
            membership_changes: self.membership.changes(),
            keys_moved_on_last_membership_change: self.membership.last_moved_share(),
            placement_overrides: state.overrides.len() as u64,
            tree_bytes: state.tree.text_bytes() as u64,
            placement_replicas: state.fleet.replicas(self.clock.unix_now()),
            openings_met_share: state.openings.share(),
            plan_moved_share,
            plan_moved_beyond_membership_change,
            ..self.counters.snapshot()
        }
    }

    fn branches(&self) -> &'static [&'static str] {
        BRANCHES
    }
}
