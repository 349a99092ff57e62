//! The Switchyard gateway: an OpenAI-compatible front door that routes each request to an
//! inference worker and streams the answer back.
//!
//! Layout: `config` (TOML, validated), `http` (endpoints), `proxy` (the inference request
//! path, stage by stage), `metrics`, `server` (assembly and lifecycle), `demo` (embedded
//! default with simulated workers; feature `demo`).

pub mod admin_keys;
pub mod cluster;
pub mod config;
pub mod ctl;
#[cfg(feature = "demo")]
pub mod demo;
pub mod error;
pub mod headers;
mod http;
pub mod lifecycle;
pub mod listener;
pub mod log_fields;
pub mod logging;
pub mod metrics;
pub mod openai;
pub mod proxy;
pub mod reload;
pub mod runtime;
pub mod server;
pub mod signal;
pub mod state;
pub mod telemetry;
pub mod tls;
pub mod trace_context;
pub mod warmup;

pub use config::{Config, ConfigError};
pub use server::{GatewayHandle, StartError, StartOptions, start, start_with};
