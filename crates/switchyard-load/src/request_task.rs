//! One request's life on the client side: its first attempt, then the retries its client
//! group makes after 429/503, each recorded in the shared collector as it happens.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::client_retry::ClientRetryMode;
use crate::exchange::{AttemptHeaders, ExchangeSettings, Failure, Outcome, send_chat};
use crate::report::{Collector, RequestId, RequestLabels};
use crate::transport::HttpClient;
use crate::workload::PlannedRequest;

/// The collector, shared by the driver and every request task.
#[derive(Clone, Debug)]
pub struct SharedCollector(Arc<Mutex<Collector>>);

impl SharedCollector {
    pub fn new(collector: Collector) -> Self {
        Self(Arc::new(Mutex::new(collector)))
    }

    /// Locks are held for a few counter updates only; a panicked holder cannot have left the
    /// counters half-written in a way worth refusing the rest of the run over.
    pub fn lock(&self) -> MutexGuard<'_, Collector> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the collected run out, leaving an empty collector behind.
    pub fn take(&self) -> Collector {
        std::mem::take(&mut *self.lock())
    }
}

/// What every request task of a run shares.
#[derive(Debug)]
pub struct TaskContext {
    pub client: HttpClient,
    pub settings: Arc<ExchangeSettings>,
    pub collector: SharedCollector,
    /// Run start: attempts are timed from here.
    pub start: Instant,
    /// Bound on each attempt.
    pub attempt_timeout: Duration,
    pub max_client_retries: u32,
}

/// One request as the driver planned it.
#[derive(Debug)]
pub struct RequestPlan {
    pub planned: PlannedRequest,
    pub labels: RequestLabels,
    /// Sent as `x-request-id` on every attempt, when clients retry.
    pub request_id: Option<String>,
}

/// Runs the request's attempts until one succeeds, fails for good, or its client group gives
/// up; returns the last attempt's outcome. The request must already be begun in the collector.
pub async fn run_request(context: Arc<TaskContext>, plan: RequestPlan, id: RequestId) -> Outcome {
    let mode = plan.labels.client_group.unwrap_or(ClientRetryMode::Never);
    let mut retries = 0u32;
    loop {
        let attempt = AttemptHeaders {
            target: plan.labels.target,
            priority: plan.labels.priority,
            retry_count: (retries > 0 && mode.sends_retry_count()).then_some(retries),
            request_id: plan.request_id.clone(),
        };
        let sent_at = context.start.elapsed();
        context
            .collector
            .lock()
            .attempt_started(id, sent_at, retries > 0);
        let exchange = send_chat(&context.client, &context.settings, &plan.planned, &attempt);
        let outcome = tokio::time::timeout(context.attempt_timeout, exchange)
            .await
            .unwrap_or_else(|_| Err(Failure::new("timeout")));
        context
            .collector
            .lock()
            .attempt_finished(id, sent_at, &outcome);
        let wait = match &outcome {
            Err(failure) if retries < context.max_client_retries => failure
                .status
                .and_then(|status| mode.wait_before_retry(status, failure.retry_after)),
            _ => None,
        };
        let Some(wait) = wait else {
            context.collector.lock().finish_request(id, &outcome);
            return outcome;
        };
        tokio::time::sleep(wait).await;
        retries += 1;
    }
}
