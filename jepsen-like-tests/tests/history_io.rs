//! The recorder, the JSON-lines writer and the reader.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use jepsen_like_tests::history::{
    ErrorInfo, EventType, FaultPhase, HistoryBuilder, HistoryError, HistoryWriter, Op, OpResult,
    Outcome, Recorder, read_history,
};
use std::io::Write;

#[tokio::test(start_paused = true)]
async fn recorded_history_is_written_live_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.jsonl");
    let recorder = Recorder::new(Some(HistoryWriter::create(&path).unwrap()));
    let p = recorder.new_process();
    let ticket = recorder.invoke(p, Some(2), Op::ListOverrides);
    tokio::time::sleep(std::time::Duration::from_millis(7)).await;
    recorder.complete(
        ticket,
        EventType::Ok,
        Some(OpResult::Overrides { records: vec![] }),
        None,
    );
    recorder.fault(1, FaultPhase::Start, "pause", vec![3], "SIGSTOP n3".into());
    let q = recorder.new_process();
    let ticket = recorder.invoke(
        q,
        Some(1),
        Op::RecordAffinity {
            prefix_key: 4,
            worker: "w1".into(),
        },
    );
    recorder.complete(
        ticket,
        EventType::Info,
        None,
        Some(ErrorInfo::new("client_timeout")),
    );

    let on_disk = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        on_disk.lines().count(),
        5,
        "one line per entry, already on disk"
    );
    assert!(
        on_disk
            .lines()
            .next()
            .unwrap()
            .contains(r#""f":"list_overrides""#)
    );
    let history = read_history(&path).unwrap();
    assert_eq!(history, recorder.finish().unwrap());
    let ops = history.operations().unwrap();
    assert_eq!(ops.len(), 2);
    assert_eq!(
        ops[0].end_ns().unwrap() - ops[0].start_ns(),
        7_000_000,
        "paused clock: exact"
    );
    assert_eq!(ops[1].outcome(), Outcome::Info);
    assert_eq!(history.faults().count(), 1);
}

#[test]
fn a_bad_line_is_reported_with_its_number() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.jsonl");
    let mut file = std::fs::File::create(&path).unwrap();
    writeln!(file, r#"{{"entry":"fault","index":0,"time_ns":1,"window":1,"phase":"start","fault":"kill","nodes":[1],"detail":""}}"#).unwrap();
    writeln!(file).unwrap();
    writeln!(file, r#"{{"entry":"op","index":1}}"#).unwrap();
    match read_history(&path) {
        Err(HistoryError::Parse { line, .. }) => assert_eq!(line, 3),
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn inconsistent_histories_are_malformed() {
    let mut b = HistoryBuilder::new();
    b.pending(1, 1, 0, Op::ListOverrides)
        .pending(1, 1, 5, Op::ListOverrides);
    let error = b.build().operations().unwrap_err().to_string();
    assert!(error.contains("still open"), "{error}");
    let mut ok = HistoryBuilder::new();
    ok.pending(1, 1, 0, Op::ListOverrides);
    assert_eq!(
        ok.build().operations().unwrap()[0].outcome(),
        Outcome::Pending
    );
}
