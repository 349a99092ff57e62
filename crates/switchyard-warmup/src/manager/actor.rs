//! The manager actor: owns the schedule (per-resource slots), the running wave and its
//! ramp, and the warmup jobs it spawned (aborted when it stops). It wakes on its own tick
//! (`tick_interval_ms`) or when the owner calls `tick`; every decision reads the injected
//! clock, never the timer.

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tracing::{error, info};

use super::report::TickReport;
use super::shared::{Core, ResourceTable};
use super::steady::{LatencyHistogram, SteadyLatency};
use super::wave::Wave;
use crate::clock::{UnixMillis, secs_to_ms};
use crate::config::WarmupConfig;
use crate::error::ConfigError;
use crate::executor::WarmupResult;
use crate::ramp::RampMove;
use crate::schedule::{Slot, WarmupLimits, is_due};

pub(crate) enum ManagerMsg {
    Tick(Option<RpcReplyPort<TickReport>>),
    JobDone {
        wave: u64,
        job: u64,
        name: Arc<str>,
        result: WarmupResult,
    },
    SetLimits(WarmupLimits, RpcReplyPort<()>),
    Reload(Box<WarmupConfig>, RpcReplyPort<Result<(), ConfigError>>),
    /// The gateway's cumulative business-latency histogram and when it was read.
    BusinessLatency(UnixMillis, LatencyHistogram),
}

pub(crate) struct ManagerActor;

pub(crate) struct ManagerState {
    core: Arc<Core>,
    slots: HashMap<Arc<str>, Slot>,
    wave: Option<Wave>,
    next_wave: u64,
    next_job: u64,
    jobs: HashMap<u64, JoinHandle<()>>,
    steady: SteadyLatency,
    ticking: bool,
}

impl ManagerState {
    fn tick(&mut self, myself: &ActorRef<ManagerMsg>) -> TickReport {
        let core = Arc::clone(&self.core);
        let mut report = TickReport {
            misses_judged: core.refresh_accounting(),
            ..TickReport::default()
        };
        let config = core.config.load();
        let now = core.clock.unix_millis();
        if config.enabled {
            let limits = **core.limits.load();
            let retry = secs_to_ms(config.failure_retry_secs);
            let table = core.table.load();
            for (resource, cell) in &table.entries {
                let slot = self
                    .slots
                    .entry(Arc::clone(&cell.resource.name))
                    .or_default();
                if is_due(resource, slot, &limits, retry, now) {
                    slot.busy = true;
                    let wave = self.wave.get_or_insert_with(|| {
                        self.next_wave += 1;
                        // Chosen once, from traffic before the wave: a baseline that followed
                        // business latency during the wave would rise with the harm the wave
                        // does and hide it.
                        let steady = self.steady.select(now, &config.ramp);
                        core.metrics
                            .note_steady_p95(steady.source.label(), steady.ms);
                        Wave::new(self.next_wave, &config.ramp, steady, now)
                    });
                    wave.queue.push_back(Arc::clone(cell));
                    report.queued.push(Arc::clone(&cell.resource.name));
                }
            }
        }
        if let Some(wave) = &mut self.wave {
            let judged = wave.ramp.evaluate(now);
            report.ramp = Some(judged);
            if judged != RampMove::Wait {
                core.metrics
                    .ramp_moves
                    .with_label_values(&[judged.label()])
                    .inc();
            }
            match judged {
                RampMove::Abort => {
                    self.abort_wave(now);
                    report.wave_aborted = true;
                }
                RampMove::Backoff { to } => {
                    info!(wave = wave.id, step = to, "warmup ramp backed off one step");
                }
                RampMove::Advance { to } => {
                    info!(wave = wave.id, step = to, "warmup ramp advanced");
                }
                RampMove::Hold | RampMove::Wait => {}
            }
        }
        report.started = self.dispatch(myself, now);
        report.wave_completed = self.finish_wave_if_done();
        self.publish();
        report
    }

    fn dispatch(&mut self, myself: &ActorRef<ManagerMsg>, now: UnixMillis) -> Vec<Arc<str>> {
        let mut started = Vec::new();
        let Some(wave) = &mut self.wave else {
            return started;
        };
        while let Some(cell) = wave.next_to_start() {
            let name = Arc::clone(&cell.resource.name);
            if let Some(slot) = self.slots.get_mut(&name) {
                slot.last_attempt = Some(now);
            }
            self.next_job += 1;
            let (job, wave_id) = (self.next_job, wave.id);
            let (core, me) = (Arc::clone(&self.core), myself.clone());
            let task_name = Arc::clone(&name);
            let handle = tokio::spawn(async move {
                let result = core.run(&cell).await;
                let _ = me.send_message(ManagerMsg::JobDone {
                    wave: wave_id,
                    job,
                    name: task_name,
                    result,
                });
            });
            self.jobs.insert(job, handle);
            started.push(name);
        }
        started
    }

    fn job_done(
        &mut self,
        myself: &ActorRef<ManagerMsg>,
        wave_id: u64,
        job: u64,
        name: &Arc<str>,
        result: &WarmupResult,
    ) {
        self.jobs.remove(&job);
        if let Some(slot) = self.slots.get_mut(name) {
            slot.busy = false;
            slot.last_failed = !result.is_warmed();
        }
        let now = self.core.clock.unix_millis();
        if let Some(wave) = self.wave.as_mut().filter(|wave| wave.id == wave_id) {
            wave.running = wave.running.saturating_sub(1);
            let latency = match result {
                WarmupResult::Warmed { latency, .. }
                | WarmupResult::Misdirected { latency, .. }
                | WarmupResult::Failed { latency, .. } => Some(*latency),
                WarmupResult::Skipped(_) => None,
            };
            if let Some(latency) = latency {
                let ok = result.is_warmed();
                wave.ramp
                    .record(ok, u64::try_from(latency.as_millis()).unwrap_or(u64::MAX));
                if ok {
                    wave.warmed += 1;
                } else {
                    wave.failed += 1;
                }
            }
        }
        self.dispatch(myself, now);
        self.finish_wave_if_done();
        self.publish();
    }

    fn abort_wave(&mut self, now: UnixMillis) {
        let Some(mut wave) = self.wave.take() else {
            return;
        };
        let dropped = wave.queue.len();
        for cell in wave.queue.drain(..) {
            if let Some(slot) = self.slots.get_mut(&cell.resource.name) {
                *slot = Slot {
                    last_attempt: Some(now),
                    last_failed: true,
                    busy: false,
                };
            }
        }
        let metrics = &self.core.metrics;
        metrics.alerts.with_label_values(&["wave_aborted"]).inc();
        metrics.waves.with_label_values(&["aborted"]).inc();
        let stats = wave.ramp.window_stats();
        error!(
            wave = wave.id,
            step = wave.ramp.step(),
            dropped,
            still_running = wave.running,
            error_rate = ?stats.error_rate(),
            p95_ms = ?stats.p95_ms,
            "warmup wave aborted after consecutive ramp backoffs"
        );
    }

    fn finish_wave_if_done(&mut self) -> bool {
        if !self.wave.as_ref().is_some_and(Wave::is_done) {
            return false;
        }
        if let Some(wave) = self.wave.take() {
            self.core
                .metrics
                .waves
                .with_label_values(&["completed"])
                .inc();
            info!(
                wave = wave.id,
                warmed = wave.warmed,
                failed = wave.failed,
                "warmup wave completed"
            );
        }
        true
    }

    fn publish(&self) {
        let metrics = &self.core.metrics;
        let queued = self.wave.as_ref().map_or(0, |wave| wave.queue.len());
        self.core.busy.send_replace(queued + self.jobs.len());
        match &self.wave {
            Some(wave) => {
                metrics
                    .ramp_step
                    .set(i64::try_from(wave.ramp.step()).unwrap_or(i64::MAX));
                metrics
                    .ramp_concurrency
                    .set(i64::from(wave.ramp.concurrency()));
                self.core.wave.store(Some(Arc::new(wave.status())));
            }
            None => {
                metrics.ramp_step.set(-1);
                metrics.ramp_concurrency.set(0);
                self.core.wave.store(None);
            }
        }
    }

    fn set_limits(&mut self, limits: WarmupLimits) {
        self.core.limits.store(Arc::new(limits));
        if let Some(wave) = &mut self.wave {
            let slots = &mut self.slots;
            wave.queue.retain(|cell| {
                let keep = limits.allows(cell.resource.tier);
                if !keep {
                    if let Some(slot) = slots.get_mut(&cell.resource.name) {
                        slot.busy = false;
                    }
                }
                keep
            });
        }
        self.finish_wave_if_done();
        self.publish();
    }

    fn reload(&mut self, config: WarmupConfig) -> Result<(), ConfigError> {
        config.validate()?;
        let table = ResourceTable::build(&config, &self.core.keys, Some(&self.core.table.load()));
        let kept: Vec<Arc<str>> = table
            .cells()
            .map(|c| Arc::clone(&c.resource.name))
            .collect();
        self.slots.retain(|name, _| kept.contains(name));
        if let Some(wave) = &mut self.wave {
            wave.queue.retain(|cell| kept.contains(&cell.resource.name));
        }
        self.core.table.store(Arc::new(table));
        self.core.config.store(Arc::new(config));
        self.finish_wave_if_done();
        self.publish();
        Ok(())
    }

    fn arm_tick(&mut self, myself: &ActorRef<ManagerMsg>) {
        let interval = self.core.config.load().tick_interval_ms;
        self.ticking = interval > 0;
        if self.ticking {
            myself.send_after(Duration::from_millis(interval), || ManagerMsg::Tick(None));
        }
    }
}

impl Actor for ManagerActor {
    type Msg = ManagerMsg;
    type State = ManagerState;
    type Arguments = Arc<Core>;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        core: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let mut state = ManagerState {
            core,
            slots: HashMap::new(),
            wave: None,
            next_wave: 0,
            next_job: 0,
            jobs: HashMap::new(),
            steady: SteadyLatency::default(),
            ticking: false,
        };
        state.arm_tick(&myself);
        state.publish();
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ManagerMsg::Tick(reply) => {
                let report = state.tick(&myself);
                match reply {
                    Some(reply) => {
                        let _ = reply.send(report);
                    }
                    None => state.arm_tick(&myself),
                }
            }
            ManagerMsg::JobDone {
                wave,
                job,
                name,
                result,
            } => {
                state.job_done(&myself, wave, job, &name, &result);
            }
            ManagerMsg::SetLimits(limits, reply) => {
                state.set_limits(limits);
                let _ = reply.send(());
            }
            ManagerMsg::Reload(config, reply) => {
                let result = state.reload(*config);
                if result.is_ok() && !state.ticking {
                    state.arm_tick(&myself);
                }
                let _ = reply.send(result);
            }
            ManagerMsg::BusinessLatency(now, histogram) => {
                let window = secs_to_ms(state.core.config.load().ramp.steady_window_secs);
                state.steady.observe(now, histogram, window);
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        for (_, job) in state.jobs.drain() {
            job.abort();
        }
        state.wave = None;
        state.publish();
        Ok(())
    }
}
