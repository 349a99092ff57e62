//! The open-loop driver: Poisson arrivals, one task per request, a bounded drain at the end.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::task::{JoinError, JoinSet};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::arrivals::PoissonArrivals;
use crate::exchange::{ExchangeSettings, Outcome};
use crate::report::{Collector, RequestLabels, RunFacts};
use crate::request_task::{RequestPlan, SharedCollector, TaskContext, run_request};
use crate::trace::{SentRequest, write_trace};
use crate::transport::{Endpoint, build_client, discover_model};
use crate::workload::{TurnTicket, WorkloadGenerator, derive_seed};
use crate::{LoadConfig, LoadError, LoadReport};

const PROGRESS_PERIOD: Duration = Duration::from_secs(1);
/// Seed stream of the per-request draws (target, class, client group), apart from the
/// workload's, so adding a mix does not change the prompts.
const REQUEST_MIX_STREAM: u64 = 21;

/// The request's index, the turn it opened (if any) and how it ended.
type TaskResult = (u64, Option<TurnTicket>, Outcome);

/// Drives one open-loop run against the configured targets and returns its report.
///
/// Arrivals never wait for answers: when `max_in_flight` requests are outstanding (a request
/// waiting to retry counts), the arrival is counted as `client_dropped`. After `duration`,
/// in-flight requests get up to `request_timeout` to finish; the rest are aborted and counted
/// as `timeout`.
pub async fn run(config: LoadConfig) -> Result<LoadReport, LoadError> {
    config.validate()?;
    let targets = config.targets();
    let endpoints = targets
        .iter()
        .map(|target| Endpoint::new(target, &config.headers))
        .collect::<Result<Vec<_>, _>>()?;
    let client = build_client(config.max_in_flight, config.request_timeout);
    let model = match &config.model {
        Some(model) => model.clone(),
        None => discover_model(&client, &endpoints[0], config.request_timeout).await?,
    };
    tracing::info!(
        targets = ?targets, %model, workload = ?config.workload, rate = config.rate,
        duration = ?config.duration, "starting load run"
    );
    let start = Instant::now();
    let started_unix_ms = unix_millis();
    let context = Arc::new(TaskContext {
        client,
        settings: Arc::new(ExchangeSettings {
            endpoints,
            model: model.clone(),
            max_tokens: config.max_tokens,
            stream: config.stream,
        }),
        collector: SharedCollector::new(Collector::new(config.timeline)),
        start,
        attempt_timeout: config.request_timeout,
        max_client_retries: config.max_client_retries,
    });
    let mut driver = Driver {
        generator: WorkloadGenerator::new(config.workload, config.seed),
        mix_rng: SmallRng::seed_from_u64(derive_seed(config.seed, REQUEST_MIX_STREAM)),
        run_tag: run_tag(),
        in_flight: JoinSet::new(),
        trace: config.trace_out.is_some().then(Vec::new),
        context,
        config: &config,
    };
    let mut progress = tokio::time::interval_at(start + PROGRESS_PERIOD, PROGRESS_PERIOD);
    progress.set_missed_tick_behavior(MissedTickBehavior::Delay);

    driver.issue_arrivals(start, &mut progress).await;
    let issue_time = start.elapsed().max(config.duration);
    driver.drain(start, &mut progress).await;
    if let (Some(path), Some(sent)) = (&config.trace_out, &driver.trace) {
        write_trace(path, sent)?;
    }

    let report = driver.context.collector.take().finish(RunFacts {
        targets,
        model,
        workload: config.workload,
        seed: config.seed,
        configured_rate: config.rate,
        issue_time,
        started_unix_ms,
    });
    tracing::info!(
        sent = report.requests_sent,
        attempts = report.total_attempts,
        ok = report.ok,
        "load run finished"
    );
    Ok(report)
}

fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

/// Distinguishes this run's `x-request-id`s from another run's with the same seed, so a
/// gateway that remembers ids never mistakes a new run's requests for retries.
fn run_tag() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos() as u64);
    derive_seed(nanos, u64::from(std::process::id()))
}

struct Driver<'a> {
    generator: WorkloadGenerator,
    mix_rng: SmallRng,
    run_tag: u64,
    in_flight: JoinSet<TaskResult>,
    /// Every request sent, with its answer once back (only with `trace_out`).
    trace: Option<Vec<SentRequest>>,
    context: Arc<TaskContext>,
    config: &'a LoadConfig,
}

impl Driver<'_> {
    async fn issue_arrivals(&mut self, start: Instant, progress: &mut Interval) {
        let deadline = start + self.config.duration;
        let max_requests = self.config.max_requests();
        let mut arrivals = PoissonArrivals::new(self.config.rate, self.config.seed);
        let mut next_arrival = arrivals.next().map(|offset| start + offset);
        while let Some(arrival) = next_arrival.filter(|at| *at < deadline) {
            if self.context.collector.lock().sent() >= max_requests {
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
            self.context.collector.lock().record_dropped();
            return;
        }
        let planned = self.generator.next_request();
        let labels = self.draw_labels();
        let id = self.context.collector.lock().begin(labels);
        let request_id = self
            .config
            .client_retry
            .is_some()
            .then(|| format!("load-{:016x}-{}", self.run_tag, id.index()));
        let turn = planned.turn;
        if let Some(trace) = &mut self.trace {
            let sent_ms = self.context.start.elapsed().as_secs_f64() * 1000.0;
            trace.push(SentRequest::new(
                id.index(),
                sent_ms,
                labels.target,
                &planned,
            ));
        }
        let plan = RequestPlan {
            planned,
            labels,
            request_id,
        };
        let context = Arc::clone(&self.context);
        self.in_flight.spawn(async move {
            let outcome = run_request(context, plan, id).await;
            (id.index(), turn, outcome)
        });
    }

    /// Target, class and client group of the next request; a draw is made only for what
    /// varies, so a run without mixes keeps the same random stream as before them.
    fn draw_labels(&mut self) -> RequestLabels {
        let target_count = 1 + self.config.extra_targets.len();
        let target = if target_count > 1 {
            self.mix_rng.random_range(0..target_count)
        } else {
            0
        };
        let priority = self
            .config
            .priority_mix
            .as_ref()
            .map(|mix| *mix.pick(self.mix_rng.random()));
        let client_group = self
            .config
            .client_retry
            .as_ref()
            .map(|mix| *mix.pick(self.mix_rng.random()));
        RequestLabels {
            target,
            priority,
            client_group,
        }
    }

    /// Waits up to `request_timeout` for outstanding requests, then aborts the rest (the
    /// collector counts requests that never finished as `timeout`).
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

    /// Outcomes are already in the collector; the answer continues the conversation and
    /// completes the trace.
    fn record(&mut self, joined: Result<TaskResult, JoinError>) {
        match joined {
            Ok((index, ticket, outcome)) => {
                let done = outcome.as_ref().ok();
                if let Some(ticket) = ticket {
                    let answer = done.map(|done| done.answer.as_str());
                    self.generator.record_answer(ticket, answer);
                }
                let sent = self
                    .trace
                    .as_mut()
                    .and_then(|trace| usize::try_from(index).ok().and_then(|at| trace.get_mut(at)));
                if let (Some(sent), Some(done)) = (sent, done) {
                    sent.answer = Some(done.answer.clone());
                    sent.worker = done.worker.clone();
                    sent.ttft_ms = done.ttft.map(|ttft| ttft.as_secs_f64() * 1000.0);
                    sent.e2e_ms = Some(done.e2e.as_secs_f64() * 1000.0);
                    sent.prompt_tokens = Some(done.prompt_tokens);
                    sent.cached_tokens = Some(done.cached_tokens);
                }
            }
            Err(error) if error.is_cancelled() => {}
            Err(error) => tracing::error!(%error, "request task panicked"),
        }
    }

    /// Progress goes to stderr so the final table on stdout stays machine-friendly.
    fn print_progress(&self, start: Instant) {
        let collector = self.context.collector.lock();
        eprintln!(
            "[load {:>6.1}s] sent={} attempts={} ok={} errors={} dropped={} in_flight={}",
            start.elapsed().as_secs_f64(),
            collector.sent(),
            collector.attempts(),
            collector.ok(),
            collector.error_count(),
            collector.client_dropped(),
            self.in_flight.len(),
        );
    }
}
