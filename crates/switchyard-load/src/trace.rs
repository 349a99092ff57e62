//! The requests a run actually sent, in the order it sent them, with what came back. Workloads
//! whose next turn carries the previous answer depend on timing and on the answers, so an
//! offline replay (the simulator's sticky-session oracle) reads this instead of regenerating
//! the sequence from the seed.
//!
//! Format: JSON lines, one [`SentRequest`] per request, ordered by `index`.

use std::io::{BufRead, BufWriter, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::LoadError;
use crate::workload::PlannedRequest;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentMessage {
    pub role: String,
    pub content: String,
}

/// One request as sent, and its answer when one came back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SentRequest {
    /// Requests are numbered from 0 in the order they were sent.
    pub index: u64,
    /// Milliseconds after the run's start.
    pub sent_ms: f64,
    /// Which target (gateway replica) it went to, in command-line order.
    pub target: usize,
    pub session_id: Option<String>,
    pub user: Option<String>,
    pub messages: Vec<SentMessage>,
    /// The whole answer text; `None` when the request failed or never finished.
    pub answer: Option<String>,
    /// The worker that answered (`x-switchyard-worker`), when known.
    pub worker: Option<String>,
    /// Time to the first content, in milliseconds, when an answer came back: lets a trace
    /// show where latency went (per worker, per turn, over time), not only what was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    /// Time to the whole answer, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<f64>,
    /// Prompt tokens and the cached share the worker reported, when an answer came back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
}

impl SentRequest {
    pub(crate) fn new(index: u64, sent_ms: f64, target: usize, planned: &PlannedRequest) -> Self {
        Self {
            index,
            sent_ms,
            target,
            session_id: planned.session_id.clone(),
            user: planned.user.clone(),
            messages: planned
                .messages
                .iter()
                .map(|message| SentMessage {
                    role: message.role.to_owned(),
                    content: message.content.clone(),
                })
                .collect(),
            answer: None,
            worker: None,
            ttft_ms: None,
            e2e_ms: None,
            prompt_tokens: None,
            cached_tokens: None,
        }
    }
}

fn trace_error(path: &Path, source: std::io::Error) -> LoadError {
    LoadError::Trace {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `requests` as JSON lines.
pub fn write_trace(path: &Path, requests: &[SentRequest]) -> Result<(), LoadError> {
    let file = std::fs::File::create(path).map_err(|source| trace_error(path, source))?;
    let mut out = BufWriter::new(file);
    for request in requests {
        serde_json::to_writer(&mut out, request)?;
        out.write_all(b"\n")
            .map_err(|source| trace_error(path, source))?;
    }
    out.flush().map_err(|source| trace_error(path, source))
}

/// Reads a trace written by [`write_trace`], in send order.
pub fn read_trace(path: &Path) -> Result<Vec<SentRequest>, LoadError> {
    let file = std::fs::File::open(path).map_err(|source| trace_error(path, source))?;
    let mut requests = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let line = line.map_err(|source| trace_error(path, source))?;
        if !line.trim().is_empty() {
            requests.push(serde_json::from_str::<SentRequest>(&line)?);
        }
    }
    requests.sort_by_key(|request| request.index);
    Ok(requests)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::ChatMessage;

    #[test]
    fn a_trace_reads_back_as_written_in_send_order() {
        let planned = PlannedRequest {
            session_id: None,
            user: Some("u".into()),
            messages: vec![ChatMessage::system("be brief"), ChatMessage::user("hi")],
            turn: None,
        };
        let mut first = SentRequest::new(0, 1.5, 0, &planned);
        first.answer = Some("hello there".into());
        first.worker = Some("sim-1".into());
        first.ttft_ms = Some(12.5);
        first.e2e_ms = Some(80.0);
        first.prompt_tokens = Some(40);
        first.cached_tokens = Some(32);
        let second = SentRequest::new(1, 2.0, 2, &planned);
        let dir = std::env::temp_dir().join(format!("sy-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("trace.jsonl");
        write_trace(&path, &[second.clone(), first.clone()]).unwrap();
        assert_eq!(read_trace(&path).unwrap(), vec![first, second]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
