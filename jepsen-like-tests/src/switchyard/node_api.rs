//! [`NodeApi`] against a real `switchyard serve` replica: its config file, readiness and role
//! from `GET /admin/cluster`, its final state from `GET /admin/ledger/local`.

use http::Method;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::QuotaScope;

use super::credentials::Credentials;
use super::http::HttpClient;
use super::local_state::LocalState;
use super::node_config::{self, ConfigInputs};
use super::settings::SwitchyardSettings;
use crate::cluster::{ClusterError, ClusterLayout, NodeApi, NodeInfo};

/// The file every replica is started with (`{node_dir}/switchyard.toml` in the template).
pub const NODE_CONFIG_FILE: &str = "switchyard.toml";

const STATUS_TIMEOUT: Duration = Duration::from_secs(1);
const STATE_TIMEOUT: Duration = Duration::from_secs(3);

pub struct SwitchyardNodeApi {
    http: HttpClient,
    credentials: Arc<Credentials>,
    settings: SwitchyardSettings,
    budgets: BTreeMap<QuotaScope, u64>,
    base_config: Option<String>,
}

impl SwitchyardNodeApi {
    /// `budgets`: one per workload caller, written into the tenants' config.
    pub fn new(
        credentials: Arc<Credentials>,
        settings: SwitchyardSettings,
        budgets: BTreeMap<QuotaScope, u64>,
    ) -> Result<Self, ClusterError> {
        let base_config = match &settings.base_config {
            Some(path) => {
                Some(
                    std::fs::read_to_string(path).map_err(|source| ClusterError::Io {
                        context: format!("reading the base config {}", path.display()),
                        source,
                    })?,
                )
            }
            None => None,
        };
        Ok(Self {
            http: HttpClient::new(),
            credentials,
            settings,
            budgets,
            base_config,
        })
    }

    async fn get_json(
        &self,
        node: &NodeInfo,
        path: &str,
        limit: Duration,
    ) -> Result<serde_json::Value, ClusterError> {
        let url = format!("http://{}{path}", node.client_addr);
        let auth = self.credentials.runner_auth();
        let reply = self
            .http
            .call(
                Method::GET,
                &url,
                &[("authorization", auth.as_str())],
                None,
                limit,
            )
            .await
            .map_err(|e| ClusterError::Node {
                node: node.id,
                message: format!("GET {path}: {e}"),
            })?;
        if reply.status != 200 {
            let (code, message) = reply.error();
            return Err(ClusterError::Node {
                node: node.id,
                message: format!("GET {path}: {} {code}: {message}", reply.status),
            });
        }
        reply.json().ok_or_else(|| ClusterError::Node {
            node: node.id,
            message: format!("GET {path}: the answer is not JSON"),
        })
    }
}

impl NodeApi for SwitchyardNodeApi {
    fn node_files(
        &self,
        node: &NodeInfo,
        layout: &ClusterLayout<'_>,
    ) -> Result<Vec<(String, String)>, ClusterError> {
        let inputs = ConfigInputs {
            base: self.base_config.as_deref(),
            credentials: &self.credentials,
            budgets: &self.budgets,
            model: &self.settings.model,
            routing_policy: &self.settings.routing_policy,
        };
        let config =
            node_config::render(node, layout, &inputs).map_err(|message| ClusterError::Node {
                node: node.id,
                message,
            })?;
        Ok(vec![(NODE_CONFIG_FILE.to_owned(), config)])
    }

    /// Ready once the replica answers its admin API and knows a Raft leader.
    async fn ready(&self, node: &NodeInfo) -> bool {
        self.get_json(node, "/admin/cluster", STATUS_TIMEOUT)
            .await
            .is_ok_and(|status| status["leader"].is_u64())
    }

    /// A replica that does not answer is not a leader the nemesis can target.
    async fn is_leader(&self, node: &NodeInfo) -> Result<bool, ClusterError> {
        Ok(self
            .get_json(node, "/admin/cluster", STATUS_TIMEOUT)
            .await
            .is_ok_and(|status| status["role"] == "leader"))
    }

    async fn read_state(&self, node: &NodeInfo) -> Result<crate::state::NodeState, ClusterError> {
        let body = self
            .get_json(node, "/admin/ledger/local", STATE_TIMEOUT)
            .await?;
        let local: LocalState = serde_json::from_value(body).map_err(|e| ClusterError::Node {
            node: node.id,
            message: format!("GET /admin/ledger/local: unexpected shape: {e}"),
        })?;
        local.to_node_state().map_err(|message| ClusterError::Node {
            node: node.id,
            message,
        })
    }

    /// `PUT /admin/chaos/clock`: the replica stamps ledger entries `offset_ms` off the true
    /// time while it leads (needs `SWITCHYARD_CHAOS_ENDPOINTS=1` in the node's environment).
    async fn skew_clock(&self, node: &NodeInfo, offset_ms: i64) -> Result<(), ClusterError> {
        let path = "/admin/chaos/clock";
        let url = format!("http://{}{path}", node.client_addr);
        let auth = self.credentials.runner_auth();
        let body = serde_json::json!({ "offset_ms": offset_ms }).to_string();
        let reply = self
            .http
            .call(
                Method::PUT,
                &url,
                &[("authorization", auth.as_str())],
                Some(body),
                STATUS_TIMEOUT,
            )
            .await
            .map_err(|e| ClusterError::Node {
                node: node.id,
                message: format!("PUT {path}: {e}"),
            })?;
        if reply.status == 200 {
            return Ok(());
        }
        let (code, message) = reply.error();
        if code == "chaos_endpoints_disabled" {
            return Err(ClusterError::unsupported(
                "clock skew",
                "the replica runs without SWITCHYARD_CHAOS_ENDPOINTS=1",
            ));
        }
        Err(ClusterError::Node {
            node: node.id,
            message: format!("PUT {path}: {} {code}: {message}", reply.status),
        })
    }
}
