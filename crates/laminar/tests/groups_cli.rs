//! `laminar groups list|describe|reset-offsets` against `laminar serve`.

mod common;

use common::laminar;

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

#[test]
fn list_describe_and_reset_offsets() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = common::serve(&tmp.path().join("data"));
    let addr = broker.addr.clone();
    laminar(&[
        "topics",
        "create",
        "gc",
        "--partitions",
        "2",
        "--bootstrap",
        &addr,
    ]);
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &addr)
        .create()
        .unwrap();
    for i in 0..100 {
        let v = i.to_string();
        p.send(
            BaseRecord::<(), _>::to("gc")
                .partition(i % 2)
                .payload(&v)
                .timestamp(1_700_000_000_000 + i as i64),
        )
        .unwrap();
    }
    p.flush(Duration::from_secs(30)).unwrap();

    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &addr)
        .set("group.id", "cli-g")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    c.subscribe(&["gc"]).unwrap();
    let mut n = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while n < 100 && Instant::now() < deadline {
        if let Some(Ok(_)) = c.poll(Duration::from_millis(100)) {
            n += 1;
        }
    }
    assert_eq!(n, 100);
    c.commit_consumer_state(CommitMode::Sync).unwrap();
    let described = laminar(&["groups", "describe", "cli-g", "--bootstrap", &addr]);
    assert!(described.contains("state Stable"), "{described}");
    assert!(described.contains("assigned [gc-0, gc-1]"), "{described}");
    c.unsubscribe();
    drop(c);

    let listed = laminar(&["groups", "list", "--bootstrap", &addr]);
    assert!(listed.contains("cli-g"), "{listed}");
    let described = laminar(&["groups", "describe", "cli-g", "--bootstrap", &addr]);
    let row = |d: &str, p: &str| -> Vec<String> {
        d.lines()
            .find(|l| l.trim_start().starts_with(p))
            .unwrap_or_else(|| panic!("{p} in {d}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    assert_eq!(row(&described, "gc-0"), ["gc-0", "50", "50", "0"]);

    laminar(&[
        "groups",
        "reset-offsets",
        "cli-g",
        "--topic",
        "gc",
        "--to-earliest",
        "--bootstrap",
        &addr,
    ]);
    let described = laminar(&["groups", "describe", "cli-g", "--bootstrap", &addr]);
    assert_eq!(row(&described, "gc-1"), ["gc-1", "0", "50", "50"]);
    // Record i has timestamp base + i and sits in partition i % 2 at offset i / 2.
    laminar(&[
        "groups",
        "reset-offsets",
        "cli-g",
        "--topic",
        "gc",
        "--to-timestamp",
        "1700000000040",
        "--bootstrap",
        &addr,
    ]);
    let described = laminar(&["groups", "describe", "cli-g", "--bootstrap", &addr]);
    assert_eq!(row(&described, "gc-0"), ["gc-0", "20", "50", "30"]);
    laminar(&[
        "groups",
        "reset-offsets",
        "cli-g",
        "--topic",
        "gc",
        "--to-latest",
        "--bootstrap",
        &addr,
    ]);
    let described = laminar(&["groups", "describe", "cli-g", "--bootstrap", &addr]);
    assert_eq!(row(&described, "gc-1"), ["gc-1", "50", "50", "0"]);
    broker.terminate();
}
