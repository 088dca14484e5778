//! A single node is a cluster of one voter. A data directory written by a single node from
//! before that (commit 335ac98, `tests/fixtures/make-single-node-dir.sh`) is migrated at its
//! first start: its topics (with their ids), client quotas and dynamic broker configs become
//! the cluster metadata's, and its records and committed offsets are served as before.

mod common;

use std::time::{Duration, Instant};

/// What clients see of the fixture's metadata and data, through the CLI and librdkafka.
fn assert_as_written(addr: &str) {
    let orders = common::laminar(&["topics", "describe", "orders", "--bootstrap", addr]);
    assert!(
        orders.contains("id 4ce4df21-e3fc-4ae1-bd0f-969c568b3e6f  partitions 3"),
        "the topic keeps its id and partitions:\n{orders}"
    );
    assert!(orders.contains("retention.ms = 86400000 (set)"), "{orders}");
    let events = common::laminar(&["topics", "describe", "events", "--bootstrap", addr]);
    assert!(
        events.contains("id efa571c6-0878-4f41-b0d2-76185f197659"),
        "{events}"
    );
    assert!(events.contains("cleanup.policy = compact (set)"), "{events}");
    // The dynamic cluster default the single node held.
    assert!(events.contains("retention.ms = 7200000"), "{events}");
    let quotas = common::laminar(&["quotas", "describe", "--bootstrap", addr]);
    assert!(
        quotas.contains("client-id slow: producer_byte_rate=1048576"),
        "{quotas}"
    );
    let group = common::laminar(&["groups", "describe", "billing", "--bootstrap", addr]);
    let committed: Vec<&str> = group
        .lines()
        .filter(|l| l.trim_start().starts_with("orders-"))
        .collect();
    assert_eq!(committed.len(), 2, "{group}");
    assert!(
        committed[0].split_whitespace().eq(["orders-0", "20", "20", "0"]),
        "{group}"
    );
    assert!(
        committed[1].split_whitespace().eq(["orders-1", "10", "10", "0"]),
        "{group}"
    );
    let mut orders: Vec<String> = common::read_to_end(addr, "orders", 3, "read_committed")
        .into_iter()
        .map(|(_, _, v)| String::from_utf8(v).unwrap())
        .collect();
    orders.sort_by_key(|v| v.trim_start_matches("order-").parse::<u32>().unwrap());
    let expected: Vec<String> = (0..30).map(|i| format!("order-{i}")).collect();
    assert_eq!(orders, expected, "every record written before is served");
    assert_eq!(common::read_to_end(addr, "events", 1, "read_committed").len(), 10);
}

#[test]
fn a_single_nodes_data_directory_from_before_is_migrated_at_its_first_start() {
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
    assert!(data.join("quotas.json").exists() && data.join("broker_configs.json").exists());

    let broker = common::serve(&data);
    assert_as_written(&broker.addr);
    assert!(
        !data.join("quotas.json").exists(),
        "the quotas file goes once migrated"
    );
    assert!(!data.join("broker_configs.json").exists());
    let topics: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("topics.json")).unwrap()).unwrap();
    let names: Vec<&str> = topics["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.iter().all(|n| n.starts_with("__")),
        "the topics file keeps only the internal topics: {names:?}"
    );
    // New writes, then a restart from the cluster metadata alone.
    common::produce_values(&broker.addr, "orders", 3, (30..33).map(|i| format!("order-{i}")));
    broker.terminate();

    let started = Instant::now();
    let broker = common::serve(&data);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_as_written_after_restart(&broker.addr);
    broker.terminate();
}

fn assert_as_written_after_restart(addr: &str) {
    let events = common::laminar(&["topics", "describe", "events", "--bootstrap", addr]);
    assert!(
        events.contains("id efa571c6-0878-4f41-b0d2-76185f197659"),
        "{events}"
    );
    assert_eq!(common::read_to_end(addr, "orders", 3, "read_committed").len(), 33);
    let quotas = common::laminar(&["quotas", "describe", "--bootstrap", addr]);
    assert!(
        quotas.contains("client-id slow: producer_byte_rate=1048576"),
        "{quotas}"
    );
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
