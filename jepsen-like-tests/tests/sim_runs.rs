//! Whole runs against the in-memory cluster under tokio's paused clock (a 30 s run takes
//! well under a second): a correct cluster passes every checker under every nemesis, each
//! deliberate bug is caught by its checker, and faults injected into a generated history
//! are caught too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use jepsen_like_tests::checker::{CheckConfig, Validity, check_all};
use jepsen_like_tests::history::{Entry, EventType, FaultPhase, Op, OpResult, Outcome};
use jepsen_like_tests::nemesis::NemesisKind;
use jepsen_like_tests::runner::{RunConfig, RunOutcome, results, run};
use jepsen_like_tests::sim::{SimBugs, SimCluster};
use jepsen_like_tests::workload::MixConfig;
use std::time::Duration;

async fn run_sim(bugs: SimBugs, nemeses: Vec<NemesisKind>, seed: u64) -> RunOutcome {
    let cluster = SimCluster::new(5, bugs, seed);
    let workload = cluster.workload(MixConfig::default());
    let mut config = RunConfig::new(Duration::from_secs(30), seed, nemeses);
    config.clients = 6;
    run(&cluster, &workload, config).await.unwrap()
}

fn validity(outcome: &RunOutcome, checker: &str) -> Validity {
    outcome.verdict(checker).unwrap().validity
}

#[tokio::test(start_paused = true)]
async fn a_correct_cluster_passes_every_checker_under_every_nemesis() {
    for seed in 1..=3 {
        let outcome = run_sim(SimBugs::default(), NemesisKind::ALL.to_vec(), seed).await;
        let report = jepsen_like_tests::runner::report::render(&outcome);
        assert!(outcome.passed(), "seed {seed}:\n{report}");
        for checker in [
            "budget-safety",
            "lost-writes",
            "override-rules",
            "convergence",
            "availability",
            "override-linearizability",
        ] {
            assert_eq!(
                validity(&outcome, checker),
                Validity::Valid,
                "seed {seed} {checker}:\n{report}"
            );
        }
        let ops = outcome.history.operations().unwrap();
        assert!(ops.len() > 2_000, "seed {seed}: {} ops", ops.len());
        let exhausted = ops
            .iter()
            .filter(|op| op.error().is_some_and(|e| e.reason == "quota_exhausted"))
            .count();
        assert!(
            exhausted > 0,
            "seed {seed}: budgets must be driven to exhaustion"
        );
        let applied = outcome
            .history
            .faults()
            .filter(|f| f.phase == FaultPhase::Start)
            .count();
        assert!(applied >= 3, "seed {seed}: only {applied} faults applied");
        let heal = outcome.history.faults().last().unwrap();
        assert_eq!(
            (heal.fault.as_str(), heal.phase),
            ("heal", FaultPhase::Stop)
        );
        assert!(
            outcome.availability.len() > 2,
            "per-fault availability is reported"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_same_seed_reproduces_the_same_run() {
    let a = run_sim(
        SimBugs::default(),
        vec![NemesisKind::Kill, NemesisKind::Partition],
        11,
    )
    .await;
    let b = run_sim(
        SimBugs::default(),
        vec![NemesisKind::Kill, NemesisKind::Partition],
        11,
    )
    .await;
    assert_eq!(a.schedule, b.schedule);
    assert_eq!(
        a.history, b.history,
        "paused time and seeded choices make the whole history repeat"
    );
}

async fn caught_by(bug: &str, nemeses: Vec<NemesisKind>, checker: &str) -> RunOutcome {
    let outcome = run_sim(SimBugs::parse(bug).unwrap(), nemeses, 5).await;
    let verdict = outcome.verdict(checker).unwrap();
    assert_eq!(
        verdict.validity,
        Validity::Invalid,
        "{bug} must be caught by {checker}:\n{}",
        jepsen_like_tests::runner::report::render(&outcome)
    );
    assert!(!outcome.passed());
    outcome
}

#[tokio::test(start_paused = true)]
async fn over_admission_is_caught_by_budget_safety() {
    let outcome = caught_by("over-admit", vec![], "budget-safety").await;
    let violation = &outcome.verdict("budget-safety").unwrap().violations[0];
    assert!(
        !violation.ops.is_empty(),
        "the admissions past the cap are named"
    );
}

#[tokio::test(start_paused = true)]
async fn writes_lost_on_kill_are_caught_by_lost_writes() {
    caught_by("lose-writes", vec![NemesisKind::Kill], "lost-writes").await;
}

#[tokio::test(start_paused = true)]
async fn self_approval_is_caught_by_override_rules_and_linearizability() {
    let outcome = caught_by("self-approval", vec![], "override-rules").await;
    assert_eq!(
        validity(&outcome, "override-linearizability"),
        Validity::Invalid
    );
}

#[tokio::test(start_paused = true)]
async fn renewal_is_caught_by_override_rules() {
    caught_by("renewal", vec![], "override-rules").await;
}

#[tokio::test(start_paused = true)]
async fn stale_listings_are_caught_by_linearizability() {
    caught_by("stale-listing", vec![], "override-linearizability").await;
}

#[tokio::test(start_paused = true)]
async fn divergence_is_caught_by_convergence() {
    caught_by("diverge", vec![], "convergence").await;
}

#[tokio::test(start_paused = true)]
async fn bare_500s_and_hangs_are_caught_by_availability() {
    caught_by("unclear-errors", vec![], "availability").await;
    let outcome = caught_by("hang", vec![], "availability").await;
    let messages: Vec<&str> = outcome
        .verdict("availability")
        .unwrap()
        .violations
        .iter()
        .map(|v| v.message.as_str())
        .collect();
    assert!(
        messages.iter().any(|m| m.contains("later than the")),
        "{messages:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn faults_injected_into_a_generated_history_are_caught() {
    let outcome = run_sim(SimBugs::default(), vec![NemesisKind::Pause], 9).await;
    assert!(outcome.passed());
    let config: &CheckConfig = &outcome.config.check;
    let judge = |history: &_, finals: &_, checker: &str| {
        check_all(history, finals, config)
            .into_iter()
            .find(|v| v.checker == checker)
            .unwrap()
            .validity
    };

    // A node forgets an acknowledged affinity record.
    let mut finals = outcome.final_states.clone();
    let state = finals.nodes.get_mut(&3).unwrap().state.as_mut().unwrap();
    let forgotten = *state.affinity.keys().next().unwrap();
    state.affinity.remove(&forgotten);
    assert_eq!(
        judge(&outcome.history, &finals, "lost-writes"),
        Validity::Invalid
    );
    assert_eq!(
        judge(&outcome.history, &finals, "convergence"),
        Validity::Invalid
    );

    // An acknowledged approval turns out to come from the requester.
    let mut history = outcome.history.clone();
    let ops = history.operations().unwrap();
    let (id, requester) = ops
        .iter()
        .find_map(|op| match (op.op(), op.result()) {
            (Op::ProposeOverride { requester, .. }, Some(OpResult::Proposed { id })) => {
                let approved = ops.iter().any(|a| {
                    a.outcome() == Outcome::Ok
                        && matches!(a.op(), Op::ApproveOverride { id: x, .. } if x == id)
                });
                approved.then(|| (*id, requester.clone()))
            }
            _ => None,
        })
        .expect("some override was proposed and approved");
    for entry in &mut history.entries {
        if let Entry::Op(event) = entry {
            if let Op::ApproveOverride { id: x, approver } = &mut event.op {
                if *x == id {
                    *approver = requester.clone();
                }
            }
        }
    }
    assert_eq!(
        judge(&history, &outcome.final_states, "override-rules"),
        Validity::Invalid
    );

    // One more acknowledged admission than the budget allows.
    let mut history = outcome.history.clone();
    let last = history.entries.len() as u64;
    let time_ns = history.entries.last().map_or(0, |e| match e {
        Entry::Op(e) => e.time_ns,
        Entry::Fault(f) => f.time_ns,
    });
    let spend = Op::Spend {
        caller: "alice".into(),
        purpose: switchyard_core::Purpose::Business,
        priority: switchyard_core::Priority::P0,
        max_tokens: 1_000_000,
    };
    for (offset, kind) in [(0, EventType::Invoke), (1, EventType::Ok)] {
        history
            .entries
            .push(Entry::Op(jepsen_like_tests::history::Event {
                index: last + offset,
                time_ns: time_ns + offset,
                process: 999_999,
                node: Some(1),
                kind,
                op: spend.clone(),
                result: (kind == EventType::Ok).then_some(OpResult::Spent {
                    tokens: 1_000_000,
                    override_id: None,
                }),
                error: None,
            }));
    }
    assert_eq!(
        judge(&history, &outcome.final_states, "budget-safety"),
        Validity::Invalid
    );
}

#[tokio::test(start_paused = true)]
async fn a_run_keeps_its_results_and_they_can_be_checked_again() {
    let base = tempfile::tempdir().unwrap();
    let dir = results::create_run_dir(base.path(), 4).unwrap();
    let cluster = SimCluster::new(3, SimBugs::default(), 4);
    let workload = cluster.workload(MixConfig::default());
    let mut config = RunConfig::new(Duration::from_secs(10), 4, vec![NemesisKind::Partition]);
    config.results_dir = Some(dir.clone());
    let outcome = run(&cluster, &workload, config).await.unwrap();
    for file in [
        results::HISTORY_FILE,
        results::SCHEDULE_FILE,
        results::FAULTS_FILE,
        results::FINAL_STATE_FILE,
        results::CHECK_CONFIG_FILE,
        results::VERDICTS_FILE,
        results::REPORT_FILE,
    ] {
        assert!(dir.join(file).is_file(), "{file} is kept");
    }
    let stored = jepsen_like_tests::history::read_history(dir.join(results::HISTORY_FILE)).unwrap();
    assert_eq!(
        stored, outcome.history,
        "the live JSON-lines history reads back identically"
    );
    assert_eq!(results::recheck(&dir).unwrap(), outcome.verdicts);
    let report = std::fs::read_to_string(dir.join(results::REPORT_FILE)).unwrap();
    assert!(
        report.contains("checkers:") && report.contains("result: PASS"),
        "{report}"
    );
}
