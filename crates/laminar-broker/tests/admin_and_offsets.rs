//! Issue 3, acceptance 4 through librdkafka: ListOffsets by timestamp, topic auto-creation
//! on and off, CreateTopics, DeleteTopics, CreatePartitions and DescribeConfigs.

mod common;

use std::time::Duration;

use common::*;
use rdkafka::admin::{
    AdminClient, AdminOptions, ConfigEntry, NewPartitions, NewTopic, ResourceSpecifier, TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::Consumer;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

fn admin(addr: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", addr)
        .create()
        .unwrap()
}

fn opts() -> AdminOptions {
    AdminOptions::new().request_timeout(Some(Duration::from_secs(10)))
}

#[test]
fn list_offsets_by_timestamp() {
    let b = TestBroker::start();
    let p = producer(&b.addr, &[]);
    for i in 0..1000 {
        send(&p, "times", Some(0), &make_record(i)); // timestamps 1_700_000_000_000 + i
    }
    flush(&p);
    let c = consumer(&b.addr);
    for (ts, want) in [
        (1_700_000_000_000, 0),
        (1_700_000_000_500, 500),
        (1_700_000_000_999, 999),
    ] {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("times", 0, Offset::Offset(ts)).unwrap();
        let got = c.offsets_for_times(tpl, Duration::from_secs(10)).unwrap();
        assert_eq!(
            got.find_partition("times", 0).unwrap().offset(),
            Offset::Offset(want),
            "timestamp {ts}"
        );
    }
    // Past the newest record: no offset (librdkafka reports the end).
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("times", 0, Offset::Offset(1_800_000_000_000))
        .unwrap();
    let got = c.offsets_for_times(tpl, Duration::from_secs(10)).unwrap();
    assert!(matches!(
        got.find_partition("times", 0).unwrap().offset(),
        Offset::End | Offset::Invalid
    ));
    // Earliest and latest.
    let (lo, hi) = c.fetch_watermarks("times", 0, Duration::from_secs(10)).unwrap();
    assert_eq!((lo, hi), (0, 1000));
}

#[test]
fn auto_creation_on_and_off() {
    let on = TestBroker::start();
    // librdkafka consumers do not ask for auto-creation unless told to.
    let c: rdkafka::consumer::BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &on.addr)
        .set("allow.auto.create.topics", "true")
        .create()
        .unwrap();
    let md = c
        .fetch_metadata(Some("made-by-metadata"), Duration::from_secs(10))
        .unwrap();
    assert_eq!(md.topics()[0].partitions().len(), 1);
    assert!(md.topics()[0].error().is_none());

    let off = TestBroker::start_with(|c| c.auto_create_topics_enable = false);
    let c = consumer(&off.addr);
    let md = c
        .fetch_metadata(Some("not-made"), Duration::from_secs(10))
        .unwrap();
    assert!(
        md.topics()[0].error().is_some(),
        "unknown topic is reported, not created"
    );
    let md = c.fetch_metadata(None, Duration::from_secs(10)).unwrap();
    assert!(md.topics().iter().all(|t| t.name() != "not-made"));
}

#[test]
fn create_delete_partitions_and_describe_configs() {
    let b = TestBroker::start();
    let a = admin(&b.addr);
    let config = [("retention.ms", "3600000"), ("segment.bytes", "1048576")];
    let mut t = NewTopic::new("admin-t", 3, TopicReplication::Fixed(1));
    for (k, v) in config {
        t = t.set(k, v);
    }
    let r = block(a.create_topics([&t], &opts())).unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    // Again: already exists.
    let r = block(a.create_topics([&t], &opts())).unwrap();
    assert_eq!(r[0].as_ref().unwrap_err().1, RDKafkaErrorCode::TopicAlreadyExists);
    // A cleanup policy that is neither delete nor compact is refused.
    let bad = NewTopic::new("shredded", 1, TopicReplication::Fixed(1)).set("cleanup.policy", "shred");
    let r = block(a.create_topics([&bad], &opts())).unwrap();
    assert_eq!(r[0].as_ref().unwrap_err().1, RDKafkaErrorCode::InvalidConfig);
    // Replication factor 3 on one node is refused.
    let r3 = NewTopic::new("rf3", 1, TopicReplication::Fixed(3));
    let r = block(a.create_topics([&r3], &opts())).unwrap();
    assert_eq!(
        r[0].as_ref().unwrap_err().1,
        RDKafkaErrorCode::InvalidReplicationFactor
    );

    let c = consumer(&b.addr);
    let md = c
        .fetch_metadata(Some("admin-t"), Duration::from_secs(10))
        .unwrap();
    assert_eq!(md.topics()[0].partitions().len(), 3);

    // CreatePartitions: 3 -> 5.
    let r = block(a.create_partitions([&NewPartitions::new("admin-t", 5)], &opts())).unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    let md = c
        .fetch_metadata(Some("admin-t"), Duration::from_secs(10))
        .unwrap();
    assert_eq!(md.topics()[0].partitions().len(), 5);
    let p = producer(&b.addr, &[]);
    send(&p, "admin-t", Some(4), &make_record(1));
    flush(&p);
    assert_eq!(
        consume(&b.addr, "admin-t", 4, 1, Duration::from_secs(20)).len(),
        1
    );

    // DescribeConfigs: overrides as set, the rest as defaults.
    let r = block(a.describe_configs([&ResourceSpecifier::Topic("admin-t")], &opts())).unwrap();
    let res = r[0].as_ref().unwrap();
    let get = |name: &str| -> Option<&ConfigEntry> { res.entries.iter().find(|e| e.name == name) };
    assert_eq!(get("retention.ms").unwrap().value.as_deref(), Some("3600000"));
    assert!(!get("retention.ms").unwrap().is_default);
    assert_eq!(get("cleanup.policy").unwrap().value.as_deref(), Some("delete"));
    assert!(get("cleanup.policy").unwrap().is_default);
    let r = block(a.describe_configs([&ResourceSpecifier::Broker(0)], &opts())).unwrap();
    let res = r[0].as_ref().unwrap();
    assert!(res
        .entries
        .iter()
        .any(|e| e.name == "message.max.bytes" && e.value.as_deref() == Some("1048588")));

    // DeleteTopics, then it is gone.
    let r = block(a.delete_topics(&["admin-t"], &opts())).unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    let md = c.fetch_metadata(None, Duration::from_secs(10)).unwrap();
    assert!(md.topics().iter().all(|t| t.name() != "admin-t"));
    let r = block(a.delete_topics(&["admin-t"], &opts())).unwrap();
    assert_eq!(
        r[0].as_ref().unwrap_err().1,
        RDKafkaErrorCode::UnknownTopicOrPartition
    );
}

#[test]
fn topics_survive_a_restart() {
    let b = TestBroker::start();
    let a = admin(&b.addr);
    let t = NewTopic::new("kept", 2, TopicReplication::Fixed(1)).set("retention.ms", "123456");
    assert!(block(a.create_topics([&t], &opts())).unwrap()[0].is_ok());
    let p = producer(&b.addr, &[]);
    for i in 0..100 {
        send(&p, "kept", Some(1), &make_record(i));
    }
    flush(&p);
    drop(p);
    drop(a);
    // `_tmp` is declared before the new broker, so it is dropped after it.
    let (dir, _tmp) = b.stop();
    let b = TestBroker::start_in(dir, |_| {});
    let got = consume(&b.addr, "kept", 1, 100, Duration::from_secs(20));
    assert_eq!(got.len(), 100);
    assert_eq!(got[42], make_record(42));
    let a = admin(&b.addr);
    let r = block(a.describe_configs([&ResourceSpecifier::Topic("kept")], &opts())).unwrap();
    let res = r[0].as_ref().unwrap();
    assert!(res
        .entries
        .iter()
        .any(|e| e.name == "retention.ms" && e.value.as_deref() == Some("123456")));
}

/// `message.timestamp.type=LogAppendTime` (Kafka Streams sets the type on its internal
/// topics): records read back carry the time of their append, marked as such; a CreateTime
/// topic keeps the producer's; a bad value is refused.
#[test]
fn log_append_time_topics_stamp_the_append_time() {
    use rdkafka::consumer::Consumer;
    use rdkafka::message::{Message, Timestamp};
    let b = TestBroker::start();
    let a = admin(&b.addr);
    let t = NewTopic::new("appended", 1, TopicReplication::Fixed(1))
        .set("message.timestamp.type", "LogAppendTime");
    let c =
        NewTopic::new("created", 1, TopicReplication::Fixed(1)).set("message.timestamp.type", "CreateTime");
    let bad = NewTopic::new("bad-ts", 1, TopicReplication::Fixed(1)).set("message.timestamp.type", "Now");
    let r = block(a.create_topics([&t, &c, &bad], &opts())).unwrap();
    assert!(r[0].is_ok() && r[1].is_ok() && r[2].is_err(), "{r:?}");
    let p = producer(&b.addr, &[]);
    let before = laminar_storage::now_ms();
    for topic in ["appended", "created"] {
        send(&p, topic, Some(0), &make_record(1));
    }
    flush(&p);
    for (topic, appended) in [("appended", true), ("created", false)] {
        let cons = consumer(&b.addr);
        let mut tpl = rdkafka::TopicPartitionList::new();
        tpl.add_partition_offset(topic, 0, rdkafka::Offset::Beginning)
            .unwrap();
        cons.assign(&tpl).unwrap();
        let m = loop {
            if let Some(m) = cons.poll(Duration::from_millis(100)) {
                break m.unwrap();
            }
        };
        match (m.timestamp(), appended) {
            (Timestamp::LogAppendTime(ts), true) => assert!(ts >= before, "{ts} < {before}"),
            (Timestamp::CreateTime(ts), false) => assert_eq!(ts, make_record(1).timestamp_ms),
            (other, _) => panic!("{topic}: {other:?}"),
        }
    }
}
