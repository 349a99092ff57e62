//! What the clients do. The runner drives a [`Workload`]: it asks for the next operation,
//! invokes it against one replica, and records the completion. [`QuotaWorkload`] is the
//! standard mix ([`QuotaMix`]) over a pluggable [`OpTransport`] (the HTTP calls to a real
//! gateway are the part left to wire; the in-memory cluster has its own transport).

pub(crate) mod completion;
mod mix;

use rand::rngs::StdRng;
use std::collections::BTreeMap;
use std::future::Future;
use switchyard_core::QuotaScope;

use crate::cluster::Endpoint;
use crate::history::{ErrorInfo, Op};

pub use completion::Completion;
pub use mix::{MixConfig, OpWeights, QuotaMix};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    #[error("the workload transport is not wired: {0}")]
    NotWired(String),
    #[error("workload setup failed: {0}")]
    Setup(String),
}

pub trait Workload: Send + Sync {
    /// Prepares the cluster (budgets, principals) and returns the budget per scope the
    /// checkers judge against.
    fn setup(
        &self,
        endpoints: &[Endpoint],
    ) -> impl Future<Output = Result<BTreeMap<QuotaScope, u64>, WorkloadError>> + Send;

    fn next_op(&self, rng: &mut StdRng) -> Op;

    fn invoke(&self, endpoint: &Endpoint, op: &Op) -> impl Future<Output = Completion> + Send;

    /// Sees every completion (e.g. to learn override ids for later approvals).
    fn observe(&self, _op: &Op, _completion: &Completion) {}
}

/// Carries operations to a replica. One call, one request; the runner handles timeouts.
pub trait OpTransport: Send + Sync {
    fn setup(
        &self,
        endpoints: &[Endpoint],
        budgets: &BTreeMap<QuotaScope, u64>,
    ) -> impl Future<Output = Result<(), WorkloadError>> + Send;

    fn execute(&self, endpoint: &Endpoint, op: &Op) -> impl Future<Output = Completion> + Send;
}

/// A transport for clusters whose client API is not wired into the suite yet: setup fails
/// with a clear message instead of producing a history of nothing but errors.
#[derive(Clone, Copy, Debug, Default)]
pub struct UnwiredTransport;

impl OpTransport for UnwiredTransport {
    async fn setup(
        &self,
        _endpoints: &[Endpoint],
        _budgets: &BTreeMap<QuotaScope, u64>,
    ) -> Result<(), WorkloadError> {
        Err(WorkloadError::NotWired(
            "implement OpTransport over the gateway's HTTP API (business requests, \
             /admin/quota, override and affinity endpoints) and pass it to QuotaWorkload"
                .into(),
        ))
    }

    async fn execute(&self, _endpoint: &Endpoint, _op: &Op) -> Completion {
        Completion::Fail(ErrorInfo::new("not_wired"))
    }
}

/// The standard quota / override / affinity mix over a transport.
pub struct QuotaWorkload<T: OpTransport> {
    mix: QuotaMix,
    transport: T,
}

impl<T: OpTransport> QuotaWorkload<T> {
    pub fn new(mix: QuotaMix, transport: T) -> Self {
        Self { mix, transport }
    }

    pub fn mix(&self) -> &QuotaMix {
        &self.mix
    }

    pub fn transport(&self) -> &T {
        &self.transport
    }
}

impl<T: OpTransport> Workload for QuotaWorkload<T> {
    async fn setup(
        &self,
        endpoints: &[Endpoint],
    ) -> Result<BTreeMap<QuotaScope, u64>, WorkloadError> {
        let budgets = self.mix.budgets();
        self.transport.setup(endpoints, &budgets).await?;
        Ok(budgets)
    }

    fn next_op(&self, rng: &mut StdRng) -> Op {
        self.mix.next_op(rng)
    }

    async fn invoke(&self, endpoint: &Endpoint, op: &Op) -> Completion {
        self.transport.execute(endpoint, op).await
    }

    fn observe(&self, op: &Op, completion: &Completion) {
        self.mix.observe(op, completion);
    }
}
