//! Consume throughput: a 3-member consumer group against a single consumer that does not
//! use a group, on the same data. A benchmark program, not a test.
//!
//!     cargo run --release -p laminar-broker --example group_consume -- BOOTSTRAP [RECORDS]
//!
//! It produces RECORDS (default 1,000,000) records of 1 KiB to a fresh 6-partition topic,
//! then times (a) one consumer assigned all partitions without a group, and (b) three
//! members of a new group, until every record has been read. It prints one JSON object.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

const PARTITIONS: i32 = 6;
const VALUE_BYTES: usize = 1024;

fn consumer(bootstrap: &str, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.max.bytes", "52428800")
        .set("max.partition.fetch.bytes", "1048576")
        .create()
        .unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bootstrap = args.get(1).cloned().unwrap_or_else(|| "127.0.0.1:9092".into());
    let records: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let topic = format!("group-consume-{}", std::process::id());
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let created = rt
        .block_on(admin.create_topics(
            [&NewTopic::new(&topic, PARTITIONS, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        ))
        .unwrap();
    assert!(created[0].is_ok(), "{created:?}");

    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("linger.ms", "5")
        .set("batch.size", "1000000")
        .set("queue.buffering.max.kbytes", "1048576")
        .create()
        .unwrap();
    let value = vec![b'x'; VALUE_BYTES];
    let t = Instant::now();
    for i in 0..records {
        let mut rec = BaseRecord::<(), [u8]>::to(&topic)
            .partition((i % PARTITIONS as u64) as i32)
            .payload(&value[..]);
        loop {
            match p.send(rec) {
                Ok(()) => break,
                Err((_, r)) => {
                    rec = r;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }
    p.flush(Duration::from_secs(300)).unwrap();
    let produce_s = t.elapsed().as_secs_f64();

    // (a) One consumer, no group: assigned every partition from the start.
    let c = consumer(&bootstrap, "unused");
    let mut tpl = TopicPartitionList::new();
    for part in 0..PARTITIONS {
        tpl.add_partition_offset(&topic, part, Offset::Beginning).unwrap();
    }
    c.assign(&tpl).unwrap();
    let t = Instant::now();
    let mut n = 0u64;
    while n < records {
        if let Some(Ok(_)) = c.poll(Duration::from_millis(100)) {
            n += 1;
        }
        assert!(
            t.elapsed() < Duration::from_secs(600),
            "single consumer stalled at {n}"
        );
    }
    let single_s = t.elapsed().as_secs_f64();
    drop(c);

    // (b) Three members of one group.
    let total = Arc::new(AtomicU64::new(0));
    // Microseconds from the start to the first record any member received: the join and
    // the first rebalance (group.initial.rebalance.delay.ms) happen before it.
    let first_us = Arc::new(AtomicU64::new(u64::MAX));
    let group = format!("bench-{}", std::process::id());
    let t = Instant::now();
    let members: Vec<_> = (0..3)
        .map(|_| {
            let (bootstrap, topic, group, total, first_us) = (
                bootstrap.clone(),
                topic.clone(),
                group.clone(),
                total.clone(),
                first_us.clone(),
            );
            std::thread::spawn(move || {
                let c = consumer(&bootstrap, &group);
                c.subscribe(&[&topic]).unwrap();
                let mut mine = 0u64;
                while total.load(Ordering::Relaxed) < records {
                    if let Some(Ok(_)) = c.poll(Duration::from_millis(50)) {
                        mine += 1;
                        if total.fetch_add(1, Ordering::Relaxed) == 0 {
                            first_us.store(t.elapsed().as_micros() as u64, Ordering::Relaxed);
                        }
                    }
                    assert!(t.elapsed() < Duration::from_secs(600), "group stalled");
                }
                mine
            })
        })
        .collect();
    let per_member: Vec<u64> = members.into_iter().map(|m| m.join().unwrap()).collect();
    let group_s = t.elapsed().as_secs_f64();
    let joined_s = first_us.load(Ordering::Relaxed) as f64 / 1e6;
    let consuming_s = group_s - joined_s;
    let mb = (records * VALUE_BYTES as u64) as f64 / 1e6;
    println!(
        "{}",
        serde_json::json!({
            "config": {"bootstrap": bootstrap, "records": records, "value_bytes": VALUE_BYTES, "partitions": PARTITIONS,
                        "client": format!("librdkafka {}", rdkafka::util::get_rdkafka_version().1)},
            "produce": {"seconds": produce_s, "records_per_s": records as f64 / produce_s},
            "single_consumer_no_group": {"seconds": single_s, "records_per_s": records as f64 / single_s, "mb_per_s": mb / single_s},
            "group_of_3": {"seconds": group_s, "records_per_s": records as f64 / group_s, "mb_per_s": mb / group_s,
                           "records_per_member": per_member, "join_to_first_record_seconds": joined_s,
                           "after_first_record": {"seconds": consuming_s, "records_per_s": records as f64 / consuming_s, "mb_per_s": mb / consuming_s}},
        })
    );
}
