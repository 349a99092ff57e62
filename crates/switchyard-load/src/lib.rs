//! Open-loop load generator for OpenAI-compatible endpoints.
//!
//! Requests arrive as a Poisson process regardless of how fast answers come back (an open loop),
//! so an overloaded target shows up as latency, errors and client drops rather than as a politely
//! slowed-down client. Workloads are shaped to expose routing quality: `multiturn` rewards session
//! affinity with prefix-cache hits, `hotkey` concentrates traffic on a few prefixes, `uniform`
//! shares nothing. The report reads usage (`cached_tokens`) and the `x-switchyard-worker` header.
//!
//! For gateway figures a run can also spread requests over several targets (gateway
//! replicas), ask for priority classes, mix client groups that retry 429/503 differently, and
//! keep a per-second timeline. Targets must be loopback addresses; requests, attempts and
//! time are hard-bounded.

mod arrivals;
mod chunk;
mod cli;
mod client_retry;
mod config;
mod error;
mod exchange;
mod mix;
mod priority;
mod render;
mod report;
mod request_task;
mod runner;
mod sse;
mod stats;
mod timeline;
mod trace;
mod transport;
mod workload;

pub use cli::{LoadArgs, run_cli};
pub use client_retry::{ClientRetryMix, ClientRetryMode, parse_client_retry_mix};
pub use config::{LoadConfig, Workload};
pub use error::LoadError;
pub use exchange::UNKNOWN_WORKER;
pub use mix::WeightedMix;
pub use priority::{PriorityClass, PriorityMix, parse_priority_mix};
pub use render::render_side_by_side;
pub use report::{BreakdownReport, LatencySummary, LoadReport, TargetLoad, WorkerLoad};
pub use runner::run;
pub use sse::{SseEvent, SseParser};
pub use stats::{coefficient_of_variation, percentile_nearest_rank};
pub use timeline::TimelineSecond;
pub use trace::{SentMessage, SentRequest, read_trace, write_trace};
pub use workload::{ChatMessage, PlannedRequest, TurnTicket, WorkloadGenerator};
