//! Issue 3, acceptance 3, with the real binary: records acknowledged with acks=all survive
//! a SIGKILL of the broker and a restart; acks=1 records survive a clean restart (SIGTERM).

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Message, Offset, TopicPartitionList};

/// One acknowledged record: its offset and payload.
type Acked = (i64, Vec<u8>);

/// Records every acknowledged record.
#[derive(Clone, Default)]
struct Acks(Arc<Mutex<Vec<Acked>>>);

impl ClientContext for Acks {}
impl ProducerContext for Acks {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Ok(m) = result {
            self.0
                .lock()
                .unwrap()
                .push((m.offset(), m.payload().unwrap().to_vec()));
        }
    }
}

fn producer(addr: &str, acks: &str, ctx: Acks) -> ThreadedProducer<Acks> {
    ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("acks", acks)
        .set("linger.ms", "2")
        .set("message.timeout.ms", "5000")
        .create_with_context(ctx)
        .unwrap()
}

fn read_all(addr: &str, topic: &str, until: i64) -> Vec<(i64, Vec<u8>)> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "unused")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning).unwrap();
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while out.last().map_or(-1, |(o, _)| *o) < until - 1 && Instant::now() < deadline {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            out.push((m.offset(), m.payload().unwrap_or_default().to_vec()));
        }
    }
    out
}

fn check(stored: &[(i64, Vec<u8>)], acked: &[(i64, Vec<u8>)], what: &str) {
    for (offset, payload) in acked {
        let found = stored.get(*offset as usize);
        assert_eq!(
            found.map(|(o, p)| (*o, p.as_slice())),
            Some((*offset, payload.as_slice())),
            "{what}: acknowledged offset {offset}"
        );
    }
}

#[test]
fn acks_all_survives_sigkill_and_acks_1_survives_clean_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");

    // acks=all, killed with SIGKILL while a producer is still sending.
    let mut b = Some(common::serve(&dir));
    let acks = Acks::default();
    let p = producer(&b.as_ref().unwrap().addr, "all", acks.clone());
    for i in 0..3000 {
        let v = format!("all-{i}");
        p.send(BaseRecord::<(), _>::to("durable").partition(0).payload(&v))
            .unwrap();
        if i == 2000 {
            // Wait until some are acknowledged, then kill mid-stream.
            let t = Instant::now();
            while acks.0.lock().unwrap().len() < 1000 && t.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(5));
            }
            b.take().unwrap().kill9();
        }
    }
    let _ = p.flush(Duration::from_secs(10));
    drop(p);
    let acked = acks.0.lock().unwrap().clone();
    assert!(
        acked.len() >= 1000,
        "{} acknowledged before the kill",
        acked.len()
    );
    let b = common::serve(&dir);
    let top = acked.iter().map(|(o, _)| *o).max().unwrap() + 1;
    let stored = read_all(&b.addr, "durable", top);
    check(&stored, &acked, "acks=all after SIGKILL");

    // acks=1, then a clean restart.
    let acks1 = Acks::default();
    let p = producer(&b.addr, "1", acks1.clone());
    for i in 0..3000 {
        let v = format!("one-{i}");
        p.send(BaseRecord::<(), _>::to("durable").partition(0).payload(&v))
            .unwrap();
    }
    p.flush(Duration::from_secs(30)).unwrap();
    drop(p);
    let acked1 = acks1.0.lock().unwrap().clone();
    assert_eq!(acked1.len(), 3000);
    b.terminate();
    let b = common::serve(&dir);
    let top = acked1.iter().map(|(o, _)| *o).max().unwrap() + 1;
    let stored = read_all(&b.addr, "durable", top);
    check(&stored, &acked, "acks=all after two restarts");
    check(&stored, &acked1, "acks=1 after a clean restart");
    b.terminate();
}
