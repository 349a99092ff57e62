//! Exactly-once writes: the state machine remembers the answer to every recent request id, so
//! a write retried after an ambiguous failure (forward timed out, leader lost its quorum after
//! appending) is answered with its first outcome instead of applying again. Memory is bounded
//! and deterministic: entries leave in log order once older than [`REQUEST_MEMORY_MS`] of
//! ledger time (proposer timestamps) or beyond [`MAX_REMEMBERED_REQUESTS`].

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

use crate::command::{CommandResponse, RequestId};

/// How long an answer is kept, in ledger time. A writer retries for its write timeout (3 s by
/// default); the margin covers an entry committed late by a new leader and clock skew between
/// proposers.
pub const REQUEST_MEMORY_MS: u64 = 120_000;

/// Most answers kept at once, whatever their age (bounds snapshot size under a write storm).
pub const MAX_REMEMBERED_REQUESTS: usize = 20_000;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Remembered {
    index: u64,
    response: CommandResponse,
}

/// Recent request ids with their answers, in the order they applied.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestLog {
    answers: BTreeMap<RequestId, Remembered>,
    /// `(proposer timestamp, id)` in apply order: eviction walks from the front.
    order: VecDeque<(u64, RequestId)>,
}

impl RequestLog {
    /// The first answer to `id`, if it applied recently enough to be remembered.
    pub fn answer(&self, id: &RequestId) -> Option<&CommandResponse> {
        self.answers.get(id).map(|r| &r.response)
    }

    /// The log index `id` applied at, if remembered.
    pub fn applied_at(&self, id: &RequestId) -> Option<u64> {
        self.answers.get(id).map(|r| r.index)
    }

    pub fn len(&self) -> usize {
        self.answers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.answers.is_empty()
    }

    pub(super) fn remember(
        &mut self,
        id: RequestId,
        index: u64,
        ts_ms: u64,
        response: CommandResponse,
    ) {
        self.answers.insert(id, Remembered { index, response });
        self.order.push_back((ts_ms, id));
    }

    /// Forgets answers older than the memory window at ledger time `now_ms`, and the oldest
    /// beyond the size cap. Walks in apply order only, so every replica forgets the same ids.
    pub(super) fn evict(&mut self, now_ms: u64) {
        while let Some(&(ts_ms, id)) = self.order.front() {
            let too_old = ts_ms.saturating_add(REQUEST_MEMORY_MS) < now_ms;
            if !too_old && self.order.len() <= MAX_REMEMBERED_REQUESTS {
                break;
            }
            self.order.pop_front();
            self.answers.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{decode, encode};
    use crate::command::{Command, LedgerRequest};
    use crate::state::LedgerState;
    use switchyard_core::QuotaScope;

    const T0: u64 = 1_000_000;

    fn id(seq: u64) -> RequestId {
        RequestId {
            origin: 2,
            boot: 77,
            seq,
        }
    }

    fn entry(ts_ms: u64, request_id: Option<RequestId>, command: Command) -> LedgerRequest {
        LedgerRequest {
            ts_ms,
            request_id,
            command,
        }
    }

    fn propose(requester: &str) -> Command {
        Command::ProposeOverride {
            scope: QuotaScope::caller("alice"),
            extra_tokens: 100,
            reason: "incident".into(),
            duration_ms: 60_000,
            requester: requester.into(),
        }
    }

    fn approve(id: u64, approver: &str) -> Command {
        Command::ApproveOverride {
            id,
            approver: approver.into(),
        }
    }

    fn proposed_id(response: &CommandResponse) -> u64 {
        match response {
            CommandResponse::OverrideProposed { id } => *id,
            other => panic!("not a proposal answer: {other:?}"),
        }
    }

    #[test]
    fn the_same_request_twice_applies_once_and_answers_the_first_outcome() {
        let mut state = LedgerState::default();
        let first = state.apply_request(1, &entry(T0, Some(id(1)), propose("ops-ann")));
        let repeat = state.apply_request(2, &entry(T0 + 10, Some(id(1)), propose("ops-ann")));
        assert_eq!(first, repeat);
        assert_eq!(
            state.overrides.records.len(),
            1,
            "a repeat must not propose again"
        );
        assert_eq!(state.counters.duplicate_requests, 1);
        assert_eq!(
            state.last_index, 2,
            "a repeat still moves the applied index"
        );
        let other = state.apply_request(3, &entry(T0 + 20, Some(id(2)), propose("ops-ann")));
        assert_ne!(proposed_id(&first), proposed_id(&other));
        assert_eq!(state.overrides.records.len(), 2);
    }

    #[test]
    fn a_retried_approval_is_answered_done_not_refused() {
        let mut state = LedgerState::default();
        let proposal = state.apply_request(1, &entry(T0, Some(id(1)), propose("ops-ann")));
        let override_id = proposed_id(&proposal);
        let approval = entry(T0 + 5, Some(id(2)), approve(override_id, "ops-ben"));
        assert_eq!(state.apply_request(2, &approval), CommandResponse::Done);
        // The forwarding retry of the same approval: without the id it would be refused as
        // "already active" although it took effect.
        assert_eq!(state.apply_request(3, &approval), CommandResponse::Done);
        // A new approval (another id) is judged on its own, and refused.
        let again = entry(T0 + 6, Some(id(3)), approve(override_id, "ops-ben"));
        assert!(matches!(
            state.apply_request(4, &again),
            CommandResponse::Rejected { .. }
        ));
    }

    #[test]
    fn writes_without_an_id_are_never_deduplicated() {
        let mut state = LedgerState::default();
        state.apply_request(1, &entry(T0, None, propose("ops-ann")));
        state.apply_request(2, &entry(T0, None, propose("ops-ann")));
        assert_eq!(state.overrides.records.len(), 2);
        assert!(state.requests.is_empty());
    }

    #[test]
    fn remembered_answers_survive_a_snapshot() {
        let mut state = LedgerState::default();
        let first = state.apply_request(1, &entry(T0, Some(id(1)), propose("ops-ann")));
        // A snapshot is the bincode encoding of the whole state (store::state_machine).
        let mut restored: LedgerState = decode(&encode(&state).unwrap()).unwrap();
        assert_eq!(restored, state);
        let repeat = restored.apply_request(2, &entry(T0 + 1, Some(id(1)), propose("ops-ann")));
        assert_eq!(repeat, first);
        assert_eq!(restored.overrides.records.len(), 1);
    }

    #[test]
    fn answers_are_forgotten_by_ledger_age_in_log_order() {
        let mut state = LedgerState::default();
        state.apply_request(1, &entry(T0, Some(id(1)), Command::Tick));
        state.apply_request(2, &entry(T0 + 1_000, Some(id(2)), Command::Tick));
        assert_eq!(state.requests.len(), 2);
        state.apply_request(3, &entry(T0 + REQUEST_MEMORY_MS, None, Command::Tick));
        assert_eq!(state.requests.len(), 2, "exactly at the window: still kept");
        state.apply_request(4, &entry(T0 + REQUEST_MEMORY_MS + 1, None, Command::Tick));
        assert!(state.requests.answer(&id(1)).is_none());
        assert_eq!(state.requests.applied_at(&id(2)), Some(2));
        // Once forgotten, the id is new again: replicas agree because they all forgot it at
        // the same index.
        let late = entry(T0 + REQUEST_MEMORY_MS + 2, Some(id(1)), propose("ops-ann"));
        assert!(matches!(
            state.apply_request(5, &late),
            CommandResponse::OverrideProposed { .. }
        ));
    }

    #[test]
    fn the_size_cap_forgets_the_oldest_first() {
        let mut state = LedgerState::default();
        let total = MAX_REMEMBERED_REQUESTS as u64 + 3;
        for seq in 1..=total {
            state.apply_request(seq, &entry(T0, Some(id(seq)), Command::Tick));
        }
        assert_eq!(state.requests.len(), MAX_REMEMBERED_REQUESTS);
        assert!(state.requests.answer(&id(3)).is_none());
        assert!(state.requests.answer(&id(4)).is_some());
        assert!(state.requests.answer(&id(total)).is_some());
    }
}
