//! The `switchyard` binary as real child processes: one gateway, a run to its exit, or three
//! replicas of one Raft group.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::{ADMIN_KEY, CaptureWorker};

/// The `switchyard` binary as a real child process; killed on drop.
pub struct GatewayProcess {
    pub child: tokio::process::Child,
    pub base_url: String,
    stderr_drain: tokio::task::JoinHandle<()>,
    /// The last lines the process wrote to stderr, for failure messages.
    pub recent_log: std::sync::Arc<parking_lot::Mutex<std::collections::VecDeque<String>>>,
}

impl GatewayProcess {
    /// The last lines of the process's log, one per line.
    pub fn log_tail(&self) -> String {
        self.recent_log
            .lock()
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        self.stderr_drain.abort();
    }
}

impl GatewayProcess {
    /// [`GatewayProcess::spawn`] with owned arguments.
    pub async fn spawn_with(args: &[String]) -> Self {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Self::spawn(&args).await
    }

    /// Starts `switchyard serve` with `args` (plus `--port 0`) and waits for its listening line.
    pub async fn spawn(args: &[&str]) -> Self {
        Self::spawn_env(args, &[]).await
    }

    /// [`GatewayProcess::spawn`] with extra environment variables.
    pub async fn spawn_env(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .arg("serve")
            .args(args)
            .args(["--port", "0"])
            .envs(env.iter().copied())
            .env("RUST_LOG", "info")
            .env("SWITCHYARD_ADMIN_API_KEY", ADMIN_KEY)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn switchyard");
        let stderr = child.stderr.take().unwrap();
        let mut lines = BufReader::new(stderr).lines();
        let find_addr = async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.contains("switchyard gateway listening") {
                    let addr = line
                        .split_whitespace()
                        .find_map(|w| w.strip_prefix("addr="))
                        .expect("addr field")
                        .to_string();
                    return addr;
                }
            }
            panic!("gateway exited before listening");
        };
        let addr = tokio::time::timeout(Duration::from_secs(20), find_addr)
            .await
            .expect("gateway did not start");
        // Keep draining stderr so the child never blocks on a full pipe.
        let recent_log =
            std::sync::Arc::new(parking_lot::Mutex::new(std::collections::VecDeque::new()));
        let kept = recent_log.clone();
        let stderr_drain = tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let mut kept = kept.lock();
                if kept.len() == 200 {
                    kept.pop_front();
                }
                kept.push_back(line);
            }
        });
        Self {
            child,
            base_url: format!("http://{addr}"),
            stderr_drain,
            recent_log,
        }
    }
}

/// Runs the `switchyard` binary to completion and returns (exit code, stderr).
pub async fn run_to_exit(args: &[&str]) -> (i32, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(args)
        .output()
        .await
        .expect("run switchyard");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A free loopback port (bound once, then released for a child process to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The `serve` arguments of replica `id` of a Raft group: Raft on `raft`, state in `data`,
/// joining the group at `join` unless it is the first node.
pub fn replica_args(
    config: &Path,
    id: u64,
    raft: &str,
    data: &Path,
    join: Option<&str>,
) -> Vec<String> {
    let mut args: Vec<String> = [
        "--config",
        config.to_str().unwrap(),
        "--node-id",
        &id.to_string(),
        "--raft-addr",
        raft,
        "--data-dir",
        data.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(join) = join {
        args.extend(["--join".to_string(), join.to_string()]);
    }
    args
}

/// Three `switchyard serve` replicas of one Raft group on `config`: node 1 on a fixed Raft
/// port, nodes 2 and 3 joining it; each with its own data dir under `dir`.
pub async fn spawn_three_replicas(config: &Path, dir: &Path) -> Vec<GatewayProcess> {
    spawn_three_replicas_env(config, dir, &[]).await
}

/// [`spawn_three_replicas`] with extra environment variables for every replica.
pub async fn spawn_three_replicas_env(
    config: &Path,
    dir: &Path,
    env: &[(&str, &str)],
) -> Vec<GatewayProcess> {
    let raft1 = format!("127.0.0.1:{}", free_port());
    let mut nodes = Vec::new();
    for id in 1..=3u64 {
        let data = dir.join(format!("node{id}"));
        let args = if id == 1 {
            replica_args(config, id, &raft1, &data, None)
        } else {
            replica_args(config, id, "127.0.0.1:0", &data, Some(&raft1))
        };
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        nodes.push(GatewayProcess::spawn_env(&args, env).await);
    }
    nodes
}

/// The config of a replica group: its cluster secret, `body` (tenants, gates, admin keys),
/// and one worker `w` at `worker_url` serving `sim-llama`.
pub fn group_config(secret: &str, body: &str, worker_url: &str) -> String {
    format!(
        "[cluster]\nsecret = \"{secret}\"\n{body}\n[[workers]]\nname = \"w\"\nurl = \"{worker_url}\"\nmodels = [\"sim-llama\"]\n"
    )
}

/// A capture worker and three replicas of one Raft group in front of it ([`group_config`]).
pub struct ReplicaGroup {
    pub nodes: Vec<GatewayProcess>,
    pub bases: Vec<String>,
    /// The config file and the replicas' data dirs.
    pub dir: tempfile::TempDir,
    pub worker: CaptureWorker,
}

impl ReplicaGroup {
    /// The worker reports `usage` (prompt, completion tokens) with every answer.
    pub async fn start(usage: (u64, u64), secret: &str, body: &str) -> Self {
        Self::start_env(usage, secret, body, &[]).await
    }

    /// [`ReplicaGroup::start`] with extra environment variables for every replica.
    pub async fn start_env(
        usage: (u64, u64),
        secret: &str,
        body: &str,
        env: &[(&str, &str)],
    ) -> Self {
        let worker = CaptureWorker::start(usage).await;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("switchyard.toml");
        std::fs::write(&path, group_config(secret, body, &worker.url)).unwrap();
        let nodes = spawn_three_replicas_env(&path, dir.path(), env).await;
        let bases = nodes.iter().map(|n| n.base_url.clone()).collect();
        Self {
            nodes,
            bases,
            dir,
            worker,
        }
    }
}

/// Runs `benches/e2e/openai_sdk_check.py` with `args` (within 60 s) and returns its stdout,
/// once it has succeeded.
pub async fn openai_sdk_check(args: &[&str]) -> String {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../benches/e2e/openai_sdk_check.py"
    );
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("python3")
            .arg(script)
            .args(args)
            .output(),
    )
    .await
    .expect("the SDK script finished")
    .expect("python3 ran");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    stdout
}
