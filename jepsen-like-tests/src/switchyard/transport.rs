//! [`OpTransport`] over a real replica's HTTP API: one request per operation.
//!
//! How outcomes are classified (the history's honesty depends on it):
//! * a connect failure: `fail` (nothing was sent);
//! * a timeout or a connection lost in flight: `info` (the replica may have acted);
//! * a business request refused (4xx) or failed upstream (502/503/504, settled at zero tokens):
//!   `fail` with the gateway's error code;
//! * an admin write answered 503 (`quota_ledger_unreachable`: no leader, or the forwarded
//!   write failed in flight) or 5xx: `info`, because a proposal may commit after its proposer
//!   lost leadership; an admin write refused by the ledger (409): `fail`.

use http::Method;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use switchyard_core::header_names;
use switchyard_core::{Purpose, QuotaScope};

use super::credentials::{CHAOS_REPORTER_BASE, Credentials};
use super::http::HttpClient;
use super::local_state::parse_status;
use crate::cluster::Endpoint;
use crate::history::{ErrorInfo, Op, OpResult, OverrideView};
use crate::workload::{Completion, OpTransport, WorkloadError};

mod client;
mod outcome;
mod setup;

use client::GatewayClient;
use outcome::{as_read_failure, error_info, lost, read_outcome, write_outcome};

/// Words long enough that the gateway's estimate (4 characters a token) covers what the
/// simulated worker counts (one token a word), so settlements stay within reservations.
const PROMPT_WORDS: [&str; 8] = [
    "switchyard",
    "replicated",
    "ledger",
    "chaos",
    "partition",
    "workload",
    "budgets",
    "overrides",
];

pub struct SwitchyardTransport {
    client: GatewayClient,
    model: String,
    prompts: AtomicU64,
}

impl SwitchyardTransport {
    pub fn new(credentials: Arc<Credentials>, model: impl Into<String>, timeout: Duration) -> Self {
        Self {
            client: GatewayClient {
                http: HttpClient::new(),
                credentials,
                timeout,
            },
            model: model.into(),
            prompts: AtomicU64::new(0),
        }
    }

    async fn spend(&self, endpoint: &Endpoint, op: &Op) -> Completion {
        let Op::Spend {
            caller,
            purpose,
            priority,
            max_tokens,
        } = op
        else {
            return Completion::Fail(ErrorInfo::new("not_a_spend"));
        };
        let Some(auth) = self.client.credentials.tenant_auth(caller) else {
            return Completion::Fail(ErrorInfo::new("unknown_caller"));
        };
        let n = self.prompts.fetch_add(1, Ordering::Relaxed) as usize;
        let prompt: Vec<&str> = (0..6)
            .map(|i| PROMPT_WORDS[(n / 7 + i * (n % 7 + 1)) % PROMPT_WORDS.len()])
            .collect();
        let body = serde_json::json!({
            "model": self.model,
            "messages": [{"role": "user", "content": prompt.join(" ")}],
            "max_tokens": max_tokens,
        });
        // Clients may not claim `retry` (the gateway sets it on its own retries): a retry
        // is a business request that says it is a client's second attempt.
        let (purpose_header, retry_count) = match purpose {
            Purpose::Retry => (Purpose::Business, "1"),
            other => (*other, "0"),
        };
        let priority = priority.to_string();
        let headers = [
            ("authorization", auth.as_str()),
            (header_names::PURPOSE, purpose_header.as_str()),
            (header_names::PRIORITY, priority.as_str()),
            (header_names::RETRY_COUNT, retry_count),
        ];
        let url = format!("{}/v1/chat/completions", endpoint.base_url());
        let reply = match self
            .client
            .http
            .call(
                Method::POST,
                &url,
                &headers,
                Some(body.to_string()),
                self.client.timeout,
            )
            .await
        {
            Ok(reply) => reply,
            Err(e) => return lost(&e),
        };
        match reply.status {
            // A cached answer (degradation's cache fallback) bypasses admission: it spends
            // nothing, whatever usage the original generation reported.
            200 if reply.degraded.as_deref() == Some("cache") => Completion::Ok(OpResult::Spent {
                tokens: 0,
                override_id: None,
            }),
            200 => {
                let tokens = reply
                    .json()
                    .and_then(|j| j["usage"]["total_tokens"].as_u64())
                    .unwrap_or(*max_tokens);
                Completion::Ok(OpResult::Spent {
                    tokens,
                    override_id: None,
                })
            }
            // Refused before the worker, or failed upstream and settled at zero: no spend.
            400..=499 | 502..=504 => Completion::Fail(error_info(&reply)),
            _ => Completion::Info(error_info(&reply)),
        }
    }

    async fn read_spend(&self, endpoint: &Endpoint, scope: &QuotaScope) -> Completion {
        let runner = self.client.credentials.runner.clone();
        let reply = match self
            .client
            .admin(endpoint, &runner, Method::GET, "/admin/quota", None)
            .await
        {
            Ok(reply) => reply,
            Err(completion) => return as_read_failure(completion),
        };
        read_outcome(&reply, |json| {
            let budgets = json["budgets"].as_array()?;
            let tokens = budgets
                .iter()
                .find(|b| {
                    b["scope"]["caller"].as_str() == Some(&*scope.caller)
                        && serde_json::from_value::<Option<Purpose>>(b["scope"]["purpose"].clone())
                            .ok()
                            == Some(scope.purpose)
                })
                .and_then(|b| b["committed"].as_u64())
                .unwrap_or(0);
            Some(OpResult::SpendTotal { tokens })
        })
    }

    async fn list_overrides(&self, endpoint: &Endpoint) -> Completion {
        let runner = self.client.credentials.runner.clone();
        let reply = match self
            .client
            .admin(endpoint, &runner, Method::GET, "/admin/overrides", None)
            .await
        {
            Ok(reply) => reply,
            Err(completion) => return as_read_failure(completion),
        };
        read_outcome(&reply, |json| {
            let records = json["overrides"]
                .as_array()?
                .iter()
                .map(|r| {
                    Some(OverrideView {
                        id: r["id"].as_u64()?,
                        status: parse_status(r["status"].as_str()?)?,
                        requester: r["requester"].as_str()?.to_owned(),
                        approver: r["approver"].as_str().map(str::to_owned),
                    })
                })
                .collect::<Option<Vec<_>>>()?;
            Some(OpResult::Overrides { records })
        })
    }
}

impl OpTransport for SwitchyardTransport {
    async fn setup(
        &self,
        endpoints: &[Endpoint],
        budgets: &BTreeMap<QuotaScope, u64>,
    ) -> Result<(), WorkloadError> {
        setup::prepare(&self.client, endpoints, budgets).await
    }

    async fn execute(&self, endpoint: &Endpoint, op: &Op) -> Completion {
        match op {
            Op::Spend { .. } => self.spend(endpoint, op).await,
            Op::ReadSpend { scope } => self.read_spend(endpoint, scope).await,
            Op::ListOverrides => self.list_overrides(endpoint).await,
            Op::ReportSpend {
                seq, scope, tokens, ..
            } => {
                // Every report is its own reporter (node id above any replica's), so the
                // ledger's per-reporter sequence check never mistakes two for one.
                let body = serde_json::json!({
                    "reporter_node": CHAOS_REPORTER_BASE + seq,
                    "boot_id": 1,
                    "seq": 1,
                    "caller": &*scope.caller,
                    "purpose": scope.purpose,
                    "tokens": tokens,
                });
                let runner = self.client.credentials.runner.clone();
                match self
                    .client
                    .admin(
                        endpoint,
                        &runner,
                        Method::POST,
                        "/admin/ledger/spend-report",
                        Some(body),
                    )
                    .await
                {
                    Ok(reply) => write_outcome(&reply, |_| Some(OpResult::Reported)),
                    Err(completion) => completion,
                }
            }
            Op::ProposeOverride {
                scope,
                extra_tokens,
                duration_ms,
                requester,
            } => {
                // The API takes whole seconds: round down, so the real override never
                // outlives the one the history records.
                let body = serde_json::json!({
                    "caller": &*scope.caller,
                    "purpose": scope.purpose,
                    "extra_tokens": extra_tokens,
                    "reason": "chaos workload",
                    "duration_secs": (duration_ms / 1000).max(1),
                });
                match self
                    .client
                    .admin(
                        endpoint,
                        requester,
                        Method::POST,
                        "/admin/overrides",
                        Some(body),
                    )
                    .await
                {
                    Ok(reply) => write_outcome(&reply, |json| {
                        Some(OpResult::Proposed {
                            id: json["proposed"].as_u64()?,
                        })
                    }),
                    Err(completion) => completion,
                }
            }
            Op::ApproveOverride { id, approver } => {
                let path = format!("/admin/overrides/{id}/approve");
                match self
                    .client
                    .admin(endpoint, approver, Method::POST, &path, None)
                    .await
                {
                    Ok(reply) => write_outcome(&reply, |_| Some(OpResult::Approved)),
                    Err(completion) => completion,
                }
            }
            Op::RevokeOverride { id, principal } => {
                let path = format!("/admin/overrides/{id}");
                let body = serde_json::json!({"reason": "chaos workload"});
                match self
                    .client
                    .admin(endpoint, principal, Method::DELETE, &path, Some(body))
                    .await
                {
                    Ok(reply) => write_outcome(&reply, |_| Some(OpResult::Revoked)),
                    Err(completion) => completion,
                }
            }
            Op::RecordAffinity { prefix_key, worker } => {
                let body = serde_json::json!({"prefix_key": prefix_key, "worker": worker});
                let runner = self.client.credentials.runner.clone();
                match self
                    .client
                    .admin(
                        endpoint,
                        &runner,
                        Method::POST,
                        "/admin/ledger/affinity",
                        Some(body),
                    )
                    .await
                {
                    Ok(reply) => write_outcome(&reply, |_| Some(OpResult::Recorded)),
                    Err(completion) => completion,
                }
            }
        }
    }
}
