//! Simulated inference worker: a real HTTP server that models a vLLM/SGLang
//! engine (prefix KV cache, continuous batching, TTFT/TPOT timing, vLLM metrics,
//! fault injection) well enough to test and demonstrate a gateway against it.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use switchyard_sim::{Fault, SimConfig, SimWorker};
//! let worker = SimWorker::start(SimConfig::default(), "127.0.0.1:0".parse().unwrap()).await?;
//! println!("serving at {}", worker.base_url());
//! worker.set_fault(Fault::Slow { factor: 20.0 });
//! worker.shutdown().await;
//! # Ok(()) }
//! ```

mod config;
mod engine;
mod fault;
mod generation;
mod http;
mod kv_cache;
mod metrics;
mod oracle;
mod replay;
mod scheduler;
mod server;
mod tokens;
mod warmth;

pub use config::{BLOCK_TOKENS, MAX_OUTPUT_TOKENS, SimConfig, WorkerArgs};
pub use engine::SimStats;
pub use fault::Fault;
pub use oracle::{OracleArgs, OracleReport, run_oracle};
pub use replay::{ChatBlocks, KvReplay, simulated_answer};
pub use server::SimWorker;
