//! Issue 11: the broker is killed with SIGKILL while its cleaner rewrites a compacted
//! topic's segments, three times. After each restart a consumer finds every record where it
//! was written and the newest value of every key; once the cleaner has finished, exactly the
//! newest value of each key is left.

mod common;

use std::collections::BTreeMap;

use common::block;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Message, Offset, TopicPartitionList};

const RECORDS: usize = 20_000;
const KEYS: usize = 400;
const KILLS: usize = 3;

/// (offset, key, value)
type Stored = (i64, Vec<u8>, Vec<u8>);

#[derive(Clone, Default)]
struct Acks(Arc<Mutex<Vec<Stored>>>);

impl ClientContext for Acks {}
impl ProducerContext for Acks {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        // A panic here, on librdkafka's thread, would abort the test and leave its broker
        // running: a failed delivery is found by the count after the flush instead.
        let Ok(m) = result else { return };
        self.0.lock().unwrap().push((
            m.offset(),
            m.key().unwrap().to_vec(),
            m.payload().unwrap().to_vec(),
        ));
    }
}

fn read_all(addr: &str) -> Vec<Stored> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "unused")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let (_, high) = c.fetch_watermarks("table", 0, Duration::from_secs(10)).unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("table", 0, Offset::Beginning).unwrap();
    c.assign(&tpl).unwrap();
    let mut out: Vec<Stored> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while out.last().map_or(-1, |r| r.0) < high - 1 {
        assert!(Instant::now() < deadline, "read up to {high}");
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            let m = m.expect("consume");
            out.push((
                m.offset(),
                m.key().unwrap().to_vec(),
                m.payload().unwrap().to_vec(),
            ));
        }
    }
    out
}

/// Whether the cleaner is writing a segment now: its unfinished output is on disk.
fn cleaning(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".log.cleaned"))
        })
        .unwrap_or(false)
}

#[test]
fn a_sigkill_during_cleaning_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let toml = tmp.path().join("laminar.toml");
    // A slow cleaner, so that a pass takes seconds and is killed in the middle.
    std::fs::write(
        &toml,
        r#"
"log.cleaner.backoff.ms" = 100
"log.cleaner.io.max.bytes.per.second" = 400000
"log.cleaner.io.buffer.size" = 16384
"#,
    )
    .unwrap();
    let args = ["--config", toml.to_str().unwrap()];
    let mut broker = common::serve_with(&data, "127.0.0.1:0", &args);
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &broker.addr)
        .create()
        .unwrap();
    let t = NewTopic::new("table", 1, TopicReplication::Fixed(1))
        .set("cleanup.policy", "compact")
        .set("segment.bytes", "65536")
        .set("segment.ms", "1000")
        .set("min.cleanable.dirty.ratio", "0.01");
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    assert!(block(admin.create_topics([&t], &opts)).unwrap()[0].is_ok());

    let acks = Acks::default();
    let p: ThreadedProducer<Acks> = ClientConfig::new()
        .set("bootstrap.servers", &broker.addr)
        .set("linger.ms", "5")
        // A batch must fit a segment (64 KiB here), as in Kafka.
        .set("batch.size", "16384")
        .create_with_context(acks.clone())
        .unwrap();
    let send = |i: usize, key: &str| {
        let value = format!("{i}-{}", "v".repeat(100));
        let mut r = BaseRecord::to("table").partition(0).key(key).payload(&value);
        loop {
            match p.send(r) {
                Ok(()) => break,
                Err((_, back)) => {
                    r = back;
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
    };
    for i in 0..RECORDS {
        send(i, &format!("key-{}", i % KEYS));
    }
    p.flush(Duration::from_secs(60)).unwrap();
    // After segment.ms, one more record rolls the segment that holds the rest. Its own key:
    // the active segment is never cleaned, so a key it holds would keep an older value too.
    std::thread::sleep(Duration::from_millis(1_100));
    send(RECORDS, "marker");
    p.flush(Duration::from_secs(60)).unwrap();
    drop(p);
    let written: Vec<Stored> = {
        let mut w = acks.0.lock().unwrap().clone();
        w.sort();
        w
    };
    assert_eq!(written.len(), RECORDS + 1);
    let newest: BTreeMap<&[u8], &Stored> = written.iter().map(|r| (&r.1[..], r)).collect();
    let mut compacted: Vec<Stored> = newest.values().map(|r| (*r).clone()).collect();
    compacted.sort();

    let dir = data.join("table-0");
    for kill in 0..KILLS {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !cleaning(&dir) {
            assert!(
                Instant::now() < deadline,
                "kill {kill}: the cleaner never started"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(50 + 150 * kill as u64));
        broker.kill9();
        broker = common::serve_with(&data, "127.0.0.1:0", &args);
        let got = read_all(&broker.addr);
        // Every record read was written there, and every key's newest value is there.
        let mut w = written.iter();
        for r in &got {
            assert!(
                w.any(|x| x == r),
                "kill {kill}: offset {} was not written so",
                r.0
            );
        }
        let mut g = got.iter();
        for r in &compacted {
            assert!(g.any(|x| x == r), "kill {kill}: offset {} was lost", r.0);
        }
    }
    // Left alone, the cleaner finishes.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let got = read_all(&broker.addr);
        if got == compacted {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} records left, {} expected",
            got.len(),
            compacted.len()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    broker.terminate();
}
