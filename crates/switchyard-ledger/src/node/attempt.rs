//! How a failed attempt to reach the leader is judged: whether to try again (every write
//! carries a request id, so a repeat is safe), and whether it may have applied (then giving
//! up means "outcome unknown", not "nothing happened").

use openraft::error::{CheckIsLeaderError, RaftError};
use std::time::Duration;

use crate::command::NodeId;
use crate::error::{LedgerError, WireError};
use crate::network::TransportError;
use crate::raft_types::RaftNode;

/// Pause between attempts while a leader is found or comes back.
pub(crate) const RETRY_PAUSE: Duration = Duration::from_millis(25);

/// A failed attempt may be repeated: writes carry a request id, so a repeat of one that did
/// apply is answered with its first outcome.
pub(crate) fn retryable(error: &LedgerError) -> bool {
    matches!(
        error,
        LedgerError::NoLeader | LedgerError::Unreachable(_) | LedgerError::OutcomeUnknown(_)
    )
}

/// `NoLeader` means no log holds the attempt: no leader was known, the call was dropped
/// before sending, or the proposer was not leader (or its entry was truncated, which openraft
/// answers as `ForwardToLeader`). Everything else (a timeout, a lost connection) may have
/// reached a log that commits later.
pub(crate) fn certainly_not_applied(error: &LedgerError) -> bool {
    matches!(error, LedgerError::NoLeader)
}

/// Whether a failed node-to-node call may have been processed by the callee. A call dropped
/// before sending, or refused by the callee's guard (secret, fault switch, bad body), was not;
/// a timeout or a broken connection may have been (a refused connect looks the same).
pub(crate) fn may_have_reached_the_handler(error: &TransportError) -> bool {
    match error {
        TransportError::Dropped | TransportError::Request(_) => false,
        TransportError::Status { status, .. } => *status == http::StatusCode::INTERNAL_SERVER_ERROR,
        TransportError::Connect(_) | TransportError::Timeout(_) => true,
    }
}

/// `ensure_linearizable` failed because this node is not (or no longer provably) leader.
pub(crate) fn lost_leadership(
    error: &RaftError<NodeId, CheckIsLeaderError<NodeId, RaftNode>>,
) -> bool {
    matches!(
        error.api_error(),
        Some(CheckIsLeaderError::ForwardToLeader(_) | CheckIsLeaderError::QuorumNotEnough(_))
    )
}

pub(crate) fn wire_to_ledger(error: WireError) -> LedgerError {
    match (error.retry, error.maybe_applied) {
        (true, true) => LedgerError::OutcomeUnknown(error.message),
        (true, false) => LedgerError::NoLeader,
        (false, _) => LedgerError::Rejected(error.message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::error::{Fatal, QuorumNotEnough};

    #[test]
    fn a_leader_without_its_quorum_is_no_leader_for_reads() {
        let lost: RaftError<NodeId, CheckIsLeaderError<NodeId, RaftNode>> =
            RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(QuorumNotEnough {
                cluster: "{voters:[1,2,3]}".into(),
                got: [1].into(),
            }));
        assert!(lost_leadership(&lost));
        let stopped: RaftError<NodeId, CheckIsLeaderError<NodeId, RaftNode>> =
            RaftError::Fatal(Fatal::Stopped);
        assert!(!lost_leadership(&stopped));
    }

    #[test]
    fn wire_errors_keep_whether_the_write_may_have_applied() {
        let cases = [
            (LedgerError::NoLeader, "no_leader"),
            (LedgerError::OutcomeUnknown("slow".into()), "unknown"),
            (LedgerError::Unreachable("lost".into()), "unknown"),
            (LedgerError::Rejected("two-person rule".into()), "rejected"),
            (LedgerError::Raft("fatal".into()), "rejected"),
        ];
        for (error, expected) in cases {
            let back = wire_to_ledger(WireError::from(&error));
            let got = match back {
                LedgerError::NoLeader => "no_leader",
                LedgerError::OutcomeUnknown(_) => "unknown",
                LedgerError::Rejected(_) => "rejected",
                _ => "other",
            };
            assert_eq!(got, expected, "{error:?}");
        }
    }

    #[test]
    fn every_unavailable_attempt_is_retried_but_only_no_leader_proves_nothing_applied() {
        for error in [
            LedgerError::NoLeader,
            LedgerError::Unreachable("x".into()),
            LedgerError::OutcomeUnknown("x".into()),
        ] {
            assert!(retryable(&error), "{error:?}");
        }
        assert!(!retryable(&LedgerError::Rejected("x".into())));
        assert!(certainly_not_applied(&LedgerError::NoLeader));
        assert!(!certainly_not_applied(&LedgerError::Unreachable(
            "x".into()
        )));
    }
}
