//! Issue 13, acceptance: franz-go's `GroupTransactSession` (Go, the module from the Go module
//! proxy) runs a chain of two transactional stages, in -> mid -> out, while `laminar serve`
//! is killed with SIGKILL twice and restarted; a read_committed consumer of the output sees
//! every input record exactly once, through both stages.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;

const RECORDS: usize = 2_000;

fn build_program(out: &Path) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go/txnchain");
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
    build_program(&program);
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
