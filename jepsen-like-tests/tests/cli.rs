//! The runner binary end to end on the in-memory cluster (real time, a few seconds).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

fn runner(args: &[&str], results: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_jepsen-like-tests"))
        .args(args)
        .arg("--results")
        .arg(results)
        .args(["--request-timeout-ms", "400"])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

/// Two seconds of the in-memory three-node cluster under `nemesis`, plus `extra` flags.
fn two_second_sim_run(nemesis: &str, extra: &[&str], results: &Path) -> std::process::Output {
    let mut args = vec![
        "--cluster",
        "sim",
        "--nodes",
        "3",
        "--time",
        "2",
        "--nemesis",
        nemesis,
    ];
    args.extend_from_slice(extra);
    runner(&args, results)
}

#[test]
fn a_short_run_reports_passes_and_keeps_a_checkable_folder() {
    let base = tempfile::tempdir().unwrap();
    let out = two_second_sim_run("kill,partition,pause", &["--seed", "3"], base.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("Switchyard chaos run: seed 3, 3 nodes"),
        "{stdout}"
    );
    assert!(stdout.contains("result: PASS"));
    let dir = std::fs::read_dir(base.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(dir.join("history.jsonl").is_file());
    let check = Command::new(env!("CARGO_BIN_EXE_jepsen-like-tests"))
        .arg("check")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(check.status.success());
    assert!(String::from_utf8_lossy(&check.stdout).contains("budget-safety"));
}

#[test]
fn a_broken_cluster_fails_the_run() {
    let base = tempfile::tempdir().unwrap();
    let out = two_second_sim_run(
        "",
        &["--budget-tokens", "2000", "--sim-bugs", "over-admit"],
        base.path(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("budget-safety              INVALID"),
        "{stdout}"
    );
    let bad = runner(&["--nemesis", "flood"], base.path());
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown nemesis `flood`"));
}
