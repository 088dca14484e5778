//! Stalls made real with laminar-faultfs under the broker's data directory: a slow disk in
//! one place must not stall requests that do not touch it (invariant 1).

mod common;

use std::time::{Duration, Instant};

use laminar_faultfs::{Mount, Options};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

/// A librdkafka producer that sends each record at once, acks=all (librdkafka's default).
fn producer(addr: &str) -> ThreadedProducer<DefaultProducerContext> {
    ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("acks", "all")
        .set("linger.ms", "0")
        .create()
        .unwrap()
}

/// How long the disk takes to create each file and directory of the new topic.
const STALL: Duration = Duration::from_secs(2);

#[test]
fn a_topic_created_on_a_slow_disk_does_not_stall_produce_to_other_topics() {
    let tmp = tempfile::tempdir().unwrap();
    let (mount, mnt) = Mount::in_dir(tmp.path(), Options::default()).unwrap();
    let broker = common::serve(&mnt.join("data"));
    let addr = broker.addr.clone();
    common::create_topic(&addr, "fast", 1);
    let p = producer(&addr);
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

/// Assigns one consumer both partitions of topic `two` from the start (librdkafka then asks
/// for both in each Fetch) and returns it with the time until each partition's first record
/// arrived (`None` if not within 60 s).
fn first_record_of_each(addr: &str, group: &str) -> (rdkafka::consumer::BaseConsumer, [Option<Duration>; 2]) {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message;
    use rdkafka::{Offset, TopicPartitionList};

    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", group)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for partition in [0, 1] {
        tpl.add_partition_offset("two", partition, Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    let started = Instant::now();
    let mut arrived = [None, None];
    while arrived.iter().any(Option::is_none) && started.elapsed() < Duration::from_secs(60) {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(50)) {
            arrived[m.partition() as usize].get_or_insert(started.elapsed());
        }
    }
    (c, arrived)
}

/// How long the disk takes to answer each read of the stalled partition's files.
const READ_STALL: Duration = Duration::from_secs(4);

#[test]
fn a_partition_whose_reads_stall_does_not_hold_up_fetches_of_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let (mount, mnt) = Mount::in_dir(tmp.path(), Options::default()).unwrap();
    // One I/O thread: the stuck read must not keep the pool's only permit either.
    let config = tmp.path().join("laminar.toml");
    std::fs::write(&config, "\"num.io.threads\" = 1\n").unwrap();
    let broker = common::serve_with(
        &mnt.join("data"),
        "127.0.0.1:0",
        &["--config", config.to_str().unwrap()],
    );
    let addr = broker.addr.clone();
    common::create_topic(&addr, "two", 2);
    let p = producer(&addr);
    // Every read of partition 1's files takes 4 s. The record just written there is in a
    // page the kernel has not read whole, so the fetch's read of it reaches the disk.
    mount
        .command(&format!("delay read *two-1/* {}", READ_STALL.as_millis()))
        .unwrap();
    for partition in [0, 1] {
        p.send(
            BaseRecord::<(), _>::to("two")
                .partition(partition)
                .payload(&format!("p{partition}")),
        )
        .unwrap();
    }
    p.flush(Duration::from_secs(30)).unwrap();

    // One consumer of both partitions: librdkafka asks for both in each Fetch.
    let (c, arrived) = first_record_of_each(&addr, "stalled-reads");
    let stats = mount.command("stats").unwrap();
    mount.command("clear").unwrap();
    let [p0, p1] = arrived.map(|a| a.expect("both records arrived"));
    assert!(
        !stats.contains("\"delayed\":0"),
        "the read of partition 1 stalled: {stats}"
    );
    assert!(
        p1 >= READ_STALL,
        "partition 1's record came after its stall: {p1:?}"
    );
    assert!(
        p0 < Duration::from_millis(2000),
        "partition 0's record waited {p0:?} behind partition 1's stalled read"
    );
    drop(c);
    drop(p);
    broker.terminate();
    mount.unmount().unwrap();
}

/// How long the disk takes to answer each write of the stalled partition's files.
const WRITE_STALL: Duration = Duration::from_secs(3);

#[test]
fn a_partition_whose_writes_stall_does_not_hold_up_fetches_of_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let (mount, mnt) = Mount::in_dir(tmp.path(), Options::default()).unwrap();
    let broker = common::serve(&mnt.join("data"));
    let addr = broker.addr.clone();
    common::create_topic(&addr, "two", 2);
    let p = producer(&addr);
    // Partition 1's first batch starts in the segment's first page and ends in its second,
    // which the write leaves partly written: the page cache holds it, not read whole.
    let big = "x".repeat(5000);
    for (partition, payload) in [(0, "p0"), (1, big.as_str())] {
        p.send(
            BaseRecord::<(), _>::to("two")
                .partition(partition)
                .payload(payload),
        )
        .unwrap();
    }
    p.flush(Duration::from_secs(30)).unwrap();

    // The next write to partition 1 takes 3 s. Through FUSE, a write to a page not read
    // whole keeps that page locked until the write returns, so reading the end of the first
    // batch waits for it.
    mount
        .command(&format!("delay write *two-1/* {}", WRITE_STALL.as_millis()))
        .unwrap();
    p.send(BaseRecord::<(), _>::to("two").partition(1).payload("stalled"))
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));

    let (c, arrived) = first_record_of_each(&addr, "stalled-writes");
    p.flush(Duration::from_secs(30)).unwrap();
    let stats = mount.command("stats").unwrap();
    mount.command("clear").unwrap();
    let [p0, p1] = arrived.map(|a| a.expect("both partitions' first records arrived"));
    assert!(
        !stats.contains("\"delayed\":0"),
        "the write to partition 1 stalled: {stats}"
    );
    assert!(
        p0 < Duration::from_millis(1500),
        "partition 0's record waited {p0:?} behind partition 1's stalled write (partition 1's: {p1:?})"
    );
    drop(c);
    drop(p);
    broker.terminate();
    mount.unmount().unwrap();
}
