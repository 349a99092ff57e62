//! Running system tools (`ip`, `iptables`, `kill`) behind a trait, so the commands a nemesis
//! issues can be checked without root, and run for real where root is available. Calls are
//! blocking and short (milliseconds).

use parking_lot::Mutex;
use std::process::Command;

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: String,
        stderr: String,
    },
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandOutput {
    pub success: bool,
    pub status: String,
    pub stdout: String,
    pub stderr: String,
}

pub trait CommandRunner: Send + Sync {
    /// Runs `program args...`; a non-zero exit is an `Ok` output with `success: false`.
    fn output(&self, program: &str, args: &[String]) -> Result<CommandOutput, CommandError>;

    /// Runs the command and requires it to succeed.
    fn run(&self, program: &str, args: &[String]) -> Result<CommandOutput, CommandError> {
        let output = self.output(program, args)?;
        if output.success {
            Ok(output)
        } else {
            Err(CommandError::Failed {
                command: render(program, args),
                status: output.status,
                stderr: output.stderr.trim().to_owned(),
            })
        }
    }

    /// Runs the command, tolerating failure (teardown of things that may not exist).
    fn run_lenient(&self, program: &str, args: &[String]) {
        match self.output(program, args) {
            Ok(output) if !output.success => tracing::debug!(
                command = %render(program, args),
                stderr = %output.stderr.trim(),
                "lenient command failed"
            ),
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "lenient command could not run"),
        }
    }
}

pub fn render(program: &str, args: &[String]) -> String {
    std::iter::once(program)
        .chain(args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Builds an argument vector from string slices.
pub fn args(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| (*s).to_owned()).collect()
}

/// Runs commands on this machine.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemRunner;

impl CommandRunner for SystemRunner {
    fn output(&self, program: &str, args: &[String]) -> Result<CommandOutput, CommandError> {
        let output = Command::new(program)
            .args(args)
            .output()
            .map_err(|source| CommandError::Spawn {
                command: render(program, args),
                source,
            })?;
        Ok(CommandOutput {
            success: output.status.success(),
            status: output.status.to_string(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
}

/// Records commands instead of running them; every command succeeds unless it contains one
/// of the `failing` fragments.
#[derive(Debug, Default)]
pub struct RecordingRunner {
    log: Mutex<Vec<String>>,
    failing: Vec<String>,
}

impl RecordingRunner {
    pub fn new() -> Self {
        Self::default()
    }

    /// Commands whose rendering contains `fragment` exit non-zero.
    pub fn failing_on(mut self, fragment: &str) -> Self {
        self.failing.push(fragment.to_owned());
        self
    }

    pub fn commands(&self) -> Vec<String> {
        self.log.lock().clone()
    }

    pub fn clear(&self) {
        self.log.lock().clear();
    }
}

impl CommandRunner for RecordingRunner {
    fn output(&self, program: &str, args: &[String]) -> Result<CommandOutput, CommandError> {
        let command = render(program, args);
        let success = !self.failing.iter().any(|f| command.contains(f.as_str()));
        self.log.lock().push(command);
        Ok(CommandOutput {
            success,
            status: if success {
                "exit status: 0"
            } else {
                "exit status: 1"
            }
            .to_owned(),
            ..CommandOutput::default()
        })
    }
}
