#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]
//! Simulated workers as separate OS processes, so a test can `kill -9` one. The
//! `switchyard-sim` binary is used when the workspace has built it beside `switchyard`;
//! otherwise the test binary re-executes itself as the worker (its `worker_process_entry`
//! test runs [`serve_if_child`]), so `cargo test -p switchyard-gateway` alone works too.

use std::process::Stdio;
use std::time::Duration;
use switchyard_sim::{SimConfig, SimWorker};
use switchyard_workers::WorkerSpec;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Set in a re-executed child: `NAME,TIME_SCALE`.
const CHILD_ENV: &str = "SWITCHYARD_TEST_SIM_WORKER";
const LISTENING: &str = "sim worker listening";

/// One simulated worker in its own process; killed when dropped.
pub struct SimProcess {
    pub name: String,
    pub url: String,
    child: Child,
    stderr_drain: tokio::task::JoinHandle<()>,
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        self.stderr_drain.abort();
    }
}

impl SimProcess {
    /// Starts a worker named `name` whose simulated time runs at `time_scale`; `entry` is
    /// the name of the test that calls [`serve_if_child`] in this test binary.
    pub async fn spawn(name: &str, time_scale: f64, entry: &str) -> Self {
        let gateway = std::path::Path::new(env!("CARGO_BIN_EXE_switchyard"));
        let sim = gateway.with_file_name(format!("switchyard-sim{}", std::env::consts::EXE_SUFFIX));
        let mut command = if sim.is_file() {
            let mut command = Command::new(sim);
            command.args([
                "worker",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--name",
                name,
            ]);
            command.args(["--time-scale", &time_scale.to_string()]);
            command
        } else {
            let mut command = Command::new(std::env::current_exe().unwrap());
            command.args([entry, "--exact", "--nocapture"]);
            command.env(CHILD_ENV, format!("{name},{time_scale}"));
            command
        };
        let mut child = command
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            // The re-executed child exits when this pipe closes, even if the test aborts.
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn a worker process");
        let stderr = child.stderr.take().unwrap();
        let mut lines = BufReader::new(stderr).lines();
        let find_addr = async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.contains(LISTENING) {
                    return line
                        .split_whitespace()
                        .find_map(|w| w.strip_prefix("addr="))
                        .expect("addr field")
                        .to_string();
                }
            }
            panic!("worker process exited before listening");
        };
        let addr = tokio::time::timeout(Duration::from_secs(30), find_addr)
            .await
            .expect("worker process did not start");
        let stderr_drain =
            tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            name: name.to_string(),
            url: format!("http://{addr}"),
            child,
            stderr_drain,
        }
    }

    /// `kill -9`: no goodbye to any connection.
    pub async fn sigkill(&mut self) {
        self.child.start_kill().expect("SIGKILL the worker");
        self.child.wait().await.expect("reap the worker");
    }

    /// Sets the worker's fault mode over its admin endpoint (`{"mode": ...}`).
    pub async fn set_fault(&self, fault: serde_json::Value) {
        let reply = crate::common::send(
            http::Method::POST,
            &format!("{}/admin/fault", self.url),
            &[("content-type", "application/json")],
            fault.to_string(),
        )
        .await;
        assert_eq!(reply.status, 200, "set fault: {}", reply.body);
    }

    pub fn spec(&self) -> WorkerSpec {
        WorkerSpec {
            name: self.name.clone(),
            url: self.url.clone(),
            models: Some(vec!["sim-llama".into()]),
            health_path: None,
            engine: None,
        }
    }
}

/// `count` workers `sim-0`, `sim-1`, … started one after the other.
pub async fn spawn_sims(count: usize, time_scale: f64, entry: &str) -> Vec<SimProcess> {
    let mut sims = Vec::new();
    for i in 0..count {
        sims.push(SimProcess::spawn(&format!("sim-{i}"), time_scale, entry).await);
    }
    sims
}

/// In a re-executed child, serves one simulated worker until its parent goes away; in a
/// normal test run, returns at once.
pub async fn serve_if_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (name, time_scale) = spec.split_once(',').expect("NAME,TIME_SCALE");
    let config = SimConfig {
        name: name.to_string(),
        time_scale: time_scale.parse().expect("time scale"),
        ..SimConfig::default()
    };
    let worker = SimWorker::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("bind a worker");
    eprintln!("{LISTENING} name={name} addr={}", worker.local_addr());
    let _ = tokio::task::spawn_blocking(|| {
        use std::io::Read;
        let mut sink = [0u8; 64];
        while std::io::stdin().read(&mut sink).is_ok_and(|n| n > 0) {}
    })
    .await;
    std::process::exit(0);
}
