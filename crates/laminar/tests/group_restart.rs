//! Issue 4, acceptance 4, with the real binary: a group commits, the broker is killed with
//! SIGKILL and restarted, and a new member of the group resumes exactly at the committed
//! offset: no gap, and nothing re-delivered beyond what was not committed.

mod common;

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Message, Offset, TopicPartitionList};

fn group_member(addr: &str) -> BaseConsumer {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "resume")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "6000")
        .create()
        .unwrap();
    c.subscribe(&["rs"]).unwrap();
    c
}

fn next_offset(c: &BaseConsumer, deadline: Instant) -> i64 {
    loop {
        assert!(Instant::now() < deadline, "no record arrived");
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            return m.expect("consume").offset();
        }
    }
}

#[test]
fn committed_offsets_survive_sigkill_and_a_new_member_resumes_there() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let broker = common::serve(&dir);
    let addr = broker.addr.clone();
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &addr)
        .set("linger.ms", "2")
        .create()
        .unwrap();
    for i in 0..1000 {
        let v = i.to_string();
        p.send(BaseRecord::<(), _>::to("rs").partition(0).payload(&v))
            .unwrap();
    }
    p.flush(Duration::from_secs(30)).unwrap();
    drop(p);

    let c = group_member(&addr);
    let deadline = Instant::now() + Duration::from_secs(60);
    for expected in 0..450 {
        assert_eq!(next_offset(&c, deadline), expected);
        if expected == 399 {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset("rs", 0, Offset::Offset(400)).unwrap();
            c.commit(&tpl, CommitMode::Sync).unwrap();
        }
    }
    // Records 400..449 were consumed but not committed. Kill the broker mid-session.
    broker.kill9();
    drop(c);

    let broker = common::serve(&dir);
    let addr = broker.addr.clone();
    let c = group_member(&addr);
    let deadline = Instant::now() + Duration::from_secs(60);
    assert_eq!(next_offset(&c, deadline), 400, "resumes at the committed offset");
    assert_eq!(next_offset(&c, deadline), 401);
    drop(c);
    broker.terminate();
}
