//! A fetch waiting in long poll is woken by what happens on the partitions it asked for, and
//! by nothing else: consumers idle on one partition cost nothing to the appends on another,
//! while a consumer of the written partition gets each record at once.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

const IDLE_CONSUMERS: usize = 20;
const RECORDS: usize = 300;
/// Long enough that a fetch not woken by its own partition's append shows (it would wait
/// this long), short enough that the idle consumers keep polling through the run.
const FETCH_WAIT_MS: &str = "2000";

fn consumer(addr: &str, partition: i32) -> BaseConsumer {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "unused")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", FETCH_WAIT_MS)
        .set("fetch.min.bytes", "1")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("waits", partition, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    c
}

#[test]
fn idle_consumers_on_other_partitions_are_not_woken_by_appends() {
    let dir = tempfile::tempdir().unwrap();
    let broker = common::serve(dir.path());
    let addr = broker.addr.clone();
    common::create_topic(&addr, "waits", 2);

    // Consumers of partition 1, where nothing is written: librdkafka keeps a fetch waiting
    // there (in long poll) for each of them.
    let idle: Vec<BaseConsumer> = (0..IDLE_CONSUMERS).map(|_| consumer(&addr, 1)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    // One consumer of partition 0, where the records go: each is handed to it at once.
    let reader = {
        let (addr, stop) = (addr.clone(), stop.clone());
        std::thread::spawn(move || {
            let c = consumer(&addr, 0);
            let mut delays_ms = Vec::new();
            while delays_ms.len() < RECORDS && !stop.load(Ordering::Relaxed) {
                if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
                    let sent_ms = m.timestamp().to_millis().unwrap();
                    let now_ms = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap()
                        .as_millis() as i64;
                    delays_ms.push(now_ms - sent_ms);
                }
            }
            delays_ms
        })
    };
    // Every consumer in long poll before the appends start.
    std::thread::sleep(Duration::from_secs(3));
    for c in &idle {
        let _ = c.poll(Duration::ZERO);
    }

    let woken_before = broker.metric("laminar_fetch_long_poll_wakeups_total").unwrap();
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &addr)
        .set("linger.ms", "0")
        .set("acks", "1")
        .create()
        .unwrap();
    let started = Instant::now();
    for i in 0..RECORDS {
        let payload = format!("r{i}");
        producer
            .send(BaseRecord::<(), _>::to("waits").partition(0).payload(&payload))
            .unwrap();
        producer.poll(Duration::ZERO);
        std::thread::sleep(Duration::from_millis(5));
    }
    producer.flush(Duration::from_secs(10)).unwrap();
    let delays_ms = {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !reader.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Relaxed);
        reader.join().unwrap()
    };
    let woken = broker.metric("laminar_fetch_long_poll_wakeups_total").unwrap() - woken_before;
    eprintln!(
        "{RECORDS} appends in {:?}; long-poll wakeups {woken}",
        started.elapsed()
    );
    for c in &idle {
        let _ = c.poll(Duration::ZERO);
    }

    assert_eq!(
        delays_ms.len(),
        RECORDS,
        "the consumer of partition 0 read every record"
    );
    let mut sorted = delays_ms.clone();
    sorted.sort_unstable();
    let median_ms = sorted[sorted.len() / 2];
    assert!(
        median_ms < 500,
        "a record reaches the consumer waiting on its partition at once (median {median_ms} ms; \
         {FETCH_WAIT_MS} ms would mean its fetch was not woken)"
    );
    // The reader's fetch is woken about twice an append (the append, then the flush that
    // makes it visible: 591 for 300 in one run); woken on every append, the idle ones would
    // add some 20x that.
    let bound = (4 * RECORDS) as f64;
    assert!(
        woken <= bound,
        "{woken} long-poll wakeups for {RECORDS} appends: the {IDLE_CONSUMERS} consumers idle on \
         another partition were woken (at most {bound})"
    );
}
