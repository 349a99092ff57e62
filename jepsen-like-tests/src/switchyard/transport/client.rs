//! The gateway connection a transport holds: the HTTP client, the run's credentials and the
//! request timeout, with the admin call that setup and the operations share. Setup takes this
//! component rather than the whole transport, so the transport depends on setup and not the
//! other way round.

use http::Method;
use std::sync::Arc;
use std::time::Duration;

use super::outcome::lost;
use crate::cluster::Endpoint;
use crate::history::ErrorInfo;
use crate::switchyard::credentials::Credentials;
use crate::switchyard::http::{HttpClient, Reply};
use crate::workload::Completion;

pub(super) struct GatewayClient {
    pub(super) http: HttpClient,
    pub(super) credentials: Arc<Credentials>,
    /// Per request; past it the operation is `info`.
    pub(super) timeout: Duration,
}

impl GatewayClient {
    pub(super) async fn admin(
        &self,
        endpoint: &Endpoint,
        principal: &str,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<Reply, Completion> {
        let Some(auth) = self.credentials.admin_auth(principal) else {
            return Err(Completion::Fail(ErrorInfo::new("unknown_principal")));
        };
        let url = format!("{}{path}", endpoint.base_url());
        self.http
            .call(
                method,
                &url,
                &[("authorization", auth.as_str())],
                body.map(|b| b.to_string()),
                self.timeout,
            )
            .await
            .map_err(|e| lost(&e))
    }
}
