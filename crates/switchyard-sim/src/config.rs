//! Worker configuration and its command-line form.

use std::net::{IpAddr, SocketAddr};

/// Output tokens are capped here whatever the request asks for.
pub const MAX_OUTPUT_TOKENS: u32 = 4096;

/// Tokens per KV-cache block, as in vLLM's default block size.
pub const BLOCK_TOKENS: usize = 16;

/// How the simulated engine behaves: capacity, cache size and speed.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Worker name, e.g. `sim-0`; sent back in the `x-sim-worker` header.
    pub name: String,
    /// The only model name the worker serves.
    pub model: String,
    /// At most this many requests run in the batch; the rest queue FIFO.
    pub max_running: usize,
    /// Prefix-cache capacity in blocks of [`BLOCK_TOKENS`] tokens, LRU.
    pub kv_blocks: usize,
    /// Prefill cost per 1000 uncached prompt tokens.
    pub prefill_ms_per_1k_tokens: f64,
    /// Cost of each output token after the first, for a request running alone.
    pub decode_ms_per_token: f64,
    /// Extra cost of a decode step per additional running request, as a share of a lone
    /// request's step. A step reads the weights once for the whole batch plus each
    /// request's KV cache; the shared weight read dominates (an 8B model's 16 GB against a
    /// few hundred MB of KV per request with a few thousand tokens of context), so a small
    /// batch barely slows each request and aggregate throughput rises almost in proportion.
    pub decode_batch_cost: f64,
    /// Batch size from which a decode step is compute-bound and grows in proportion to the
    /// batch (aggregate throughput flat, each request slower); 0 = not reached below
    /// `max_running`, whose queue is then the throughput knee.
    pub compute_knee: usize,
    /// Multiplies every simulated duration; 0.1 runs ten times faster.
    pub time_scale: f64,
    /// Output length when the request gives no `max_tokens`.
    pub default_max_tokens: u32,
    /// Extra delay a cold worker pays before its next request's prefill (model load, CUDA
    /// graph capture). 0 turns the cold-start model off: the worker is always warm.
    pub cold_start_ms: f64,
    /// Idle this long (no request in flight) and the worker is cold again: its next request
    /// pays `cold_start_ms` and its prefix cache starts empty. A worker starts cold.
    pub cold_after_ms: f64,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            name: "sim-0".to_owned(),
            model: "sim-llama".to_owned(),
            max_running: 8,
            kv_blocks: 4096,
            prefill_ms_per_1k_tokens: 40.0,
            decode_ms_per_token: 5.0,
            decode_batch_cost: 0.02,
            compute_knee: 0,
            time_scale: 1.0,
            default_max_tokens: 16,
            cold_start_ms: 0.0,
            cold_after_ms: 60_000.0,
        }
    }
}

/// Command-line arguments of `switchyard-sim worker`.
#[derive(clap::Args, Clone, Debug)]
pub struct WorkerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Worker name reported in `x-sim-worker`.
    #[arg(long, default_value = "sim-0")]
    pub name: String,
    /// Model name served.
    #[arg(long, default_value = "sim-llama")]
    pub model: String,
    /// Maximum requests in the running batch.
    #[arg(long, default_value_t = 8)]
    pub max_running: usize,
    /// Prefix-cache capacity in 16-token blocks.
    #[arg(long, default_value_t = 4096)]
    pub kv_blocks: usize,
    /// Prefill milliseconds per 1000 uncached prompt tokens.
    #[arg(long, default_value_t = 40.0)]
    pub prefill_ms_per_1k_tokens: f64,
    /// Decode milliseconds per output token, for a request running alone.
    #[arg(long, default_value_t = 5.0)]
    pub decode_ms_per_token: f64,
    /// Extra decode-step cost per additional running request (share of a lone step).
    #[arg(long, default_value_t = 0.02)]
    pub decode_batch_cost: f64,
    /// Batch size from which decode is compute-bound (step time grows with the batch);
    /// 0 = never below --max-running.
    #[arg(long, default_value_t = 0)]
    pub compute_knee: usize,
    /// Multiplier on every simulated duration (0.1 = 10x faster).
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// Cold-start delay in milliseconds paid by the first request after an idle spell
    /// (0 = never cold). Scaled by --time-scale.
    #[arg(long, default_value_t = 0.0)]
    pub cold_start_ms: f64,
    /// Idle milliseconds after which the worker is cold again. Scaled by --time-scale.
    #[arg(long, default_value_t = 60_000.0)]
    pub cold_after_ms: f64,
}

impl WorkerArgs {
    /// The engine configuration these arguments describe.
    pub fn to_config(&self) -> SimConfig {
        SimConfig {
            name: self.name.clone(),
            model: self.model.clone(),
            max_running: self.max_running,
            kv_blocks: self.kv_blocks,
            prefill_ms_per_1k_tokens: self.prefill_ms_per_1k_tokens,
            decode_ms_per_token: self.decode_ms_per_token,
            decode_batch_cost: self.decode_batch_cost,
            compute_knee: self.compute_knee,
            time_scale: self.time_scale,
            cold_start_ms: self.cold_start_ms,
            cold_after_ms: self.cold_after_ms,
            ..SimConfig::default()
        }
    }

    /// The socket address to bind.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::new(self.host, self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        worker: WorkerArgs,
    }

    #[test]
    fn args_map_onto_config_and_addr() {
        let cli = Cli::parse_from([
            "x",
            "--port",
            "9001",
            "--name",
            "sim-7",
            "--max-running",
            "3",
            "--time-scale",
            "0.5",
            "--cold-start-ms",
            "3000",
        ]);
        let config = cli.worker.to_config();
        assert_eq!(config.name, "sim-7");
        assert_eq!(config.max_running, 3);
        assert_eq!(config.time_scale, 0.5);
        assert_eq!(config.model, "sim-llama");
        assert_eq!(config.default_max_tokens, 16);
        assert_eq!(
            (config.cold_start_ms, config.cold_after_ms),
            (3000.0, 60_000.0)
        );
        assert_eq!(cli.worker.addr().to_string(), "127.0.0.1:9001");
    }
}
