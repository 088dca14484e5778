//! Issue 13: transactions with librdkafka's transactional producer. Commits are visible to
//! read_committed consumers and aborts are not (read_uncommitted ones see both); a second
//! instance of a transactional id fences the first; a transaction left open past its timeout
//! is aborted by the coordinator; decided and open transactions survive a restart.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::Producer;
use rdkafka::{Message, Offset, TopicPartitionList};

const T: Duration = Duration::from_secs(30);

fn txn_producer(addr: &str, id: &str, extra: &[(&str, &str)]) -> TestProducer {
    let mut settings = vec![("transactional.id", id), ("linger.ms", "1")];
    settings.extend_from_slice(extra);
    let p = producer(addr, &settings);
    p.init_transactions(T).expect("init_transactions");
    p
}

fn create_topic(addr: &str, topic: &str, partitions: i32) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<_> = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .create()
        .unwrap();
    let r = block(admin.create_topics(
        &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
        &AdminOptions::new(),
    ))
    .unwrap();
    assert!(r.iter().all(|r| r.is_ok()), "{r:?}");
}

fn send_values(p: &TestProducer, topic: &str, values: impl IntoIterator<Item = String>) {
    for (i, v) in values.into_iter().enumerate() {
        let rec = Rec {
            key: Some(v.clone().into_bytes()),
            value: Some(v.into_bytes()),
            headers: vec![],
            timestamp_ms: 1_700_000_000_000 + i as i64,
        };
        send(p, topic, Some((i % 2) as i32), &rec);
    }
}

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// Every value a consumer with `isolation` reads from both partitions of `topic`, reading
/// until both are at their end (the last stable offset for read_committed) and nothing more
/// comes for a moment.
fn read_all(addr: &str, topic: &str, isolation: &str) -> Vec<String> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "txn-test-reader")
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation)
        .set("enable.partition.eof", "true")
        .set("fetch.wait.max.ms", "50")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..2 {
        tpl.add_partition_offset(topic, p, Offset::Beginning).unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let mut at_end = BTreeSet::new();
    let deadline = Instant::now() + T;
    while Instant::now() < deadline {
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                at_end.remove(&m.partition());
                out.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            Some(Err(e)) => panic!("consume: {e}"),
            None if at_end.len() == 2 => break,
            None => {}
        }
    }
    out.sort();
    out
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn committed_records_are_visible_and_aborted_ones_only_to_read_uncommitted() {
    let b = TestBroker::start();
    create_topic(&b.addr, "txn", 2);
    let p = txn_producer(&b.addr, "tx-1", &[]);
    p.begin_transaction().unwrap();
    send_values(&p, "txn", values("first", 10));
    p.commit_transaction(T).unwrap();
    p.begin_transaction().unwrap();
    send_values(&p, "txn", values("aborted", 10));
    p.flush(T).unwrap();
    p.abort_transaction(T).unwrap();
    p.begin_transaction().unwrap();
    send_values(&p, "txn", values("second", 5));
    p.commit_transaction(T).unwrap();

    let committed = sorted([values("first", 10), values("second", 5)].concat());
    assert_eq!(read_all(&b.addr, "txn", "read_committed"), committed);
    let everything = sorted([values("first", 10), values("aborted", 10), values("second", 5)].concat());
    assert_eq!(read_all(&b.addr, "txn", "read_uncommitted"), everything);

    // An open transaction holds read_committed readers at its first offset.
    p.begin_transaction().unwrap();
    send_values(&p, "txn", values("open", 4));
    p.flush(T).unwrap();
    assert_eq!(read_all(&b.addr, "txn", "read_committed"), committed);
    assert_eq!(
        read_all(&b.addr, "txn", "read_uncommitted").len(),
        everything.len() + 4
    );
    // While it is open, the metrics show what read_committed readers cannot read yet.
    let (_, body) = http_get(&b.metrics_addr, "/metrics");
    let unstable = metric(
        &body,
        "laminar_partition_unstable_offsets{topic=\"txn\",partition=\"0\"}",
    );
    assert_eq!(unstable, 2.0, "two open records on partition 0");
    assert_eq!(metric(&body, "laminar_transactional_ids{state=\"Ongoing\"}"), 1.0);
    p.commit_transaction(T).unwrap();
    assert_eq!(
        read_all(&b.addr, "txn", "read_committed"),
        sorted([committed.clone(), values("open", 4)].concat())
    );
    // Counted once the markers are durable, just after the records become readable.
    let deadline = Instant::now() + T;
    let body = loop {
        let (_, body) = http_get(&b.metrics_addr, "/metrics");
        let commits = metric(&body, "laminar_transactions_ended_total{result=\"commit\"}");
        if commits >= 3.0 || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        metric(&body, "laminar_transactions_ended_total{result=\"commit\"}"),
        3.0
    );
    assert_eq!(
        metric(&body, "laminar_transactions_ended_total{result=\"abort\"}"),
        1.0
    );
    assert_eq!(
        metric(
            &body,
            "laminar_partition_unstable_offsets{topic=\"txn\",partition=\"0\"}"
        ),
        0.0
    );
}

#[test]
fn a_second_instance_fences_the_first() {
    let b = TestBroker::start();
    create_topic(&b.addr, "fence", 2);
    let zombie = txn_producer(&b.addr, "tx-fence", &[]);
    zombie.begin_transaction().unwrap();
    send_values(&zombie, "fence", values("zombie", 4));
    zombie.flush(T).unwrap();
    // The new instance's InitProducerId aborts the zombie's transaction and bumps the epoch.
    let fresh = txn_producer(&b.addr, "tx-fence", &[]);
    fresh.begin_transaction().unwrap();
    send_values(&fresh, "fence", values("fresh", 4));
    fresh.commit_transaction(T).unwrap();
    let err = zombie.commit_transaction(T).expect_err("the zombie is fenced");
    assert!(err.to_string().to_lowercase().contains("fenced"), "{err}");
    assert_eq!(
        read_all(&b.addr, "fence", "read_committed"),
        sorted(values("fresh", 4))
    );
}

#[test]
fn an_expired_transaction_is_aborted_by_the_coordinator() {
    let b = TestBroker::start_with(|c| c.transaction_abort_timed_out_transaction_cleanup_interval_ms = 100);
    create_topic(&b.addr, "expire", 2);
    let p = txn_producer(
        &b.addr,
        "tx-expire",
        &[("transaction.timeout.ms", "1000"), ("message.timeout.ms", "1000")],
    );
    p.begin_transaction().unwrap();
    send_values(&p, "expire", values("late", 6));
    p.flush(T).unwrap();
    assert!(read_all(&b.addr, "expire", "read_committed").is_empty());
    std::thread::sleep(Duration::from_millis(2_500));
    // Aborted: read_committed readers pass over it; the producer cannot commit it any more.
    assert!(read_all(&b.addr, "expire", "read_committed").is_empty());
    let c = consumer(&b.addr);
    let (_, high) = c.fetch_watermarks("expire", 0, T).unwrap();
    assert!(
        high >= 4,
        "three records and the abort marker on partition 0, high {high}"
    );
    assert!(
        p.commit_transaction(T).is_err(),
        "a transaction the coordinator aborted cannot commit"
    );
}

#[test]
fn decided_and_open_transactions_survive_a_restart() {
    let b = TestBroker::start();
    create_topic(&b.addr, "restart", 2);
    let p = txn_producer(&b.addr, "tx-restart", &[]);
    p.begin_transaction().unwrap();
    send_values(&p, "restart", values("kept", 6));
    p.commit_transaction(T).unwrap();
    let q = txn_producer(&b.addr, "tx-open", &[]);
    q.begin_transaction().unwrap();
    send_values(&q, "restart", values("open", 6));
    q.flush(T).unwrap();
    drop(p);
    drop(q);
    let (dir, tmp) = b.stop();
    let b = TestBroker::start_in(dir, |_| {});
    // The open transaction still holds read_committed readers back.
    assert_eq!(
        read_all(&b.addr, "restart", "read_committed"),
        sorted(values("kept", 6))
    );
    // A new instance of its id aborts it.
    let q = txn_producer(&b.addr, "tx-open", &[]);
    q.begin_transaction().unwrap();
    send_values(&q, "restart", values("after", 2));
    q.commit_transaction(T).unwrap();
    assert_eq!(
        read_all(&b.addr, "restart", "read_committed"),
        sorted([values("kept", 6), values("after", 2)].concat())
    );
    drop(b);
    drop(tmp);
}

/// A crash after the commit decision was durable and before the markers were written: the
/// transaction log's last record for the id is PrepareCommit. Written here into the log of a
/// stopped broker; the next start completes the commit (markers, offsets, CompleteCommit).
#[test]
fn a_transaction_decided_before_a_crash_is_completed_at_the_next_start() {
    use laminar_coordinators::txn::log::{encode_batch, replay, TRANSACTION_TOPIC};
    use laminar_coordinators::txn::{PendingOffset, TxnStatus};
    let b = TestBroker::start();
    create_topic(&b.addr, "decided", 2);
    let p = txn_producer(&b.addr, "tx-decided", &[]);
    p.begin_transaction().unwrap();
    send_values(&p, "decided", values("decided", 6));
    p.flush(T).unwrap();
    drop(p);
    let (dir, tmp) = b.stop();
    {
        let store = laminar_storage::Store::open(
            &dir,
            laminar_storage::backend::RealStorage::new(),
            Default::default(),
        )
        .unwrap();
        let log = store
            .log(&laminar_storage::LogId::new(TRANSACTION_TOPIC, 0))
            .unwrap();
        let mut meta = replay(&log).unwrap().remove("tx-decided").unwrap();
        assert_eq!(meta.status, TxnStatus::Ongoing);
        meta.status = TxnStatus::PrepareCommit;
        meta.partitions
            .insert(laminar_cluster::TopicPartition::new("__consumer_offsets", 0));
        meta.offsets.insert(
            ("decided-group".to_string(), "decided".to_string(), 1),
            PendingOffset {
                offset: 17,
                leader_epoch: -1,
                metadata: None,
                commit_ms: laminar_storage::now_ms(),
            },
        );
        let mut batch = encode_batch(&[("tx-decided".to_string(), Some(meta))]);
        log.append(&mut batch).unwrap();
        store.close().unwrap();
    }
    let b = TestBroker::start_in(dir, |_| {});
    let deadline = Instant::now() + T;
    while read_all(&b.addr, "decided", "read_committed").len() < 6 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        read_all(&b.addr, "decided", "read_committed"),
        sorted(values("decided", 6))
    );
    // The offsets committed with it reached the group.
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &b.addr)
        .set("group.id", "decided-group")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition("decided", 1);
    // Written after the markers: wait for them.
    let deadline = Instant::now() + T;
    let committed = loop {
        let committed = c.committed_offsets(tpl.clone(), T).unwrap();
        let offset = committed.find_partition("decided", 1).unwrap().offset();
        if offset != Offset::Invalid || Instant::now() > deadline {
            break offset;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(committed, Offset::Offset(17));
    drop(c);
    drop(b);
    drop(tmp);
}
