//! Issue 11, part 2: the group log is Kafka's `__consumer_offsets`, compacted. Through
//! librdkafka: it is listed, producing to it is refused, churned commits are compacted away so that a restart
//! replays the live state, a deleted group stays deleted, and the log of earlier Laminar
//! versions is migrated. (Kafka's own formatters decode it in `laminar/tests/kafka_tools.rs`.)

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::{block, consumer, TestBroker};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};

const OFFSETS_TOPIC: &str = "__consumer_offsets";

fn group_consumer(addr: &str, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("topic.metadata.refresh.interval.ms", "500")
        .create()
        .unwrap()
}

fn create_topic(addr: &str, name: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .create()
        .unwrap();
    let topic = rdkafka::admin::NewTopic::new(name, partitions, rdkafka::admin::TopicReplication::Fixed(1));
    let r = block(admin.create_topics([&topic], &AdminOptions::new())).unwrap();
    assert!(r[0].is_ok(), "{r:?}");
}

/// Commits `offset` for `topic`-0 in `group`, from outside any generation.
fn commit(c: &BaseConsumer, topic: &str, offset: i64) {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(offset))
        .unwrap();
    c.commit(&tpl, CommitMode::Sync).unwrap();
}

fn committed(c: &BaseConsumer, topic: &str) -> Offset {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, 0);
    let got = c.committed_offsets(tpl, Duration::from_secs(10)).unwrap();
    got.find_partition(topic, 0).unwrap().offset()
}

/// Every (key, has a value) of `__consumer_offsets`, read from its start by a plain consumer.
fn read_offsets_topic(addr: &str) -> Vec<(Vec<u8>, bool)> {
    let c = consumer(addr);
    let (_, high) = c
        .fetch_watermarks(OFFSETS_TOPIC, 0, Duration::from_secs(10))
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(OFFSETS_TOPIC, 0, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "read {OFFSETS_TOPIC} up to {high}");
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                out.push((m.key().unwrap_or_default().to_vec(), m.payload().is_some()));
                if m.offset() + 1 >= high {
                    return out;
                }
            }
            Some(Err(e)) => panic!("reading {OFFSETS_TOPIC}: {e}"),
            None if high == 0 => return out,
            None => {}
        }
    }
}

/// Kafka's offset commit key: kind 1, group, topic, partition.
fn offset_key(group: &str, topic: &str, partition: i32) -> Vec<u8> {
    let mut k = 1i16.to_be_bytes().to_vec();
    for s in [group, topic] {
        k.extend((s.len() as i16).to_be_bytes());
        k.extend(s.as_bytes());
    }
    k.extend(partition.to_be_bytes());
    k
}

#[test]
fn consumer_offsets_is_listed_and_refuses_producers() {
    let b = TestBroker::start_with(|c| c.group_initial_rebalance_delay_ms = 0);
    create_topic(&b.addr, "visible", 1);
    let md = consumer(&b.addr)
        .fetch_metadata(None, Duration::from_secs(10))
        .unwrap();
    let names: HashSet<&str> = md.topics().iter().map(|t| t.name()).collect();
    assert!(names.contains(OFFSETS_TOPIC), "{names:?}");

    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &b.addr)
        .set("message.timeout.ms", "10000")
        .create()
        .unwrap();
    let refused = block(p.send(
        FutureRecord::to(OFFSETS_TOPIC).partition(0).key("k").payload("v"),
        Duration::from_secs(10),
    ));
    match refused {
        Err((KafkaError::MessageProduction(RDKafkaErrorCode::InvalidTopic), _)) => {}
        other => panic!("expected INVALID_TOPIC_EXCEPTION, got {other:?}"),
    }
}

#[test]
fn churned_commits_are_compacted_and_a_restart_replays_the_live_state() {
    let tune = |c: &mut laminar_broker::BrokerConfig| {
        c.offsets_topic_segment_bytes = 4096;
        c.log_cleaner_backoff_ms = 50;
        c.group_initial_rebalance_delay_ms = 0;
    };
    let b = TestBroker::start_with(tune);
    create_topic(&b.addr, "work", 1);
    let doomed = group_consumer(&b.addr, "doomed");
    commit(&doomed, "work", 7);
    drop(doomed);
    let c = group_consumer(&b.addr, "churn");
    const COMMITS: i64 = 600;
    for offset in 1..=COMMITS {
        commit(&c, "work", offset);
    }
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &b.addr)
        .create()
        .unwrap();
    let deleted = block(admin.delete_groups(&["doomed"], &AdminOptions::new())).unwrap();
    assert!(deleted[0].is_ok(), "{deleted:?}");
    // Roll the segment that holds the deletion, so that the cleaner may pass over it.
    for offset in 1..=50 {
        commit(&c, "work", COMMITS + offset);
    }
    let last = COMMITS + 50;

    // The cleaner keeps one commit per key out of the hundreds in rolled segments, and of
    // the deleted group only its tombstone (for delete.retention.ms). Passes come one after
    // another as segments roll: wait for one that has gone past the deletion.
    let churn_key = offset_key("churn", "work", 0);
    let doomed_key = offset_key("doomed", "work", 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let records = read_offsets_topic(&b.addr);
        let churned = records.iter().filter(|(k, _)| *k == churn_key).count();
        let doomed: Vec<bool> = records
            .iter()
            .filter(|(k, _)| *k == doomed_key)
            .map(|(_, has_value)| *has_value)
            .collect();
        if churned < 100 && doomed == [false] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after 60 s: {churned} commits of churn left, the deleted group's records {doomed:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(committed(&c, "work"), Offset::Offset(last));
    drop(c);

    // `_tmp` outlives the broker below: it is dropped last.
    let (dir, _tmp) = b.stop();
    let b = TestBroker::start_in(dir, tune);
    let c = group_consumer(&b.addr, "churn");
    assert_eq!(
        committed(&c, "work"),
        Offset::Offset(last),
        "the live state is back"
    );
    let doomed = group_consumer(&b.addr, "doomed");
    assert_eq!(
        committed(&doomed, "work"),
        Offset::Invalid,
        "a deleted group stays deleted"
    );
}

/// A group's metadata (generation, members, assignment) is written when it settles and read
/// back at startup: after a clean restart on the same address, the member carries on with
/// its generation, without a rebalance, as it would with Kafka.
#[test]
fn a_stable_group_survives_a_restart_without_a_rebalance() {
    let tune = |c: &mut laminar_broker::BrokerConfig| c.group_initial_rebalance_delay_ms = 0;
    let b = TestBroker::start_with(tune);
    let addr = b.addr.clone();
    create_topic(&addr, "steady", 1);
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &addr)
        .set("group.id", "steady")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "30000")
        .set("heartbeat.interval.ms", "200")
        .set("reconnect.backoff.max.ms", "200")
        .create()
        .unwrap();
    c.subscribe(&["steady"]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.assignment().unwrap().count() == 0 {
        assert!(Instant::now() < deadline, "no assignment");
        let _ = c.poll(Duration::from_millis(100));
    }
    let describe = |c: &BaseConsumer| {
        let list = c
            .fetch_group_list(Some("steady"), Duration::from_secs(10))
            .unwrap();
        let g = &list.groups()[0];
        let members: Vec<String> = g.members().iter().map(|m| m.id().to_string()).collect();
        (g.state().to_string(), members)
    };
    let before = describe(&c);
    assert_eq!(before.0, "Stable");
    // The writer of group metadata runs every 50 ms; a clean stop writes what is left.
    let (dir, _tmp) = b.stop();
    let b = TestBroker::start_in(dir, |cfg| {
        tune(cfg);
        cfg.listeners = laminar_broker::listeners::ListenerSettings::plaintext(addr.parse().unwrap());
    });
    // The member heartbeats through the restart; it keeps its id and its assignment.
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let _ = c.poll(Duration::from_millis(100));
    }
    assert_eq!(describe(&c), before, "the same member, still stable");
    assert_eq!(c.assignment().unwrap().count(), 1);
    drop(c);
    drop(b);
}
