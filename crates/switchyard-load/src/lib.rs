//! Open-loop load generator for OpenAI-compatible endpoints.
//!
//! Requests arrive as a Poisson process regardless of how fast answers come back (an open loop),
//! so an overloaded target shows up as latency, errors and client drops rather than as a politely
//! slowed-down client. Workloads are shaped to expose routing quality: `multiturn` rewards session
//! affinity with prefix-cache hits, `hotkey` concentrates traffic on a few prefixes, `uniform`
//! shares nothing. The report reads usage (`cached_tokens`) and the `x-switchyard-worker` header.

mod arrivals;
mod chunk;
mod cli;
mod config;
mod error;
mod exchange;
mod render;
mod report;
mod runner;
mod sse;
mod stats;
mod transport;
mod workload;

pub use cli::{LoadArgs, run_cli};
pub use config::{LoadConfig, Workload};
pub use error::LoadError;
pub use exchange::WORKER_HEADER;
pub use render::render_side_by_side;
pub use report::{LatencySummary, LoadReport, UNKNOWN_WORKER, WorkerLoad};
pub use runner::run;
pub use sse::{SseEvent, SseParser};
pub use stats::{coefficient_of_variation, percentile_nearest_rank};
