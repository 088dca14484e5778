//! Issue 13, acceptance: franz-go's `GroupTransactSession` (Go, the module from the Go module
//! proxy) runs a chain of two transactional stages, in -> mid -> out, while `laminar serve`
//! is killed with SIGKILL twice and restarted; a read_committed consumer of the output sees
//! every input record exactly once, through both stages.
//!
//! Issue 29, item 9: a transactional ETL whose three group members come and go (the range
//! balancer, a rebalance every few seconds), half of them leaving with an abort right after a
//! commit, as the consumers of franz-go's own `TestTxnEtl` that quit do; and that abort alone.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;

const RECORDS: usize = 2_000;

/// Builds the Go program in `tests/go/NAME` to `out`.
fn build_program(name: &str, out: &Path) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go").join(name);
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(out)
        .arg(".")
        .current_dir(&dir)
        .env("GOFLAGS", "-mod=mod")
        .output()
        .expect("go (is Go installed? .ci/run installs it)");
    assert!(
        built.status.success(),
        "go build: {}",
        String::from_utf8_lossy(&built.stderr)
    );
}

#[test]
fn franz_go_chains_two_transactional_stages_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    let program = tmp.path().join("txnchain");
    build_program("txnchain", &program);
    let dir = tmp.path().join("data");
    let mut broker = serve(&dir);
    let addr = broker.addr.clone();
    for t in ["chain-in", "chain-mid", "chain-out"] {
        create_topic(&addr, t, 2);
    }
    produce_values(&addr, "chain-in", 2, (0..RECORDS).map(|i| i.to_string()));

    let mut chain = Program::spawn(Command::new(&program).arg(&addr).arg(RECORDS.to_string()));
    for kill in 0..2 {
        std::thread::sleep(Duration::from_millis(1_500));
        assert!(chain.running(), "the chain finished before kill {kill}");
        broker.kill9();
        broker = serve_at(&dir, &addr);
    }
    eprintln!("{}", chain.finish(Duration::from_secs(300)));

    common::wait_transactions_decided(&addr, "chain-out", 2);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (_, _, v) in read_to_end(&addr, "chain-out", 2, "read_committed") {
        *seen.entry(String::from_utf8(v).unwrap()).or_default() += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "written twice: {twice:?}");
    let missing: Vec<String> = (0..RECORDS)
        .map(|i| format!("s2-s1-{i}"))
        .filter(|v| !seen.contains_key(v))
        .collect();
    assert!(
        missing.is_empty(),
        "{} lost, first {:?}",
        missing.len(),
        missing.first()
    );
    assert_eq!(seen.len(), RECORDS);
    broker.terminate();
}

/// The abort franz-go sends when a session leaves right after a commit (EndTxn v5, at the
/// epoch the commit returned, while the commit's markers are still being written) waits for
/// the markers (CONCURRENT_TRANSACTIONS, which franz-go retries) and then goes through, as on
/// Kafka 4.3.1. It was refused INVALID_TXN_STATE in 19 of 20 tries.
#[test]
fn franz_go_aborts_right_after_a_commit_once_its_markers_are_written() {
    let tmp = tempfile::tempdir().unwrap();
    let program = tmp.path().join("txnetl");
    build_program("txnetl", &program);
    let broker = serve(&tmp.path().join("data"));
    let probe = Program::spawn(Command::new(&program).args([
        "-brokers",
        &broker.addr,
        "-probe",
        "-records",
        "10",
        "-log",
        "warn",
    ]));
    let out = probe.finish(Duration::from_secs(120));
    assert!(out.contains("RESULT PASS"), "{out}");
    broker.terminate();
}

/// A consume-transform-produce loop of three `GroupTransactSession`s in one group, each
/// closed and made again every 0.5-3 s (so the range balancer reassigns all the time), half
/// leaving with an abort right after a commit: no error reaches the application, and the
/// output holds every input record exactly once (the program reads it back read_committed).
/// It failed 7 runs in 8 before (INVALID_TXN_STATE to the leaving session's End; Kafka
/// 4.3.1 passed 8 of 8), and once that was fixed, about one in 15 wrote one transaction's
/// records twice (an offset read as stable while its commit was being applied).
#[test]
fn franz_go_transactional_etl_under_rebalances_is_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    let program = tmp.path().join("txnetl");
    build_program("txnetl", &program);
    // As `bench/kafka/run-kafka.sh` runs Kafka: a group emptied by members leaving (often,
    // here) would otherwise wait 3 s before each first join.
    let broker = serve_with(
        &tmp.path().join("data"),
        "127.0.0.1:0",
        &["--set", "group.initial.rebalance.delay.ms=0"],
    );
    let etl = Program::spawn(Command::new(&program).args([
        "-brokers",
        &broker.addr,
        "-records",
        "8000",
        "-max-life",
        "3s",
        "-timeout",
        "150s",
        "-log",
        "warn",
    ]));
    let out = etl.finish(Duration::from_secs(180));
    assert!(out.contains("RESULT PASS"), "{out}");
    broker.terminate();
}
