//! Issue 13, acceptance: the Java client (kafka-clients 4.3.1) runs a consume-transform-
//! produce loop with `sendOffsetsToTransaction` while `laminar serve` is killed with SIGKILL
//! ten times and restarted on the same address; a read_committed consumer of the output
//! then sees every input record exactly once.

mod common;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};

const INPUT_RECORDS: usize = 3_000;
const KILLS: usize = 10;

fn produce_input(addr: &str, topic: &str) {
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .create()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let sends: Vec<_> = (0..INPUT_RECORDS)
            .map(|i| {
                let v = i.to_string();
                let k = format!("k{i}");
                p.send_result(
                    FutureRecord::to(topic)
                        .key(&k)
                        .payload(&v)
                        .partition((i % 2) as i32),
                )
                .unwrap()
            })
            .collect();
        for s in sends {
            s.await.unwrap().expect("input record delivered");
        }
    });
    p.flush(Duration::from_secs(30)).unwrap();
}

/// Every value of `topic`'s two partitions as a read_committed consumer reads them, up to
/// the last stable offsets.
fn read_committed(addr: &str, topic: &str) -> Vec<String> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "eos-checker")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..2 {
        tpl.add_partition_offset(topic, p, Offset::Beginning).unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let mut eof = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while eof.len() < 2 && Instant::now() < deadline {
        match c.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                eof.remove(&m.partition());
                out.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                eof.insert(p);
            }
            Some(Err(e)) => panic!("read {topic}: {e}"),
            None => {}
        }
    }
    assert_eq!(eof.len(), 2, "both partitions of {topic} read to their end");
    out
}

#[test]
fn java_consume_transform_produce_is_exactly_once_across_ten_sigkills() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut broker = serve(&dir);
    let addr = broker.addr.clone();
    create_topic(&addr, "eos-in", 2);
    create_topic(&addr, "eos-out", 2);
    produce_input(&addr, "eos-in");

    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/TransformExactlyOnce.java");
    let mut java = Command::new("java")
        .arg("-Xmx256m")
        .arg("-cp")
        .arg(format!("{}/*", kafka_lib().display()))
        .arg(&program)
        .args([
            &addr,
            "eos-in",
            "eos-out",
            "eos-group",
            "eos-txn",
            &INPUT_RECORDS.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("java (is Java installed?)");
    let mut stdout = java.stdout.take().unwrap();
    let output = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).unwrap();
        s
    });

    // Kill the broker in the middle of the loop's transactions, again and again.
    for kill in 0..KILLS {
        std::thread::sleep(Duration::from_millis(1_500 + 300 * (kill as u64 % 3)));
        assert!(
            java.try_wait().unwrap().is_none(),
            "the loop finished before kill {kill}: the kills must land while it runs"
        );
        broker.kill9();
        broker = serve_at(&dir, &addr);
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(s) = java.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = java.kill();
            let _ = java.wait();
            panic!("the Java loop did not finish: {}", output.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let printed = output.join().unwrap();
    assert!(status.success(), "the Java loop failed: {printed}");
    eprintln!("{printed}");

    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for v in read_committed(&addr, "eos-out") {
        *seen.entry(v).or_default() += 1;
    }
    let duplicated: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(duplicated.is_empty(), "records written twice: {duplicated:?}");
    let missing: Vec<_> = (0..INPUT_RECORDS)
        .map(|i| format!("out-{i}"))
        .filter(|v| !seen.contains_key(v))
        .collect();
    assert!(
        missing.is_empty(),
        "{} records lost: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    assert_eq!(seen.len(), INPUT_RECORDS);
    broker.terminate();
}
