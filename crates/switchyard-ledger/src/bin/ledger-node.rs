//! Runs one ledger node from command-line arguments (the kill -9 test and local clusters).
//!
//! `ledger-node --node-id 1 --raft-addr 127.0.0.1:7001 --data-dir /tmp/n1 --secret s
//!   [--init 1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003] [--fast]`
//!
//! Prints `ready <addr>` once serving, and stops gracefully on SIGTERM / Ctrl-C.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use switchyard_core::SystemClock;
use switchyard_ledger::{LedgerConfig, LedgerNode};

fn usage() -> ExitCode {
    eprintln!(
        "usage: ledger-node --node-id N --raft-addr HOST:PORT --data-dir DIR --secret S \
         [--init ID=ADDR,...] [--fast]"
    );
    ExitCode::from(2)
}

struct Args {
    node_id: u64,
    raft_addr: String,
    data_dir: String,
    secret: String,
    init: Option<BTreeMap<u64, String>>,
    fast: bool,
}

fn parse_members(list: &str) -> Option<BTreeMap<u64, String>> {
    list.split(',')
        .map(|member| {
            let (id, addr) = member.split_once('=')?;
            Some((id.trim().parse().ok()?, addr.trim().to_owned()))
        })
        .collect()
}

fn parse_args() -> Option<Args> {
    let mut args = std::env::args().skip(1);
    let (mut node_id, mut raft_addr, mut data_dir, mut secret) = (None, None, None, None);
    let (mut init, mut fast) = (None, false);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--node-id" => node_id = args.next()?.parse().ok(),
            "--raft-addr" => raft_addr = args.next(),
            "--data-dir" => data_dir = args.next(),
            "--secret" => secret = args.next(),
            "--init" => init = Some(parse_members(&args.next()?)?),
            "--fast" => fast = true,
            _ => return None,
        }
    }
    Some(Args {
        node_id: node_id?,
        raft_addr: raft_addr?,
        data_dir: data_dir?,
        secret: secret?,
        init,
        fast,
    })
}

async fn wait_for_stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let Some(args) = parse_args() else {
        return usage();
    };
    let mut config = LedgerConfig::new(args.node_id, args.raft_addr, args.data_dir);
    config.cluster_secret = args.secret.into();
    if args.fast {
        config = config.for_tests();
    }
    let registry = prometheus::Registry::new();
    let node = match LedgerNode::start(config, &registry, Arc::new(SystemClock)).await {
        Ok(node) => node,
        Err(e) => {
            eprintln!("ledger-node: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(members) = args.init {
        // Already initialized (restart) is fine: the stored membership wins.
        if let Err(e) = node.initialize(members).await {
            eprintln!("ledger-node: initialize: {e}");
        }
    }
    println!("ready {}", node.raft_addr());
    wait_for_stop_signal().await;
    node.shutdown().await;
    ExitCode::SUCCESS
}
