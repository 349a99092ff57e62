//! Command-line front end shared by `switchyard-sim load` and `switchyard demo --load`.

use std::path::PathBuf;
use std::time::Duration;

use crate::client_retry::{DEFAULT_MAX_CLIENT_RETRIES, parse_client_retry_mix};
use crate::priority::parse_priority_mix;
use crate::{LoadConfig, LoadError, LoadReport, Workload, run};

#[derive(clap::Args, Clone, Debug)]
pub struct LoadArgs {
    /// Base URL of the OpenAI-compatible target (plain http, loopback only). Repeat it for
    /// several gateway replicas: each request picks one uniformly at random (seeded).
    #[arg(
        long = "target",
        value_name = "URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub targets: Vec<String>,
    /// Mean requests per second (Poisson arrivals).
    #[arg(long, default_value_t = LoadConfig::DEFAULT_RATE)]
    pub rate: f64,
    /// How long to issue requests, in seconds.
    #[arg(long, default_value_t = 30.0)]
    pub duration: f64,
    #[arg(long, value_enum, default_value_t = Workload::Multiturn)]
    pub workload: Workload,
    #[arg(long, default_value_t = LoadConfig::DEFAULT_SEED)]
    pub seed: u64,
    /// Also write the report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Model id; by default the first id from GET /v1/models.
    #[arg(long)]
    pub model: Option<String>,
    #[arg(long, default_value_t = LoadConfig::DEFAULT_MAX_TOKENS)]
    pub max_tokens: u32,
    /// Arrivals beyond this many outstanding requests are dropped, never queued.
    #[arg(long, default_value_t = LoadConfig::DEFAULT_MAX_IN_FLIGHT)]
    pub max_in_flight: usize,
    /// Per-request timeout in seconds.
    #[arg(long, default_value_t = 60.0)]
    pub timeout: f64,
    /// Extra request header "Name: value" (repeatable).
    #[arg(long = "header", value_name = "K: V")]
    pub headers: Vec<String>,
    /// Sent as "authorization: Bearer KEY".
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,
    /// Send non-streaming requests (TTFT then equals end-to-end latency).
    #[arg(long)]
    pub no_stream: bool,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// Priority classes to ask for (x-switchyard-priority), e.g. "P0=0.2,P1=0.5,P2=0.3";
    /// the report then has per-class figures.
    #[arg(long, value_name = "MIX")]
    pub priority_mix: Option<String>,
    /// Client groups and their shares, e.g. "honor:0.5,fixed1s:0.5": on 429/503 `honor`
    /// waits Retry-After and retries with x-switchyard-retry-count, `fixed<T>` (fixed1s,
    /// fixed500ms) retries every T ignoring it, `none` gives up.
    #[arg(long, value_name = "MIX")]
    pub client_retry: Option<String>,
    /// Retries per request at most (with --client-retry).
    #[arg(long, default_value_t = DEFAULT_MAX_CLIENT_RETRIES)]
    pub max_client_retries: u32,
    /// Add a per-second series (sent, ok, errors, admitted, workers) to the JSON report.
    #[arg(long)]
    pub timeline: bool,
    /// Write every request sent (messages, answer, worker) to FILE as JSON lines, in send
    /// order, for an offline replay such as `switchyard-sim oracle --trace`.
    #[arg(long, value_name = "FILE")]
    pub trace_out: Option<PathBuf>,
}

impl LoadArgs {
    pub fn to_config(&self) -> Result<LoadConfig, LoadError> {
        let mut headers = self
            .headers
            .iter()
            .map(|header| parse_header(header))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(key) = &self.api_key {
            headers.push(("authorization".to_owned(), format!("Bearer {key}")));
        }
        let (target, extra_targets) = self
            .targets
            .split_first()
            .ok_or_else(|| LoadError::InvalidConfig("at least one --target".into()))?;
        let mut config = LoadConfig::new(target.clone());
        config.extra_targets = extra_targets.to_vec();
        config.rate = self.rate;
        config.duration = seconds("duration", self.duration)?;
        config.workload = self.workload;
        config.seed = self.seed;
        config.model = self.model.clone();
        config.max_tokens = self.max_tokens;
        config.max_in_flight = self.max_in_flight;
        config.request_timeout = seconds("timeout", self.timeout)?;
        config.headers = headers;
        config.progress = !self.quiet;
        config.stream = !self.no_stream;
        config.priority_mix = self
            .priority_mix
            .as_deref()
            .map(parse_priority_mix)
            .transpose()?;
        config.client_retry = self
            .client_retry
            .as_deref()
            .map(parse_client_retry_mix)
            .transpose()?;
        config.max_client_retries = self.max_client_retries;
        config.timeline = self.timeline;
        config.trace_out = self.trace_out.clone();
        config.validate()?;
        Ok(config)
    }
}

fn parse_header(header: &str) -> Result<(String, String), LoadError> {
    let (name, value) = header
        .split_once(':')
        .ok_or_else(|| LoadError::InvalidHeader {
            header: header.to_owned(),
            reason: "expected \"Name: value\"".to_owned(),
        })?;
    Ok((name.trim().to_owned(), value.trim().to_owned()))
}

fn seconds(what: &str, value: f64) -> Result<Duration, LoadError> {
    Duration::try_from_secs_f64(value)
        .map_err(|error| LoadError::InvalidConfig(format!("{what} {value}: {error}")))
}

/// Runs the load described by the args, prints progress to stderr and the final table to stdout,
/// writes the JSON report if --json was given.
pub async fn run_cli(args: LoadArgs) -> Result<LoadReport, LoadError> {
    let config = args.to_config()?;
    let report = run(config).await?;
    let targets: Vec<&str> = report.targets.keys().map(String::as_str).collect();
    println!(
        "switchyard load: {} workload={:?} model={} rate={}/s",
        targets.join(" "),
        report.workload,
        report.model,
        report.configured_rate
    );
    print!("{}", report.render_table());
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, json).map_err(|source| LoadError::WriteReport {
            path: path.clone(),
            source,
        })?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::PriorityClass;

    #[derive(clap::Parser)]
    struct TestCli {
        #[command(flatten)]
        load: LoadArgs,
    }

    fn parse(args: &[&str]) -> LoadArgs {
        let argv = std::iter::once("load").chain(args.iter().copied());
        TestCli::try_parse_from(argv).expect("valid args").load
    }

    #[test]
    fn defaults_match_the_config_defaults() {
        let config = parse(&[]).to_config().expect("valid");
        assert_eq!(config.target, "http://127.0.0.1:8080");
        assert!(config.extra_targets.is_empty());
        assert!(config.priority_mix.is_none() && config.client_retry.is_none());
        assert_eq!(config.max_client_retries, 5);
        assert!(!config.timeline);
        assert_eq!(config.max_tokens, 32);
        assert_eq!(config.max_in_flight, 1024);
        assert_eq!(config.request_timeout, Duration::from_secs(60));
        assert_eq!(config.workload, Workload::Multiturn);
        assert!(config.stream && config.progress);
    }

    #[test]
    fn every_flag_reaches_the_config() {
        let args = parse(&[
            "--target",
            "http://127.0.0.1:9",
            "--target",
            "http://localhost:10",
            "--priority-mix",
            "P0=0.2,P1=0.5,P2=0.3",
            "--client-retry",
            "honor:0.5,fixed1s:0.5",
            "--max-client-retries",
            "3",
            "--timeline",
            "--rate",
            "30",
            "--duration",
            "2.5",
            "--workload",
            "hotkey",
            "--seed",
            "7",
            "--model",
            "m",
            "--max-tokens",
            "8",
            "--max-in-flight",
            "5",
            "--timeout",
            "0.5",
            "--header",
            "x-priority: p1",
            "--header",
            "x-a:b",
            "--api-key",
            "sk-1",
            "--no-stream",
            "--quiet",
            "--json",
            "/tmp/out.json",
        ]);
        assert_eq!(args.json, Some(PathBuf::from("/tmp/out.json")));
        let config = args.to_config().expect("valid");
        assert_eq!(config.rate, 30.0);
        assert_eq!(config.duration, Duration::from_millis(2500));
        assert_eq!(config.workload, Workload::Hotkey);
        assert_eq!(
            (config.seed, config.max_tokens, config.max_in_flight),
            (7, 8, 5)
        );
        assert_eq!(config.model.as_deref(), Some("m"));
        assert_eq!(config.request_timeout, Duration::from_millis(500));
        let expected: Vec<(String, String)> = [
            ("x-priority", "p1"),
            ("x-a", "b"),
            ("authorization", "Bearer sk-1"),
        ]
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
        assert_eq!(config.headers, expected);
        assert!(!config.stream && !config.progress);
        assert_eq!(config.target, "http://127.0.0.1:9");
        assert_eq!(config.extra_targets, ["http://localhost:10"]);
        let classes: Vec<PriorityClass> = config
            .priority_mix
            .expect("mix")
            .options()
            .map(|(class, _)| *class)
            .collect();
        assert_eq!(
            classes,
            [PriorityClass::P0, PriorityClass::P1, PriorityClass::P2]
        );
        let groups: Vec<String> = config
            .client_retry
            .expect("mix")
            .options()
            .map(|(mode, _)| mode.label())
            .collect();
        assert_eq!(groups, ["honor", "fixed1s"]);
        assert_eq!(config.max_client_retries, 3);
        assert!(config.timeline);
    }

    #[test]
    fn malformed_values_are_rejected() {
        assert!(parse(&["--header", "no-colon"]).to_config().is_err());
        assert!(parse(&["--duration=-1"]).to_config().is_err());
        assert!(parse(&["--rate", "0"]).to_config().is_err());
        assert!(parse(&["--priority-mix", "P0=0.5"]).to_config().is_err());
        assert!(parse(&["--client-retry", "honor"]).to_config().is_err());
        assert!(parse(&["--max-client-retries", "99"]).to_config().is_err());
        assert!(
            parse(&["--target", "http://192.0.2.1:80"])
                .to_config()
                .is_err()
        );
    }
}
