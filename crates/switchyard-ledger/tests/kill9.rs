#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Three real `ledger-node` processes; the leader is killed with SIGKILL under a stream of
//! spend-report writes, then restarted from its data dir. Every acknowledged write must be
//! in the ledger afterwards.

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use switchyard_core::{Priority, Purpose};
use switchyard_ledger::command::{SpendReport, SpendTotals, SplitKey};
use switchyard_ledger::{CommandResponse, LedgerClient, ReadAnswer, ReadQuery};
use tempfile::TempDir;

const SECRET: &str = "kill9-secret";

struct Nodes {
    children: Vec<Option<Child>>,
    addrs: Vec<String>,
    dir: TempDir,
}

impl Nodes {
    fn spawn(&mut self, index: usize, init: bool) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ledger-node"));
        cmd.args(["--node-id", &(index + 1).to_string()])
            .args(["--raft-addr", &self.addrs[index]])
            .args(["--secret", SECRET, "--fast"])
            .arg("--data-dir")
            .arg(self.dir.path().join(format!("n{}", index + 1)))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if init {
            let members: Vec<String> = self
                .addrs
                .iter()
                .enumerate()
                .map(|(i, a)| format!("{}={a}", i + 1))
                .collect();
            cmd.args(["--init", &members.join(",")]);
        }
        self.children[index] = Some(cmd.spawn().unwrap());
    }

    fn kill(&mut self, index: usize) {
        if let Some(mut child) = self.children[index].take() {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
        }
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for index in 0..self.children.len() {
            self.kill(index);
        }
    }
}

fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

fn report(seq: u64) -> switchyard_ledger::Command {
    switchyard_ledger::Command::ReportSpend(SpendReport {
        node: 99,
        boot_id: 1,
        seq,
        minute: 1,
        lines: vec![(
            SplitKey {
                caller: format!("k{seq}").into(),
                purpose: Purpose::Business,
                priority: Priority::P1,
                under_override: false,
            },
            SpendTotals {
                tokens: seq,
                requests: 1,
            },
        )],
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkill_of_the_leader() {
    let mut nodes = Nodes {
        children: vec![None, None, None],
        addrs: (0..3).map(|_| free_addr()).collect(),
        dir: TempDir::new().unwrap(),
    };
    for index in 0..3 {
        nodes.spawn(index, index == 0);
    }
    let client = LedgerClient::new(nodes.addrs.clone(), SECRET, Duration::from_secs(3));
    let mut acked = BTreeSet::new();
    let mut seq = 0;
    let write = async |seq: u64, acked: &mut BTreeSet<u64>| -> bool {
        match client.write(&report(seq)).await {
            Ok(CommandResponse::Spend { .. }) => {
                acked.insert(seq);
                true
            }
            _ => false,
        }
    };
    // Wait for the cluster, then a first batch of writes.
    let started = Instant::now();
    while acked.len() < 150 {
        seq += 1;
        write(seq, &mut acked).await;
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "cluster never took writes"
        );
    }
    let leader_addr = client.last_leader().unwrap().to_owned();
    let leader = nodes.addrs.iter().position(|a| *a == leader_addr).unwrap();
    let killed_at = Instant::now();
    nodes.kill(leader);
    let mut failed = 0;
    let mut first_ack_after_kill = None;
    let target = acked.len() + 150;
    while acked.len() < target {
        seq += 1;
        if write(seq, &mut acked).await {
            first_ack_after_kill.get_or_insert(killed_at.elapsed());
        } else {
            failed += 1;
        }
        assert!(
            killed_at.elapsed() < Duration::from_secs(20),
            "no progress after kill"
        );
    }
    eprintln!(
        "FIGURE SIGKILL of leader: first acknowledged write after {:?}, {failed} failed writes",
        first_ack_after_kill.unwrap()
    );

    // The killed node comes back from its data dir and the group keeps going.
    nodes.spawn(leader, false);
    let target = acked.len() + 50;
    while acked.len() < target {
        seq += 1;
        write(seq, &mut acked).await;
    }
    let answer = client
        .read(&ReadQuery::Splits { from_minute: 0 })
        .await
        .unwrap();
    let ReadAnswer::Splits(splits) = answer else {
        panic!("unexpected answer");
    };
    let present: BTreeSet<u64> = splits
        .values()
        .flatten()
        .filter_map(|(key, _)| key.caller.strip_prefix('k')?.parse().ok())
        .collect();
    let lost: Vec<&u64> = acked.difference(&present).collect();
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    // The restarted node rejoined: with another node down, the majority it is part of
    // still takes writes.
    let other = (0..3).find(|i| *i != leader).unwrap();
    nodes.kill(other);
    let mut ok = false;
    for s in seq + 1..seq + 200 {
        if write(s, &mut acked).await {
            ok = true;
            break;
        }
    }
    assert!(ok, "the restarted node did not rejoin the majority");
}
