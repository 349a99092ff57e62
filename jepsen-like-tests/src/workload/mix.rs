//! The operation mix: business spend for several callers (some driving their budget to
//! exhaustion), spend reads and reports, override propose/approve/revoke/list by several
//! principals (now and then a requester tries to approve its own proposal, which must be
//! refused), and affinity records moving prefixes between workers.

use parking_lot::Mutex;
use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use switchyard_core::{Priority, Purpose, QuotaScope};

use super::completion::Completion;
use crate::history::{Op, OpResult};

/// Relative weights of the operation kinds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpWeights {
    pub spend: u32,
    pub read_spend: u32,
    pub report_spend: u32,
    pub propose: u32,
    pub approve: u32,
    pub revoke: u32,
    pub list: u32,
    pub affinity: u32,
}

impl Default for OpWeights {
    fn default() -> Self {
        Self {
            spend: 55,
            read_spend: 5,
            report_spend: 8,
            propose: 3,
            approve: 7,
            revoke: 2,
            list: 6,
            affinity: 12,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MixConfig {
    pub callers: Vec<String>,
    /// Period budget of each caller, for the whole run.
    pub budget_tokens: u64,
    /// Callers whose budget differs from `budget_tokens` (e.g. one tight enough to run out
    /// early, so the limit is tested under faults while the others measure availability).
    #[serde(default)]
    pub caller_budgets: BTreeMap<String, u64>,
    pub principals: Vec<String>,
    /// Bounds of a request's `max_tokens`.
    pub max_tokens: (u64, u64),
    pub extra_tokens: (u64, u64),
    /// Override durations; short, so expiry happens during a run.
    pub override_duration_ms: (u64, u64),
    /// Share of approvals attempted by the requester itself (the system must refuse them).
    pub self_approval_share: f64,
    pub prefix_keys: u64,
    pub workers: Vec<String>,
    pub weights: OpWeights,
}

impl Default for MixConfig {
    fn default() -> Self {
        let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect();
        Self {
            callers: names(&["alice", "bob", "carol"]),
            budget_tokens: 40_000,
            caller_budgets: BTreeMap::new(),
            principals: names(&["ops-ann", "ops-ben", "ops-cy"]),
            max_tokens: (50, 400),
            extra_tokens: (100, 1_000),
            override_duration_ms: (3_000, 20_000),
            self_approval_share: 0.1,
            prefix_keys: 32,
            workers: names(&["w1", "w2", "w3", "w4"]),
            weights: OpWeights::default(),
        }
    }
}

#[derive(Debug)]
pub struct QuotaMix {
    config: MixConfig,
    /// Overrides proposed so far, with their requester.
    proposals: Mutex<Vec<(u64, String)>>,
    next_report: AtomicU64,
}

impl QuotaMix {
    pub fn new(config: MixConfig) -> Self {
        Self {
            config,
            proposals: Mutex::new(Vec::new()),
            next_report: AtomicU64::new(1),
        }
    }

    pub fn config(&self) -> &MixConfig {
        &self.config
    }

    /// One budget per caller.
    pub fn budgets(&self) -> BTreeMap<QuotaScope, u64> {
        self.config
            .callers
            .iter()
            .map(|caller| {
                (
                    QuotaScope::caller(caller.as_str()),
                    self.config
                        .caller_budgets
                        .get(caller)
                        .copied()
                        .unwrap_or(self.config.budget_tokens),
                )
            })
            .collect()
    }

    fn pick(list: &[String], rng: &mut StdRng) -> String {
        list.choose(rng)
            .cloned()
            .unwrap_or_else(|| "anonymous".to_owned())
    }

    fn scope(&self, rng: &mut StdRng) -> QuotaScope {
        QuotaScope::caller(Self::pick(&self.config.callers, rng))
    }

    pub fn next_op(&self, rng: &mut StdRng) -> Op {
        let w = &self.config.weights;
        let table = [
            w.spend,
            w.read_spend,
            w.report_spend,
            w.propose,
            w.approve,
            w.revoke,
            w.list,
            w.affinity,
        ];
        let total: u32 = table.iter().sum();
        let mut roll = rng.random_range(0..total.max(1));
        let mut kind = 0;
        for (i, weight) in table.iter().enumerate() {
            if roll < *weight {
                kind = i;
                break;
            }
            roll -= weight;
        }
        let known = self.proposals.lock().choose(rng).cloned();
        match (kind, known) {
            (0, _) => Op::Spend {
                caller: Self::pick(&self.config.callers, rng),
                purpose: *[
                    Purpose::Business,
                    Purpose::Business,
                    Purpose::Warmup,
                    Purpose::Retry,
                ]
                .choose(rng)
                .unwrap_or(&Purpose::Business),
                priority: *Priority::ALL.choose(rng).unwrap_or(&Priority::P1),
                max_tokens: rng.random_range(self.config.max_tokens.0..=self.config.max_tokens.1),
            },
            (1, _) => Op::ReadSpend {
                scope: self.scope(rng),
            },
            (2, _) => Op::ReportSpend {
                reporter: "chaos-client".to_owned(),
                seq: self.next_report.fetch_add(1, Ordering::Relaxed),
                scope: self.scope(rng),
                tokens: rng.random_range(1..=100),
            },
            (4, Some((id, requester))) => {
                let approver = if rng.random_bool(self.config.self_approval_share.clamp(0.0, 1.0)) {
                    requester
                } else {
                    let others: Vec<String> = self
                        .config
                        .principals
                        .iter()
                        .filter(|p| **p != requester)
                        .cloned()
                        .collect();
                    Self::pick(&others, rng)
                };
                Op::ApproveOverride { id, approver }
            }
            (5, Some((id, _))) => Op::RevokeOverride {
                id,
                principal: Self::pick(&self.config.principals, rng),
            },
            (6, _) => Op::ListOverrides,
            (7, _) => Op::RecordAffinity {
                prefix_key: rng.random_range(0..self.config.prefix_keys.max(1)),
                worker: Self::pick(&self.config.workers, rng),
            },
            // Proposals, and approvals or revocations before anything was proposed.
            _ => Op::ProposeOverride {
                scope: self.scope(rng),
                extra_tokens: rng
                    .random_range(self.config.extra_tokens.0..=self.config.extra_tokens.1),
                duration_ms: rng.random_range(
                    self.config.override_duration_ms.0..=self.config.override_duration_ms.1,
                ),
                requester: Self::pick(&self.config.principals, rng),
            },
        }
    }

    /// Learns the ids of acknowledged proposals.
    pub fn observe(&self, op: &Op, completion: &Completion) {
        if let (Op::ProposeOverride { requester, .. }, Completion::Ok(OpResult::Proposed { id })) =
            (op, completion)
        {
            self.proposals.lock().push((*id, requester.clone()));
        }
    }
}
