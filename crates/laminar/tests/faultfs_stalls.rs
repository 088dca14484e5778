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

/// Keeps the longest time from a send to its acknowledgement; fails on any error.
#[derive(Default)]
struct Timed(std::sync::Mutex<Duration>);

impl Timed {
    fn worst(&self) -> Duration {
        *self.0.lock().unwrap()
    }
}

impl rdkafka::ClientContext for Timed {}
impl rdkafka::producer::ProducerContext for Timed {
    type DeliveryOpaque = Box<Instant>;
    fn delivery(&self, result: &rdkafka::message::DeliveryResult<'_>, sent: Box<Instant>) {
        assert!(result.is_ok(), "a record was not acknowledged");
        let took = sent.elapsed();
        let mut worst = self.0.lock().unwrap();
        *worst = (*worst).max(took);
    }
}

/// How long the disk takes for each metadata change in the stalled partition's directory.
const METADATA_STALL: Duration = Duration::from_secs(3);

/// Issue 27: a `fallocate` that waited 2.5-5 s for a block bitmap read (queued behind a
/// consumer's cold reads) stalled every produce to its partition. Here every fallocate,
/// file creation, rename, unlink and truncation in one partition's directory takes 3 s,
/// while small segments make that partition roll and retention removes its old segments:
/// every produce to it (acks=1) and to another topic (acks=all) is acknowledged within 1 s.
/// With the `fallocate` on the append path as it was, the first produce to it took 3 s.
#[test]
fn produce_does_not_wait_for_a_slow_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let (mount, mnt) = Mount::in_dir(tmp.path(), Options::default()).unwrap();
    let config = tmp.path().join("laminar.toml");
    std::fs::write(
        &config,
        "\"log.segment.bytes\" = 262144\n\
         \"log.retention.bytes\" = 1048576\n\
         \"log.retention.check.interval.ms\" = 500\n",
    )
    .unwrap();
    let broker = common::serve_with(
        &mnt.join("data"),
        "127.0.0.1:0",
        &["--config", config.to_str().unwrap()],
    );
    let addr = broker.addr.clone();
    common::create_topic(&addr, "slow", 1);
    common::create_topic(&addr, "fast", 1);
    for op in ["fallocate", "create", "rename", "unlink", "truncate"] {
        mount
            .command(&format!(
                "delay {op} data/slow-0/* {}",
                METADATA_STALL.as_millis()
            ))
            .unwrap();
    }
    let timed = |acks: &str| -> ThreadedProducer<Timed> {
        ClientConfig::new()
            .set("bootstrap.servers", &addr)
            .set("acks", acks)
            .set("linger.ms", "0")
            .create_with_context(Timed::default())
            .unwrap()
    };
    let (acks_1, acks_all) = (timed("1"), timed("all"));
    let value = "v".repeat(1000);
    // 500 records/s of 1 kB to each for 12 s: 6 MB, two dozen segments of 256 KiB, and
    // time for the slow directory's creates, allocations, renames, truncations and unlinks
    // (retention keeps 1 MiB) to stall, one after another, while the producers run.
    const RECORDS: usize = 6000;
    for _ in 0..RECORDS {
        for (p, topic) in [(&acks_1, "slow"), (&acks_all, "fast")] {
            p.send(BaseRecord::<(), _, _>::with_opaque_to(topic, Box::new(Instant::now())).payload(&value))
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    acks_1.flush(Duration::from_secs(60)).unwrap();
    acks_all.flush(Duration::from_secs(60)).unwrap();
    let slow_worst = acks_1.context().worst();
    let fast_worst = acks_all.context().worst();
    let stats = mount.command("stats").unwrap();
    mount.command("clear").unwrap();
    eprintln!("worst produce: acks=1 to slow {slow_worst:?}, acks=all to fast {fast_worst:?}; {stats}");
    assert!(
        !stats.contains("\"delayed\":0"),
        "the slow directory's calls were delayed: {stats}"
    );
    assert!(
        slow_worst < Duration::from_millis(1000),
        "acks=1 to the slow partition waited {slow_worst:?} behind its directory"
    );
    assert!(
        fast_worst < Duration::from_millis(1000),
        "acks=all to another topic waited {fast_worst:?} behind the slow directory"
    );
    // Consumers see the acks=1 records once they are synced (`log.read.after.fsync`): the
    // slow directory held the partition's flush back until its delays ended.
    let deadline = Instant::now() + Duration::from_secs(60);
    while common::high_watermark(&addr, "slow") < RECORDS as i64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(common::high_watermark(&addr, "slow"), RECORDS as i64);
    assert_eq!(common::high_watermark(&addr, "fast"), RECORDS as i64);
    drop((acks_1, acks_all));
    broker.terminate();
    mount.unmount().unwrap();
}
