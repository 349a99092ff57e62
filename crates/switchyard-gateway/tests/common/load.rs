//! A steady chat load on real replicas: clients that each send to one replica until told to
//! stop, counting the answers by status and error code (`"200 "` for a served request).

use super::tenant_chat;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// One short chat completion for `key`: its status and, unless it was served, its error code.
pub async fn ask_chat(base: &str, key: &str) -> (u16, String) {
    let body = serde_json::json!({
        "model": "sim-llama",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 60,
    });
    let reply = tenant_chat(base, key, &body).await;
    let code = if reply.status == 200 {
        String::new()
    } else {
        reply.error_code()
    };
    (reply.status.as_u16(), code)
}

/// Config of one tenant (`acme`, priority up to P1) whose daily budget (100M tokens) a test
/// never gets near, with graded shedding off: every refusal is then the ledger's doing.
pub fn far_from_spent_tenant(key: &str) -> String {
    format!(
        r#"
[admission.gates]
soft_limit = 1.0
hard_limit = 1.0

[[admission.tenants]]
api_key = "{key}"
caller = "acme"
max_priority = "P1"
tokens_per_day = 100000000
"#
    )
}

type ClientResult = (BTreeMap<String, u64>, Duration);

/// Clients sending `ask_chat` in a loop, each pausing `pause` between requests.
pub struct ChatLoad {
    stop: Arc<AtomicBool>,
    clients: Vec<JoinHandle<ClientResult>>,
}

/// What the clients saw: answers by `"<status> <code>"`, and the slowest answer.
pub struct ChatLoadOutcome {
    pub outcomes: BTreeMap<String, u64>,
    pub slowest: Duration,
}

impl ChatLoad {
    /// `per_replica` clients on each of `bases`.
    pub fn start(bases: &[String], per_replica: usize, key: &'static str, pause: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let clients = bases
            .iter()
            .flat_map(|base| std::iter::repeat_n(base.clone(), per_replica))
            .map(|base| {
                let stop = stop.clone();
                tokio::spawn(async move {
                    let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
                    let mut slowest = Duration::ZERO;
                    while !stop.load(Ordering::Relaxed) {
                        let sent = Instant::now();
                        let (status, code) = ask_chat(&base, key).await;
                        slowest = slowest.max(sent.elapsed());
                        *outcomes.entry(format!("{status} {code}")).or_default() += 1;
                        tokio::time::sleep(pause).await;
                    }
                    (outcomes, slowest)
                })
            })
            .collect();
        Self { stop, clients }
    }

    /// Stops every client after its request in flight and adds up what they saw.
    pub async fn finish(self) -> ChatLoadOutcome {
        self.stop.store(true, Ordering::Relaxed);
        let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
        let mut slowest = Duration::ZERO;
        for client in self.clients {
            let (seen, slow) = client.await.expect("a load client panicked");
            slowest = slowest.max(slow);
            for (outcome, n) in seen {
                *outcomes.entry(outcome).or_default() += n;
            }
        }
        ChatLoadOutcome { outcomes, slowest }
    }
}
