//! The sticky-session oracle: the requests a load run sent, replayed offline with every
//! conversation pinned to one worker (a new conversation goes to the worker with the fewest
//! conversations in progress) through the simulator's own KV model, each worker keeping the
//! blocks of the answers it gave. No router that follows conversations can beat it by much, so
//! a router's physical hit rate is judged as a share of the oracle's. It also measures the
//! trace's working set, so the simulated KV can be sized against it.
//!
//! With `--trace` it replays the load tool's `--trace-out` file: the prompts actually sent,
//! in send order, with the answers that came back. Without, it plans the workload's sequence
//! for a seed itself, each answer being the simulator's and back before the next request
//! (used to size the KV before a run).

use std::collections::HashMap;
use std::path::PathBuf;

use serde::Serialize;
use switchyard_load::{
    LoadError, SentRequest, Workload, WorkloadGenerator, coefficient_of_variation, read_trace,
};

use crate::replay::{ChatBlocks, KvReplay, simulated_answer};

/// Command-line arguments of `switchyard-sim oracle`.
#[derive(clap::Args, Clone, Debug)]
pub struct OracleArgs {
    /// Replay this trace (the load tool's `--trace-out`) instead of planning a sequence.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// The workload to plan when no trace is given.
    #[arg(long, value_enum, default_value_t = Workload::Agentic)]
    pub workload: Workload,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// How many requests to plan (without `--trace`).
    #[arg(long, default_value_t = 3600)]
    pub requests: usize,
    /// Answer length of the planned sequence (the load tool's `--max-tokens`).
    #[arg(long, default_value_t = 32)]
    pub max_tokens: usize,
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// KV blocks per worker; by default sized so the working set fills `--working-set-share`
    /// of the fleet's KV.
    #[arg(long)]
    pub kv_blocks: Option<usize>,
    #[arg(long, default_value_t = 0.75)]
    pub working_set_share: f64,
    /// Also write the report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OracleReport {
    /// The trace replayed, or `None` for a planned sequence.
    pub trace: Option<PathBuf>,
    pub workload: Workload,
    pub seed: u64,
    pub requests: usize,
    /// Requests whose answer came back (their answer blocks are cached).
    pub answered: usize,
    pub conversations: usize,
    /// Mean distinct blocks of the conversations in progress (each counted at its latest
    /// prompt and answer; a shared system prompt once), over the last 80 % of the sequence.
    pub working_set_blocks: usize,
    pub workers: usize,
    pub kv_blocks: usize,
    pub prompt_tokens: u64,
    /// Conversations pinned to one worker each.
    pub sticky_hit_rate: f64,
    /// CV of the requests each worker served under the pinning.
    pub sticky_load_cv: f64,
    /// One cache holding the whole fleet's KV (no placement at all).
    pub pooled_hit_rate: f64,
}

/// One replayed request: which conversation (by opening) and its blocks.
struct Traced {
    conversation: usize,
    blocks: ChatBlocks,
}

struct Trace {
    requests: Vec<Traced>,
    answered: usize,
    /// Index of each conversation's last request.
    last_request: Vec<usize>,
}

impl Trace {
    fn new() -> Self {
        Self {
            requests: Vec::new(),
            answered: 0,
            last_request: Vec::new(),
        }
    }

    /// Appends one request; conversations are told apart by their opening (system prompt
    /// and first user message), as the gateway names anonymous chats.
    fn push(
        &mut self,
        ids: &mut HashMap<(String, String), usize>,
        messages: &[(&str, &str)],
        answer: Option<&str>,
    ) {
        let opening = |at: usize| messages.get(at).map(|m| m.1.to_owned()).unwrap_or_default();
        let next_id = ids.len();
        let conversation = *ids.entry((opening(0), opening(1))).or_insert(next_id);
        let index = self.requests.len();
        if conversation == self.last_request.len() {
            self.last_request.push(index);
        }
        self.last_request[conversation] = index;
        self.answered += usize::from(answer.is_some());
        self.requests.push(Traced {
            conversation,
            blocks: ChatBlocks::answered(messages.iter().copied(), answer),
        });
    }
}

fn replayed(sent: &[SentRequest]) -> Trace {
    let mut trace = Trace::new();
    let mut ids = HashMap::new();
    for request in sent {
        let messages: Vec<(&str, &str)> = request
            .messages
            .iter()
            .map(|m| (m.role.as_str(), m.content.as_str()))
            .collect();
        trace.push(&mut ids, &messages, request.answer.as_deref());
    }
    trace
}

fn planned(workload: Workload, seed: u64, count: usize, max_tokens: usize) -> Trace {
    let mut generator = WorkloadGenerator::new(workload, seed);
    let mut trace = Trace::new();
    let mut ids = HashMap::new();
    for _ in 0..count {
        let request = generator.next_request();
        let messages: Vec<(&str, &str)> = request
            .messages
            .iter()
            .map(|m| (m.role, m.content.as_str()))
            .collect();
        let answer = simulated_answer(messages.iter().copied(), max_tokens);
        trace.push(&mut ids, &messages, Some(&answer));
        if let Some(ticket) = request.turn {
            generator.record_answer(ticket, Some(&answer));
        }
    }
    trace
}

/// Distinct blocks the conversations in progress hold, averaged over the steady part.
fn working_set(trace: &Trace) -> usize {
    let mut references: HashMap<u64, usize> = HashMap::new();
    let mut held: HashMap<usize, &[u64]> = HashMap::new();
    let skip = trace.requests.len() / 5;
    let (mut sum, mut samples) = (0usize, 0usize);
    for (index, request) in trace.requests.iter().enumerate() {
        let before = held.get(&request.conversation).map_or(0, |keys| keys.len());
        for key in request.blocks.computed.iter().skip(before) {
            *references.entry(*key).or_insert(0) += 1;
        }
        held.insert(request.conversation, &request.blocks.computed);
        if trace.last_request[request.conversation] == index {
            for key in &request.blocks.computed {
                if let Some(count) = references.get_mut(key) {
                    *count -= 1;
                    if *count == 0 {
                        references.remove(key);
                    }
                }
            }
            held.remove(&request.conversation);
        }
        if index >= skip {
            sum += references.len();
            samples += 1;
        }
    }
    sum / samples.max(1)
}

pub fn run_oracle(args: &OracleArgs) -> Result<OracleReport, LoadError> {
    let trace = match &args.trace {
        Some(path) => replayed(&read_trace(path)?),
        None => planned(args.workload, args.seed, args.requests, args.max_tokens),
    };
    let workers = args.workers.max(1);
    let working_set_blocks = working_set(&trace);
    let share = if args.working_set_share > 0.0 {
        args.working_set_share
    } else {
        1.0
    };
    let kv_blocks = args
        .kv_blocks
        .unwrap_or_else(|| (working_set_blocks as f64 / share / workers as f64).ceil() as usize);

    let mut caches: Vec<KvReplay> = (0..workers).map(|_| KvReplay::new(kv_blocks)).collect();
    let mut pooled = KvReplay::new(kv_blocks * workers);
    let mut live = vec![0usize; workers];
    let mut served = vec![0u64; workers];
    let mut home: HashMap<usize, usize> = HashMap::new();
    let (mut prompt_tokens, mut sticky_cached, mut pooled_cached) = (0u64, 0u64, 0u64);
    for (index, request) in trace.requests.iter().enumerate() {
        let worker = *home.entry(request.conversation).or_insert_with(|| {
            let fewest = (0..workers)
                .min_by_key(|&w| (live[w], served[w], w))
                .unwrap_or(0);
            live[fewest] += 1;
            fewest
        });
        prompt_tokens += request.blocks.prompt_tokens as u64;
        sticky_cached += caches[worker].serve(&request.blocks) as u64;
        pooled_cached += pooled.serve(&request.blocks) as u64;
        served[worker] += 1;
        if trace.last_request[request.conversation] == index {
            live[worker] = live[worker].saturating_sub(1);
        }
    }
    let rate = |cached: u64| cached as f64 / prompt_tokens.max(1) as f64;
    Ok(OracleReport {
        trace: args.trace.clone(),
        workload: args.workload,
        seed: args.seed,
        requests: trace.requests.len(),
        answered: trace.answered,
        conversations: trace.last_request.len(),
        working_set_blocks,
        workers,
        kv_blocks,
        prompt_tokens,
        sticky_hit_rate: rate(sticky_cached),
        sticky_load_cv: coefficient_of_variation(&served),
        pooled_hit_rate: rate(pooled_cached),
    })
}

#[cfg(test)]
mod tests {
    use switchyard_load::{SentMessage, write_trace};

    use super::*;
    use crate::config::BLOCK_TOKENS;

    fn args(kv_blocks: Option<usize>) -> OracleArgs {
        OracleArgs {
            trace: None,
            workload: Workload::Agentic,
            seed: 3,
            requests: 1000,
            max_tokens: 32,
            workers: 4,
            kv_blocks,
            working_set_share: 0.75,
            json: None,
        }
    }

    #[test]
    fn sizing_follows_the_working_set_and_pinning_beats_nothing_shared() {
        let report = run_oracle(&args(None)).unwrap();
        assert_eq!((report.requests, report.answered), (1000, 1000));
        assert!(report.conversations > 96, "{report:?}");
        let fleet = report.kv_blocks * 4;
        let share = report.working_set_blocks as f64 / fleet as f64;
        assert!((0.74..=0.76).contains(&share), "{report:?}");
        assert!(report.sticky_hit_rate > 0.5, "{report:?}");
        assert!(report.sticky_load_cv < 0.2, "{report:?}");
        // Deterministic for a seed.
        assert_eq!(run_oracle(&args(None)).unwrap(), report);
        // A tiny cache keeps less.
        let starved = run_oracle(&args(Some(report.kv_blocks / 8))).unwrap();
        assert!(
            starved.sticky_hit_rate < report.sticky_hit_rate,
            "{starved:?}"
        );
    }

    fn sent(index: u64, messages: &[(&str, &str)], answer: Option<&str>) -> SentRequest {
        SentRequest {
            index,
            sent_ms: index as f64,
            target: 0,
            session_id: None,
            user: None,
            messages: messages
                .iter()
                .map(|(role, content)| SentMessage {
                    role: (*role).to_owned(),
                    content: (*content).to_owned(),
                })
                .collect(),
            answer: answer.map(str::to_owned),
            worker: None,
            ttft_ms: None,
            e2e_ms: None,
            prompt_tokens: None,
            cached_tokens: None,
        }
    }

    #[test]
    fn a_trace_is_replayed_with_the_answers_that_came_back() {
        let system = (0..63)
            .map(|i| format!("s{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let answer = (0..40)
            .map(|i| format!("a{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let first = [("system", system.as_str()), ("user", "hello there")];
        let second = [
            first[0],
            first[1],
            ("assistant", answer.as_str()),
            ("user", "go on"),
        ];
        let dir = std::env::temp_dir().join(format!("sy-oracle-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let replay = |answered: Option<&str>, name: &str| {
            let path = dir.join(name);
            write_trace(&path, &[sent(0, &first, answered), sent(1, &second, None)]).unwrap();
            let report = run_oracle(&OracleArgs {
                trace: Some(path),
                kv_blocks: Some(100),
                ..args(None)
            })
            .unwrap();
            assert_eq!((report.requests, report.conversations), (2, 1));
            report
        };
        // First prompt 67 tokens; second 67 + 1 + 40 + 1 + 2 = 111. With the answer cached
        // (67 + 1 + 39 = 107 tokens computed) six blocks hit, without it only four.
        let tokens = 67.0 + 111.0;
        let with_answer = replay(Some(&answer), "answered.jsonl");
        assert_eq!(with_answer.answered, 1);
        assert!((with_answer.sticky_hit_rate - 6.0 * BLOCK_TOKENS as f64 / tokens).abs() < 1e-9);
        let failed = replay(None, "failed.jsonl");
        assert!((failed.sticky_hit_rate - 4.0 * BLOCK_TOKENS as f64 / tokens).abs() < 1e-9);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
