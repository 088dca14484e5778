//! Issue 11: compacted topics through librdkafka. A topic created with
//! `cleanup.policy=compact` is cleaned by the broker's cleaner: a consumer reading it from
//! the start finds the newest value of each key at the offset it was written at, and a
//! deleted key (a tombstone) is gone once `delete.retention.ms` has passed. A record without
//! a key is refused with INVALID_RECORD, as Kafka refuses it.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::*;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};

const KEYS: u64 = 50;
const ROUNDS: u64 = 40;

fn create_compacted(addr: &str, name: &str) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .create()
        .unwrap();
    let t = NewTopic::new(name, 1, TopicReplication::Fixed(1))
        .set("cleanup.policy", "compact")
        .set("segment.bytes", "4096")
        .set("segment.ms", "300")
        .set("min.cleanable.dirty.ratio", "0.01")
        .set("delete.retention.ms", "1000");
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let r = block(admin.create_topics([&t], &opts)).unwrap();
    assert!(r[0].is_ok(), "{r:?}");
}

/// (offset, key, value).
type Stored = (i64, Option<Vec<u8>>, Option<Vec<u8>>);

/// Every record of partition 0 from the start.
fn read_all(addr: &str, topic: &str) -> Vec<Stored> {
    let c = consumer(addr);
    let (_, high) = c.fetch_watermarks(topic, 0, Duration::from_secs(10)).unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning).unwrap();
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while out.last().is_none_or(|(o, _, _)| o + 1 < high) {
        assert!(
            Instant::now() < deadline,
            "read up to {high}: {} records",
            out.len()
        );
        let Some(m) = c.poll(Duration::from_millis(100)) else {
            continue;
        };
        let m = m.expect("consume");
        out.push((
            m.offset(),
            m.key().map(<[u8]>::to_vec),
            m.payload().map(<[u8]>::to_vec),
        ));
    }
    out
}

fn metrics(b: &TestBroker) -> String {
    http_get(&b.metrics_addr, "/metrics").1
}

#[test]
fn a_compacted_topic_keeps_the_newest_value_of_each_key_at_its_offset() {
    let b = TestBroker::start_with(|c| c.log_cleaner_backoff_ms = 100);
    create_compacted(&b.addr, "table");
    let p = producer(&b.addr, &[("linger.ms", "1"), ("batch.num.messages", "7")]);
    // Value = the offset it will have: one producer, one partition, in order.
    let mut newest: BTreeMap<Vec<u8>, (i64, Option<Vec<u8>>)> = BTreeMap::new();
    let mut offset = 0i64;
    for round in 0..ROUNDS {
        for k in 0..KEYS {
            let key = format!("key-{k}").into_bytes();
            // The last round deletes every fifth key.
            let value = (round + 1 < ROUNDS || k % 5 != 0).then(|| offset.to_string().into_bytes());
            send(
                &p,
                "table",
                Some(0),
                &Rec {
                    key: Some(key.clone()),
                    value: value.clone(),
                    headers: vec![],
                    timestamp_ms: -1,
                },
            );
            newest.insert(key, (offset, value));
            offset += 1;
        }
    }
    flush(&p);
    // A record after segment.ms rolls the segment holding the rounds, so the cleaner may
    // clean all of them.
    std::thread::sleep(Duration::from_millis(400));
    let marker = Rec {
        key: Some(b"marker".to_vec()),
        value: Some(offset.to_string().into_bytes()),
        headers: vec![],
        timestamp_ms: -1,
    };
    send(&p, "table", Some(0), &marker);
    flush(&p);
    newest.insert(b"marker".to_vec(), (offset, marker.value.clone()));

    // The newest value of every key, tombstones first kept, then gone after
    // delete.retention.ms (1 s).
    let live: Vec<_> = newest
        .iter()
        .filter(|(_, (_, v))| v.is_some())
        .map(|(k, (o, v))| (*o, Some(k.clone()), v.clone()))
        .collect();
    let mut expected = live.clone();
    expected.sort();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = read_all(&b.addr, "table");
    while got != expected {
        assert!(
            Instant::now() < deadline,
            "after 30 s the topic holds {} records, {} expected: {:?}",
            got.len(),
            expected.len(),
            &got[..got.len().min(20)]
        );
        std::thread::sleep(Duration::from_millis(200));
        got = read_all(&b.addr, "table");
    }
    for (o, _, v) in &got {
        assert_eq!(
            v.as_deref(),
            Some(o.to_string().as_bytes()),
            "each record at its offset"
        );
    }
    let m = metrics(&b);
    assert!(
        metric(&m, "laminar_log_cleaner_passes_total") >= 2.0,
        "a pass, then one for the tombstones"
    );
    assert!(metric(&m, "laminar_log_cleaner_records_removed_total") >= (KEYS * (ROUNDS - 1)) as f64);
    assert!(m.contains("laminar_log_cleaner_dirty_ratio{topic=\"table\",partition=\"0\"}"));

    // What the cleaner left survives a restart; the log end is where it was.
    let (dir, tmp) = b.stop();
    let b = TestBroker::start_in(dir, |_| {});
    assert_eq!(read_all(&b.addr, "table"), expected);
    drop(b);
    drop(tmp);
}

#[test]
fn a_record_without_a_key_is_refused_by_a_compacted_topic() {
    let b = TestBroker::start();
    create_compacted(&b.addr, "keyed");
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &b.addr)
        .set("message.timeout.ms", "10000")
        .create()
        .unwrap();
    block(async {
        let ok = p
            .send(
                FutureRecord::to("keyed").partition(0).key("k").payload("v"),
                Duration::from_secs(10),
            )
            .await;
        assert!(ok.is_ok(), "{ok:?}");
        let refused = p
            .send(
                FutureRecord::<(), _>::to("keyed").partition(0).payload("no key"),
                Duration::from_secs(10),
            )
            .await;
        match refused {
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::InvalidRecord), _)) => {}
            other => panic!("expected INVALID_RECORD, got {other:?}"),
        }
    });
    let (_, high) = consumer(&b.addr)
        .fetch_watermarks("keyed", 0, Duration::from_secs(10))
        .unwrap();
    assert_eq!(high, 1, "the keyless record was not appended");
}
