//! How a replica's answer becomes a history completion (see the parent module's rules).

use crate::history::{ErrorInfo, OpResult};
use crate::switchyard::http::{CallError, Reply};
use crate::workload::Completion;

pub(super) fn lost(error: &CallError) -> Completion {
    match error {
        CallError::Connect(_) => Completion::Fail(ErrorInfo::new("connection_refused")),
        CallError::Invalid(detail) => {
            Completion::Fail(ErrorInfo::new(format!("invalid: {detail}")))
        }
        CallError::Lost(_) => Completion::Info(ErrorInfo::new("connection_reset")),
        CallError::Timeout(_) => Completion::Info(ErrorInfo::new("timeout")),
    }
}

/// Longest replica message kept in the history.
const MAX_DETAIL: usize = 300;

/// The failure as the history records it: the reason, the status and, for server errors,
/// the replica's message.
pub(super) fn error_info(reply: &Reply) -> ErrorInfo {
    let info = ErrorInfo::http(reply.status, reason(reply));
    if reply.status >= 500 {
        let (_, message) = reply.error();
        info.with_detail(message.chars().take(MAX_DETAIL).collect::<String>())
    } else {
        info
    }
}

/// The refusal's reason: the gateway's error code, made specific for ledger refusals.
fn reason(reply: &Reply) -> String {
    let (code, message) = reply.error();
    for specific in ["quota_ledger_unreachable", "quota_lease_pending"] {
        if code == "ledger_unavailable" && message.contains(specific) {
            return specific.to_owned();
        }
    }
    if code == "rejected_by_ledger" {
        let known = [
            ("two-person rule", "two_person_rule"),
            ("only pending overrides", "override_not_pending"),
            ("is already", "override_not_pending"),
            ("does not exist", "override_not_found"),
        ];
        return known
            .iter()
            .find(|(text, _)| message.contains(text))
            .map_or("override_invalid", |(_, reason)| reason)
            .to_owned();
    }
    code
}

/// An admin write's answer: `ok` on 200, `fail` when refused, `info` when the outcome is open.
pub(super) fn write_outcome(
    reply: &Reply,
    ok: impl FnOnce(&serde_json::Value) -> Option<OpResult>,
) -> Completion {
    match reply.status {
        200 => match reply.json().as_ref().and_then(ok) {
            Some(result) => Completion::Ok(result),
            None => Completion::Info(ErrorInfo::http(200, "unexpected_answer")),
        },
        400..=499 => Completion::Fail(error_info(reply)),
        _ => Completion::Info(error_info(reply)),
    }
}

/// A read's answer: anything but 200 is a `fail` (a read has no effect).
pub(super) fn read_outcome(
    reply: &Reply,
    ok: impl FnOnce(&serde_json::Value) -> Option<OpResult>,
) -> Completion {
    match (reply.status, reply.json()) {
        (200, Some(json)) => ok(&json)
            .map(Completion::Ok)
            .unwrap_or_else(|| Completion::Fail(ErrorInfo::http(200, "unexpected_answer"))),
        _ => Completion::Fail(error_info(reply)),
    }
}

/// A read that was lost had no effect either way: `fail`, keeping the reason.
pub(super) fn as_read_failure(completion: Completion) -> Completion {
    match completion {
        Completion::Info(error) => Completion::Fail(error),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::time::Duration;

    fn reply(status: u16, code: &str, message: &str) -> Reply {
        let body = serde_json::json!({"error": {"code": code, "message": message}});
        Reply {
            status,
            degraded: None,
            body: Bytes::from(body.to_string()),
        }
    }

    #[test]
    fn ledger_refusals_get_specific_reasons() {
        let unreachable = reply(
            503,
            "ledger_unavailable",
            "quota ledger unavailable: quota_ledger_unreachable (refused by the budget gate)",
        );
        assert_eq!(reason(&unreachable), "quota_ledger_unreachable");
        let pending = reply(
            503,
            "ledger_unavailable",
            "quota ledger unavailable: quota_lease_pending",
        );
        assert_eq!(reason(&pending), "quota_lease_pending");
        let own = reply(
            409,
            "rejected_by_ledger",
            "two-person rule: `ops-ann` proposed override 3",
        );
        assert_eq!(reason(&own), "two_person_rule");
        let renewal = reply(
            409,
            "rejected_by_ledger",
            "override 3 is Active, only pending overrides can be approved (no renewal)",
        );
        assert_eq!(reason(&renewal), "override_not_pending");
        assert_eq!(
            reason(&reply(429, "budget_exhausted", "")),
            "budget_exhausted"
        );
    }

    #[test]
    fn admin_writes_are_info_unless_refused_and_reads_never_are() {
        let refused = write_outcome(
            &reply(409, "rejected_by_ledger", "override 9 does not exist"),
            |_| None,
        );
        assert!(matches!(refused, Completion::Fail(e) if e.reason == "override_not_found"));
        let open = write_outcome(&reply(503, "quota_ledger_unreachable", "no leader"), |_| {
            None
        });
        assert!(
            matches!(&open, Completion::Info(e) if e.status == Some(503)),
            "a write answered 503 may still commit: {open:?}"
        );
        let crashed = write_outcome(&reply(500, "internal_error", "raft: boom"), |_| None);
        assert!(
            matches!(crashed, Completion::Info(e) if e.detail.as_deref() == Some("raft: boom"))
        );
        let read = read_outcome(&reply(503, "quota_ledger_unreachable", "no leader"), |_| {
            None
        });
        assert!(matches!(read, Completion::Fail(_)));
        assert!(matches!(
            as_read_failure(lost(&CallError::Timeout(Duration::from_secs(1)))),
            Completion::Fail(_)
        ));
    }

    #[test]
    fn connect_failures_are_fail_and_lost_requests_info() {
        assert!(matches!(
            lost(&CallError::Connect("refused".into())),
            Completion::Fail(_)
        ));
        assert!(matches!(
            lost(&CallError::Lost("reset".into())),
            Completion::Info(_)
        ));
        assert!(matches!(
            lost(&CallError::Timeout(Duration::from_secs(6))),
            Completion::Info(_)
        ));
    }
}
