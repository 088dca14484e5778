//! Stalls made real with laminar-faultfs under the broker's data directory: a slow disk in
//! one place must not stall requests that do not touch it (invariant 1).

mod common;

use std::time::{Duration, Instant};

use laminar_faultfs::{Mount, Options};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

/// How long the disk takes to create each file and directory of the new topic.
const STALL: Duration = Duration::from_secs(2);

#[test]
fn a_topic_created_on_a_slow_disk_does_not_stall_produce_to_other_topics() {
    let tmp = tempfile::tempdir().unwrap();
    let (mount, mnt) = Mount::in_dir(tmp.path(), Options::default()).unwrap();
    let broker = common::serve(&mnt.join("data"));
    let addr = broker.addr.clone();
    common::create_topic(&addr, "fast", 1);
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &addr)
        .set("acks", "all")
        .set("linger.ms", "0")
        .create()
        .unwrap();
    let produce_one = |i: usize| {
        let t = Instant::now();
        p.send(BaseRecord::<(), _>::to("fast").payload(&format!("r{i}")))
            .unwrap();
        p.flush(Duration::from_secs(30)).unwrap();
        t.elapsed()
    };
    produce_one(0);

    mount
        .command(&format!("delay create data/slow-* {}", STALL.as_millis()))
        .unwrap();
    let creating = {
        let addr = addr.clone();
        std::thread::spawn(move || {
            let t = Instant::now();
            common::create_topic(&addr, "slow", 1);
            t.elapsed()
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let worst = (1..=20).map(produce_one).max().unwrap();
    let created_in = creating.join().unwrap();
    assert!(created_in >= STALL, "the stall happened: {created_in:?}");
    assert!(
        worst < Duration::from_millis(1000),
        "acks=all to another topic waited {worst:?} behind the create"
    );
    drop(p);
    broker.terminate();
    mount.unmount().unwrap();
}
