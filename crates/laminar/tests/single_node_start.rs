//! A single node is a cluster of one voter: it serves at once, and a data directory written
//! by a single node from before that (commit 335ac98, `tests/fixtures/make-single-node-dir.sh`,
//! a format never released) is refused with the reason, and left as it was: it is no longer
//! migrated, and serving it would remove its topics' logs as placed nowhere.

mod common;

use std::time::{Duration, Instant};

#[test]
fn a_single_nodes_data_directory_from_before_is_refused_and_left_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = common::repo_root().join("crates/laminar/tests/fixtures/single-node-0.1.tar.gz");
    let untar = std::process::Command::new("tar")
        .arg("-C")
        .arg(tmp.path())
        .arg("-xzf")
        .arg(&fixture)
        .status()
        .unwrap();
    assert!(untar.success());
    let data = tmp.path().join("data");
    let listing = |dir: &std::path::Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let before = listing(&data);
    assert!(before.iter().any(|n| n == "orders-0") && before.iter().any(|n| n == "quotas.json"));
    let topics_before = std::fs::read(data.join("topics.json")).unwrap();

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_laminar"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "none",
            "--data-dir",
        ])
        .arg(&data)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "refused to start:\n{stderr}");
    assert!(
        stderr.contains("from before it was a cluster of one voter") && stderr.contains("no longer migrated"),
        "says why:\n{stderr}"
    );
    assert_eq!(listing(&data), before, "nothing added or removed");
    assert_eq!(std::fs::read(data.join("topics.json")).unwrap(), topics_before);
}

/// A new single node serves within a second of its start (it elects itself at once rather
/// than after an election timeout).
#[test]
fn a_new_single_node_serves_within_a_second() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let started = Instant::now();
    let broker = common::serve(&data);
    let listening = started.elapsed();
    // `serve` returns at the listening line, printed before the node leads its internal
    // topics: the first produce must still succeed at once, without a retry.
    let before = Instant::now();
    common::create_topic(&broker.addr, "first", 1);
    common::produce_values(&broker.addr, "first", 1, ["one".to_string()]);
    let served = before.elapsed();
    assert!(
        listening + served < Duration::from_secs(3),
        "listening after {listening:?}, a topic created and a record written after {served:?} more"
    );
    broker.terminate();
}
