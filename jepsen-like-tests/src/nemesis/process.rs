//! One node's OS process: start (output appended to its log file), kill -9, SIGSTOP/SIGCONT,
//! graceful stop. Signals other than SIGKILL go through `kill(1)`, so no libc is needed. A
//! dropped process is killed: a failed test never leaves nodes behind.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("cannot open log {path}: {source}")]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("the process is already running (pid {0})")]
    AlreadyRunning(u32),
    #[error("the process is not running")]
    NotRunning,
    #[error("signal {signal} to pid {pid} failed: {detail}")]
    Signal {
        signal: &'static str,
        pid: u32,
        detail: String,
    },
    #[error("waiting for pid {pid}: {source}")]
    Wait { pid: u32, source: std::io::Error },
}

/// How to start the process. `wrapper` is prepended (e.g. `ip netns exec <ns>`, which execs
/// the program in place, so the pid is the program's own).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessSpec {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub wrapper: Vec<String>,
    pub log_path: PathBuf,
}

#[derive(Debug)]
pub struct ManagedProcess {
    spec: ProcessSpec,
    child: Option<Child>,
    paused: bool,
    starts: u32,
}

fn signal(signal: &'static str, pid: u32) -> Result<(), ProcessError> {
    let output = Command::new("kill")
        .args(["-s", signal, &pid.to_string()])
        .output()
        .map_err(|e| ProcessError::Signal {
            signal,
            pid,
            detail: e.to_string(),
        })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(ProcessError::Signal {
            signal,
            pid,
            detail: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        })
    }
}

impl ManagedProcess {
    pub fn new(spec: ProcessSpec) -> Self {
        Self {
            spec,
            child: None,
            paused: false,
            starts: 0,
        }
    }

    pub fn spec(&self) -> &ProcessSpec {
        &self.spec
    }

    /// Replaces the arguments used by the next start (first start vs. restart from disk).
    pub fn set_args(&mut self, args: Vec<String>) {
        self.spec.args = args;
    }

    pub fn set_env(&mut self, env: Vec<(String, String)>) {
        self.spec.env = env;
    }

    pub fn starts(&self) -> u32 {
        self.starts
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Whether the process is alive (a paused process is alive); reaps it if it exited.
    pub fn is_running(&mut self) -> bool {
        let exited = match self.child.as_mut().map(Child::try_wait) {
            None => return false,
            Some(Ok(None)) => false,
            Some(Ok(Some(status))) => {
                tracing::info!(program = %self.spec.program, %status, "node process exited");
                true
            }
            Some(Err(_)) => true,
        };
        if exited {
            self.child = None;
            self.paused = false;
        }
        !exited
    }

    pub fn start(&mut self) -> Result<u32, ProcessError> {
        if self.is_running() {
            return Err(ProcessError::AlreadyRunning(self.pid().unwrap_or_default()));
        }
        let log_error = |source| ProcessError::Log {
            path: self.spec.log_path.clone(),
            source,
        };
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.spec.log_path)
            .map_err(log_error)?;
        self.starts += 1;
        writeln!(log, "--- start #{} ---", self.starts).map_err(log_error)?;
        let stderr = log.try_clone().map_err(log_error)?;
        let mut line = self
            .spec
            .wrapper
            .iter()
            .chain([&self.spec.program])
            .chain(&self.spec.args);
        let program = line.next().cloned().unwrap_or_default();
        let child = Command::new(&program)
            .args(line)
            .envs(self.spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(stderr)
            .spawn()
            .map_err(|source| ProcessError::Spawn { program, source })?;
        let pid = child.id();
        self.child = Some(child);
        self.paused = false;
        Ok(pid)
    }

    /// kill -9 and reap.
    pub fn kill9(&mut self) -> Result<ExitStatus, ProcessError> {
        let mut child = self.child.take().ok_or(ProcessError::NotRunning)?;
        self.paused = false;
        let pid = child.id();
        // SIGKILL also ends a stopped process; an already-exited one just gets reaped.
        let _ = child.kill();
        child
            .wait()
            .map_err(|source| ProcessError::Wait { pid, source })
    }

    pub fn pause(&mut self) -> Result<(), ProcessError> {
        let pid = self.running_pid()?;
        signal("STOP", pid)?;
        self.paused = true;
        Ok(())
    }

    pub fn resume(&mut self) -> Result<(), ProcessError> {
        let pid = self.running_pid()?;
        signal("CONT", pid)?;
        self.paused = false;
        Ok(())
    }

    /// Resumes the process if paused and sends SIGTERM, without waiting (poll `is_running`,
    /// then `kill9` whatever ignored it).
    pub fn request_stop(&mut self) -> Result<(), ProcessError> {
        let pid = self.running_pid()?;
        if self.paused {
            self.resume()?;
        }
        signal("TERM", pid)
    }

    /// SIGTERM, then kill -9 if it has not exited within `grace`.
    pub fn terminate(&mut self, grace: Duration) -> Result<ExitStatus, ProcessError> {
        let pid = self.running_pid()?;
        if self.paused {
            self.resume()?;
        }
        signal("TERM", pid)?;
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            let child = self.child.as_mut().ok_or(ProcessError::NotRunning)?;
            match child.try_wait() {
                Ok(Some(status)) => {
                    self.child = None;
                    return Ok(status);
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(source) => return Err(ProcessError::Wait { pid, source }),
            }
        }
        tracing::warn!(pid, "node ignored SIGTERM; killing it");
        self.kill9()
    }

    fn running_pid(&mut self) -> Result<u32, ProcessError> {
        if !self.is_running() {
            return Err(ProcessError::NotRunning);
        }
        self.pid().ok_or(ProcessError::NotRunning)
    }
}

impl Drop for ManagedProcess {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = self.kill9();
        }
    }
}

/// The scheduler state of a pid from `/proc/<pid>/stat` (`R`, `S`, `T` = stopped, ...).
pub fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is parenthesised and may contain spaces: the state follows the last `)`.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
}
