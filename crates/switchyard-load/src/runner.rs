//! The open-loop driver: Poisson arrivals, one task per request, a bounded drain at the end.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::{JoinError, JoinSet};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::arrivals::PoissonArrivals;
use crate::exchange::{ExchangeSettings, Failure, Outcome, send_chat};
use crate::report::{Collector, RunFacts};
use crate::transport::{Endpoint, HttpClient, build_client, discover_model};
use crate::workload::{TurnTicket, WorkloadGenerator};
use crate::{LoadConfig, LoadError, LoadReport};

const PROGRESS_PERIOD: Duration = Duration::from_secs(1);

type TaskResult = (Option<TurnTicket>, Outcome);

/// Drives one open-loop run against `config.target` and returns its report.
///
/// Arrivals never wait for answers: when `max_in_flight` requests are outstanding, the arrival is
/// counted as `client_dropped`. After `duration`, in-flight requests get up to `request_timeout`
/// to finish; the rest are aborted and counted as `timeout`.
pub async fn run(config: LoadConfig) -> Result<LoadReport, LoadError> {
    config.validate()?;
    let endpoint = Endpoint::new(&config.target, &config.headers)?;
    let client = build_client(config.max_in_flight, config.request_timeout);
    let model = match &config.model {
        Some(model) => model.clone(),
        None => discover_model(&client, &endpoint, config.request_timeout).await?,
    };
    tracing::info!(
        target = %config.target, %model, workload = ?config.workload, rate = config.rate,
        duration = ?config.duration, "starting load run"
    );
    let settings = Arc::new(ExchangeSettings {
        endpoint,
        model: model.clone(),
        max_tokens: config.max_tokens,
        stream: config.stream,
    });
    let mut driver = Driver {
        generator: WorkloadGenerator::new(config.workload, config.seed),
        collector: Collector::default(),
        in_flight: JoinSet::new(),
        client,
        settings,
        config: &config,
    };
    let start = Instant::now();
    let mut progress = tokio::time::interval_at(start + PROGRESS_PERIOD, PROGRESS_PERIOD);
    progress.set_missed_tick_behavior(MissedTickBehavior::Delay);

    driver.issue_arrivals(start, &mut progress).await;
    let issue_time = start.elapsed().max(config.duration);
    driver.drain(start, &mut progress).await;

    let report = driver.collector.finish(RunFacts {
        target: config.target.clone(),
        model,
        workload: config.workload,
        seed: config.seed,
        configured_rate: config.rate,
        issue_time,
    });
    tracing::info!(
        sent = report.requests_sent,
        ok = report.ok,
        "load run finished"
    );
    Ok(report)
}

struct Driver<'a> {
    generator: WorkloadGenerator,
    collector: Collector,
    in_flight: JoinSet<TaskResult>,
    client: HttpClient,
    settings: Arc<ExchangeSettings>,
    config: &'a LoadConfig,
}

impl Driver<'_> {
    async fn issue_arrivals(&mut self, start: Instant, progress: &mut Interval) {
        let deadline = start + self.config.duration;
        let max_requests = self.config.max_requests();
        let mut arrivals = PoissonArrivals::new(self.config.rate, self.config.seed);
        let mut next_arrival = arrivals.next().map(|offset| start + offset);
        while let Some(arrival) = next_arrival.filter(|at| *at < deadline) {
            if self.collector.sent() >= max_requests {
                tracing::warn!(
                    max_requests,
                    "hard request bound reached; stopping arrivals"
                );
                break;
            }
            tokio::select! {
                () = tokio::time::sleep_until(arrival) => {
                    self.issue_one();
                    next_arrival = arrivals.next().map(|offset| start + offset);
                }
                Some(joined) = self.in_flight.join_next() => self.record(joined),
                _ = progress.tick(), if self.config.progress => self.print_progress(start),
            }
        }
    }

    fn issue_one(&mut self) {
        if self.in_flight.len() >= self.config.max_in_flight {
            self.collector.record_dropped();
            return;
        }
        let planned = self.generator.next_request();
        self.collector.record_sent();
        let client = self.client.clone();
        let settings = Arc::clone(&self.settings);
        let timeout = self.config.request_timeout;
        self.in_flight.spawn(async move {
            let exchange = send_chat(&client, &settings, &planned);
            let outcome = tokio::time::timeout(timeout, exchange)
                .await
                .unwrap_or_else(|_| Err(Failure::new("timeout")));
            (planned.turn, outcome)
        });
    }

    /// Waits up to `request_timeout` for outstanding requests, then aborts and counts the rest.
    async fn drain(&mut self, start: Instant, progress: &mut Interval) {
        let drain_deadline = Instant::now() + self.config.request_timeout;
        while !self.in_flight.is_empty() {
            tokio::select! {
                Some(joined) = self.in_flight.join_next() => self.record(joined),
                () = tokio::time::sleep_until(drain_deadline) => break,
                _ = progress.tick(), if self.config.progress => self.print_progress(start),
            }
        }
        self.in_flight.abort_all();
        // Tasks that finished just before the abort still report their real outcome.
        while let Some(joined) = self.in_flight.join_next().await {
            self.record(joined);
        }
    }

    fn record(&mut self, joined: Result<TaskResult, JoinError>) {
        match joined {
            Ok((ticket, outcome)) => {
                self.collector.record(&outcome);
                if let Some(ticket) = ticket {
                    let answer = outcome.as_ref().ok().map(|done| done.answer.as_str());
                    self.generator.record_answer(ticket, answer);
                }
            }
            Err(error) if error.is_cancelled() => self.collector.record_failure("timeout"),
            Err(error) => {
                tracing::error!(%error, "request task panicked");
                self.collector.record_failure("panic");
            }
        }
    }

    /// Progress goes to stderr so the final table on stdout stays machine-friendly.
    fn print_progress(&self, start: Instant) {
        eprintln!(
            "[load {:>6.1}s] sent={} ok={} errors={} dropped={} in_flight={}",
            start.elapsed().as_secs_f64(),
            self.collector.sent(),
            self.collector.ok(),
            self.collector.error_count(),
            self.collector.client_dropped(),
            self.in_flight.len(),
        );
    }
}
