//! JSON-lines persistence of histories: one entry per line, written as it happens (so a run
//! that dies still leaves what it recorded) and read back for checking.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::events::{Entry, History};

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("history file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("history file {path}, line {line}: {source}")]
    Parse {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error("cannot encode a history entry: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("malformed history: {0}")]
    Malformed(String),
    #[error("history file incomplete: {0}")]
    Incomplete(String),
}

/// Appends entries to a JSON-lines file, flushing after each line.
#[derive(Debug)]
pub struct HistoryWriter {
    path: PathBuf,
    out: BufWriter<File>,
}

impl HistoryWriter {
    pub fn create(path: impl AsRef<Path>) -> Result<Self, HistoryError> {
        let path = path.as_ref().to_path_buf();
        let file = File::create(&path).map_err(|source| HistoryError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(Self {
            path,
            out: BufWriter::new(file),
        })
    }

    pub fn append(&mut self, entry: &Entry) -> Result<(), HistoryError> {
        let line = serde_json::to_string(entry)?;
        let io = |source| HistoryError::Io {
            path: self.path.clone(),
            source,
        };
        self.out.write_all(line.as_bytes()).map_err(io)?;
        self.out.write_all(b"\n").map_err(io)?;
        self.out.flush().map_err(io)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

pub fn write_history(path: impl AsRef<Path>, history: &History) -> Result<(), HistoryError> {
    let mut writer = HistoryWriter::create(path)?;
    for entry in &history.entries {
        writer.append(entry)?;
    }
    Ok(())
}

/// Reads a JSON-lines history; blank lines are ignored, anything else must parse.
pub fn read_history(path: impl AsRef<Path>) -> Result<History, HistoryError> {
    let path = path.as_ref().to_path_buf();
    let io = |source| HistoryError::Io {
        path: path.clone(),
        source,
    };
    let reader = BufReader::new(File::open(&path).map_err(io)?);
    let mut entries = Vec::new();
    for (number, line) in reader.lines().enumerate() {
        let line = line.map_err(io)?;
        if line.trim().is_empty() {
            continue;
        }
        let entry = serde_json::from_str(&line).map_err(|source| HistoryError::Parse {
            path: path.clone(),
            line: number + 1,
            source,
        })?;
        entries.push(entry);
    }
    Ok(History { entries })
}
