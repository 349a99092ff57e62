//! `switchyard ctl`: the operator's client for the admin API of any replica (writes to the
//! replicated ledger are forwarded to its leader by the replica).

use bytes::Bytes;
use clap::{Args, Subcommand};
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use std::time::Duration;
use switchyard_workers::{HttpClientConfig, build_http_client};

#[derive(Args, Clone, Debug)]
pub struct CtlArgs {
    /// Admin URL of any gateway replica.
    #[arg(long, default_value = "http://127.0.0.1:8080", env = "SWITCHYARD_URL")]
    pub url: String,
    /// Admin key (the principal it names is who the ledger's audit log records).
    #[arg(long, env = "SWITCHYARD_ADMIN_API_KEY", hide_env_values = true)]
    pub key: String,
    #[command(subcommand)]
    pub command: CtlCommand,
}

#[derive(Subcommand, Clone, Debug)]
pub enum CtlCommand {
    /// Budgets in the replicated ledger.
    #[command(subcommand)]
    Quota(QuotaCmd),
    /// Temporary quota raises: two different people, at most 2 h, no renewal.
    #[command(subcommand)]
    Override(OverrideCmd),
    /// Raft membership of the gateway replicas.
    #[command(subcommand)]
    Cluster(ClusterCmd),
    /// Inference workers behind this replica.
    #[command(subcommand)]
    Workers(WorkersCmd),
}

#[derive(Subcommand, Clone, Debug)]
pub enum QuotaCmd {
    Show,
    Set {
        #[arg(long)]
        caller: String,
        #[arg(long)]
        purpose: Option<String>,
        #[arg(long)]
        tokens_per_day: u64,
        /// Fleet-wide token rate, shared among replicas by demand (0 = none).
        #[arg(long, default_value_t = 0)]
        tokens_per_second: u64,
        /// Fleet-wide requests in flight, shared among replicas by demand (0 = none).
        #[arg(long, default_value_t = 0)]
        max_concurrency: u64,
    },
    /// The replicated audit log of budget and override changes.
    Audit,
}

#[derive(Subcommand, Clone, Debug)]
pub enum OverrideCmd {
    List,
    Propose {
        #[arg(long)]
        caller: String,
        #[arg(long)]
        purpose: Option<String>,
        #[arg(long)]
        extra_tokens: u64,
        #[arg(long)]
        reason: String,
        #[arg(long)]
        duration_secs: Option<u64>,
    },
    Approve {
        id: u64,
    },
    Revoke {
        id: u64,
        #[arg(long, default_value = "")]
        reason: String,
    },
}

#[derive(Subcommand, Clone, Debug)]
pub enum ClusterCmd {
    Status,
    Add {
        #[arg(long)]
        id: u64,
        #[arg(long)]
        addr: String,
        #[arg(long)]
        voter: bool,
    },
    Promote {
        id: u64,
    },
    Remove {
        id: u64,
    },
}

#[derive(Subcommand, Clone, Debug)]
pub enum WorkersCmd {
    List,
    Add {
        #[arg(long)]
        name: String,
        #[arg(long)]
        url: String,
    },
    /// Drain (no new requests, in-flight ones finish) and remove.
    Drain {
        name: String,
        #[arg(long)]
        wait: bool,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    #[error("{0}")]
    Request(String),
    #[error("{status}: {body}")]
    Refused { status: u16, body: String },
}

fn scope_body(caller: &str, purpose: &Option<String>) -> Value {
    json!({"caller": caller, "purpose": purpose})
}

/// What one ctl command sends: method, path and optional JSON body.
fn plan(command: &CtlCommand) -> (Method, String, Option<Value>) {
    match command {
        CtlCommand::Quota(QuotaCmd::Show) => (Method::GET, "/admin/quota".into(), None),
        CtlCommand::Quota(QuotaCmd::Audit) => (Method::GET, "/admin/quota/audit".into(), None),
        CtlCommand::Quota(QuotaCmd::Set {
            caller,
            purpose,
            tokens_per_day,
            tokens_per_second,
            max_concurrency,
        }) => {
            let mut body = scope_body(caller, purpose);
            body["tokens_per_day"] = json!(tokens_per_day);
            body["tokens_per_second"] = json!(tokens_per_second);
            body["max_concurrency"] = json!(max_concurrency);
            (Method::PUT, "/admin/quota".into(), Some(body))
        }
        CtlCommand::Override(OverrideCmd::List) => (Method::GET, "/admin/overrides".into(), None),
        CtlCommand::Override(OverrideCmd::Propose {
            caller,
            purpose,
            extra_tokens,
            reason,
            duration_secs,
        }) => {
            let mut body = scope_body(caller, purpose);
            body["extra_tokens"] = json!(extra_tokens);
            body["reason"] = json!(reason);
            body["duration_secs"] = json!(duration_secs);
            (Method::POST, "/admin/overrides".into(), Some(body))
        }
        CtlCommand::Override(OverrideCmd::Approve { id }) => {
            (Method::POST, format!("/admin/overrides/{id}/approve"), None)
        }
        CtlCommand::Override(OverrideCmd::Revoke { id, reason }) => (
            Method::DELETE,
            format!("/admin/overrides/{id}"),
            Some(json!({"reason": reason})),
        ),
        CtlCommand::Cluster(ClusterCmd::Status) => (Method::GET, "/admin/cluster".into(), None),
        CtlCommand::Cluster(ClusterCmd::Add { id, addr, voter }) => (
            Method::POST,
            "/admin/cluster/members".into(),
            Some(json!({"id": id, "addr": addr, "voter": voter})),
        ),
        CtlCommand::Cluster(ClusterCmd::Promote { id }) => (
            Method::POST,
            format!("/admin/cluster/members/{id}/promote"),
            None,
        ),
        CtlCommand::Cluster(ClusterCmd::Remove { id }) => {
            (Method::DELETE, format!("/admin/cluster/members/{id}"), None)
        }
        CtlCommand::Workers(WorkersCmd::List) => (Method::GET, "/admin/workers".into(), None),
        CtlCommand::Workers(WorkersCmd::Add { name, url }) => (
            Method::POST,
            "/admin/workers".into(),
            Some(json!({"name": name, "url": url})),
        ),
        CtlCommand::Workers(WorkersCmd::Drain { name, wait }) => (
            Method::DELETE,
            format!(
                "/admin/workers/{name}{}",
                if *wait { "?wait=true" } else { "" }
            ),
            None,
        ),
    }
}

/// Runs one command and answers the replica's JSON reply.
pub async fn run(args: &CtlArgs) -> Result<Value, CtlError> {
    let (method, path, body) = plan(&args.command);
    let uri = format!("{}{}", args.url.trim_end_matches('/'), path);
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let request = Request::builder()
        .method(method)
        .uri(&uri)
        .header("authorization", format!("Bearer {}", args.key))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| CtlError::Request(e.to_string()))?;
    let client = build_http_client(&HttpClientConfig::default());
    let response = tokio::time::timeout(Duration::from_secs(30), client.request(request))
        .await
        .map_err(|_| CtlError::Request(format!("{uri}: no answer within 30 s")))?
        .map_err(|e| CtlError::Request(format!("{uri}: {e}")))?;
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| CtlError::Request(e.to_string()))?
        .to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if !status.is_success() {
        return Err(CtlError::Refused {
            status: status.as_u16(),
            body: text,
        });
    }
    serde_json::from_str(&text).map_err(|e| CtlError::Request(format!("invalid JSON answer: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_map_to_admin_calls() {
        let (method, path, body) = plan(&CtlCommand::Override(OverrideCmd::Propose {
            caller: "team-a".into(),
            purpose: Some("warmup".into()),
            extra_tokens: 5000,
            reason: "launch".into(),
            duration_secs: None,
        }));
        assert_eq!(method, Method::POST);
        assert_eq!(path, "/admin/overrides");
        let body = body.unwrap();
        assert_eq!(body["caller"], "team-a");
        assert_eq!(body["purpose"], "warmup");
        assert_eq!(body["extra_tokens"], 5000);
        let (method, path, _) = plan(&CtlCommand::Workers(WorkersCmd::Drain {
            name: "gpu-a".into(),
            wait: true,
        }));
        assert_eq!(
            (method, path.as_str()),
            (Method::DELETE, "/admin/workers/gpu-a?wait=true")
        );
    }
}
