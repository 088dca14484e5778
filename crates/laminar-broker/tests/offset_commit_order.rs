//! Offset commits from several connections to one group's partition at once: what the broker
//! serves from memory afterwards must be what a restart replays from the group log, which is
//! the commit written last. (The commits used to be applied to memory in the order their
//! fsync waits woke up, so memory could keep an older commit than the log's last.)

mod common;

use std::net::TcpStream;
use std::sync::{Arc, Barrier};

use common::raw::call;
use common::TestBroker;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const PARTITIONS: i32 = 48;
const COMMITTERS: i64 = 4;

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn commit(s: &mut TcpStream, partition: i32, offset: i64) {
    let mut p = offset_commit_request::OffsetCommitRequestPartition::default();
    p.partition_index = partition;
    p.committed_offset = offset;
    let mut t = offset_commit_request::OffsetCommitRequestTopic::default();
    t.name = TopicName(sb("t"));
    t.partitions = vec![p];
    let mut r = OffsetCommitRequest::default();
    r.group_id = GroupId(sb("g"));
    r.generation_id_or_member_epoch = -1;
    r.topics = vec![t];
    let resp: OffsetCommitResponse = call(s, ApiKey::OffsetCommit, 2, 1, &r);
    assert_eq!(resp.topics[0].partitions[0].error_code, 0);
}

fn committed(addr: &str) -> Vec<i64> {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut t = offset_fetch_request::OffsetFetchRequestTopic::default();
    t.name = TopicName(sb("t"));
    t.partition_indexes = (0..PARTITIONS).collect();
    let mut r = OffsetFetchRequest::default();
    r.group_id = GroupId(sb("g"));
    r.topics = Some(vec![t]);
    let resp: OffsetFetchResponse = call(&mut s, ApiKey::OffsetFetch, 5, 2, &r);
    let mut parts: Vec<_> = resp.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.committed_offset))
        .collect();
    parts.sort();
    parts.into_iter().map(|(_, o)| o).collect()
}

#[test]
fn memory_holds_the_commit_the_log_holds_last() {
    let broker = TestBroker::start();
    let mut s = TcpStream::connect(&broker.addr).unwrap();
    let mut t = create_topics_request::CreatableTopic::default();
    t.name = TopicName(sb("t"));
    t.num_partitions = PARTITIONS;
    t.replication_factor = -1;
    let mut r = CreateTopicsRequest::default();
    r.topics = vec![t];
    r.timeout_ms = 10_000;
    let created: CreateTopicsResponse = call(&mut s, ApiKey::CreateTopics, 5, 1, &r);
    assert_eq!(created.topics[0].error_code, 0);

    // Each committer commits its own offset to every partition in turn; a barrier lines the
    // committers up on each partition, so their commits wait for the same fsyncs.
    let barrier = Arc::new(Barrier::new(COMMITTERS as usize));
    let committers: Vec<_> = (0..COMMITTERS)
        .map(|c| {
            let addr = broker.addr.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(&addr).unwrap();
                for p in 0..PARTITIONS {
                    barrier.wait();
                    commit(&mut s, p, 1000 * (c + 1) + p as i64);
                }
            })
        })
        .collect();
    for c in committers {
        c.join().unwrap();
    }
    let served = committed(&broker.addr);

    let (dir, _tmp) = broker.stop();
    let broker = TestBroker::start_in(dir, |_| {});
    let replayed = committed(&broker.addr);
    assert_eq!(
        served, replayed,
        "served before the restart, and replayed from the log"
    );
}
