//! A seeded mutation fuzzer for the request decoders (the brief's reliability target:
//! malformed and adversarial frames are rejected without crashing and without allocating
//! from untrusted lengths).
//!
//! Seeds are valid requests of every API at every advertised version, encoded by the
//! independent `kafka-protocol` crate. Each is mutated many times: bytes flipped, the frame
//! cut short, spans overwritten with huge lengths and counts (0x7fffffff, 0x40000000, -1,
//! long varints). Every decode must return, and the largest single allocation it makes is
//! bounded by the frame's size, never by a count read from it. The seeds are fixed, so a
//! failure reproduces.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use laminar_protocol::requests::decode;
use laminar_protocol::API_TABLE;

/// Records the largest allocation made on this thread while armed.
struct Tracking;

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
    /// Every byte allocated while armed (a reallocation counts its new size).
    static TOTAL: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = ARMED.try_with(|a| {
        if a.get() {
            let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
            let _ = TOTAL.try_with(|t| t.set(t.get() + size));
        }
    });
}

unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        System.realloc(ptr, layout, new_size)
    }
}

/// Decodes `frame` with the allocator watching: (decoded?, largest allocation, total).
fn watched_decode(frame: Bytes) -> (bool, usize, usize) {
    LARGEST.with(|l| l.set(0));
    TOTAL.with(|t| t.set(0));
    ARMED.with(|a| a.set(true));
    let result = decode(frame);
    ARMED.with(|a| a.set(false));
    let ok = result.is_ok();
    drop(result);
    (ok, LARGEST.with(|l| l.get()), TOTAL.with(|t| t.get()))
}

#[global_allocator]
static ALLOCATOR: Tracking = Tracking;

const MUTATIONS_PER_SEED: usize = 2000;

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A small deterministic generator (xorshift64*), so the test needs no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn frame<R: Encodable>(key: ApiKey, version: i16, req: &R) -> Vec<u8> {
    // ListOffsets v11 is v10 with one more timestamp value; the codec knows up to v10.
    let codec_version = match key {
        ApiKey::ListOffsets => version.min(10),
        _ => version,
    };
    let mut header = RequestHeader::default();
    header.request_api_key = key as i16;
    header.request_api_version = codec_version;
    header.correlation_id = 7;
    header.client_id = Some(sb("fuzz"));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, key.request_header_version(codec_version))
        .unwrap();
    buf[2..4].copy_from_slice(&version.to_be_bytes());
    req.encode(&mut buf, codec_version)
        .unwrap_or_else(|e| panic!("encode {key:?} v{version}: {e}"));
    buf.to_vec()
}

/// A valid request of `key` at `version`, with a few elements in its arrays so that the
/// mutations reach nested decoders.
fn seed(key: i16, v: i16) -> Vec<u8> {
    let topic = || TopicName(sb("fuzz-topic"));
    match key {
        0 => {
            let mut p = produce_request::PartitionProduceData::default();
            p.index = 1;
            p.records = Some(Bytes::from_static(&[0u8; 70]));
            let mut t = produce_request::TopicProduceData::default();
            t.name = topic();
            t.partition_data = vec![p.clone(), p];
            let mut r = ProduceRequest::default();
            r.acks = -1;
            r.topic_data = vec![t];
            frame(ApiKey::Produce, v, &r)
        }
        1 => {
            let mut p = fetch_request::FetchPartition::default();
            p.partition = 2;
            p.fetch_offset = 100;
            p.partition_max_bytes = 1 << 20;
            let mut t = fetch_request::FetchTopic::default();
            t.topic = topic();
            t.partitions = vec![p.clone(), p];
            let mut r = FetchRequest::default();
            r.max_bytes = 1 << 20;
            r.topics = vec![t];
            frame(ApiKey::Fetch, v, &r)
        }
        2 => {
            let mut p = list_offsets_request::ListOffsetsPartition::default();
            p.timestamp = -1;
            let mut t = list_offsets_request::ListOffsetsTopic::default();
            t.name = topic();
            t.partitions = vec![p];
            let mut r = ListOffsetsRequest::default();
            r.topics = vec![t];
            frame(ApiKey::ListOffsets, v, &r)
        }
        3 => {
            let mut t = metadata_request::MetadataRequestTopic::default();
            t.name = Some(topic());
            let mut r = MetadataRequest::default();
            r.topics = Some(vec![t.clone(), t]);
            frame(ApiKey::Metadata, v, &r)
        }
        8 => {
            let mut p = offset_commit_request::OffsetCommitRequestPartition::default();
            p.committed_offset = 5;
            p.committed_metadata = Some(sb("m"));
            let mut t = offset_commit_request::OffsetCommitRequestTopic::default();
            t.name = topic();
            t.partitions = vec![p];
            let mut r = OffsetCommitRequest::default();
            r.group_id = GroupId(sb("g"));
            r.topics = vec![t];
            frame(ApiKey::OffsetCommit, v, &r)
        }
        9 => {
            let mut r = OffsetFetchRequest::default();
            if v < 8 {
                r.group_id = GroupId(sb("g"));
            } else {
                let mut g = offset_fetch_request::OffsetFetchRequestGroup::default();
                g.group_id = GroupId(sb("g"));
                r.groups = vec![g];
            }
            frame(ApiKey::OffsetFetch, v, &r)
        }
        10 => {
            let mut r = FindCoordinatorRequest::default();
            if v < 4 {
                r.key = sb("g");
            } else {
                r.coordinator_keys = vec![sb("g"), sb("h")];
            }
            frame(ApiKey::FindCoordinator, v, &r)
        }
        11 => {
            let mut p = join_group_request::JoinGroupRequestProtocol::default();
            p.name = sb("range");
            p.metadata = Bytes::from_static(b"\0\0\0\0\0\x01\0\x01t\0\0\0\0");
            let mut r = JoinGroupRequest::default();
            r.group_id = GroupId(sb("g"));
            r.session_timeout_ms = 10_000;
            r.protocol_type = sb("consumer");
            r.protocols = vec![p];
            frame(ApiKey::JoinGroup, v, &r)
        }
        12 => frame(ApiKey::Heartbeat, v, &HeartbeatRequest::default()),
        13 => {
            let mut r = LeaveGroupRequest::default();
            r.group_id = GroupId(sb("g"));
            if v >= 3 {
                r.members = vec![leave_group_request::MemberIdentity::default()];
            }
            frame(ApiKey::LeaveGroup, v, &r)
        }
        14 => {
            let mut a = sync_group_request::SyncGroupRequestAssignment::default();
            a.assignment = Bytes::from_static(b"\0\x01");
            let mut r = SyncGroupRequest::default();
            r.assignments = vec![a];
            frame(ApiKey::SyncGroup, v, &r)
        }
        15 => {
            let mut r = DescribeGroupsRequest::default();
            r.groups = vec![GroupId(sb("g"))];
            frame(ApiKey::DescribeGroups, v, &r)
        }
        16 => frame(ApiKey::ListGroups, v, &ListGroupsRequest::default()),
        18 => {
            let mut r = ApiVersionsRequest::default();
            if v >= 3 {
                r.client_software_name = sb("fuzz");
                r.client_software_version = sb("1");
            }
            frame(ApiKey::ApiVersions, v, &r)
        }
        19 => {
            let mut c = create_topics_request::CreatableTopicConfig::default();
            c.name = sb("retention.ms");
            c.value = Some(sb("1000"));
            let mut t = create_topics_request::CreatableTopic::default();
            t.name = topic();
            t.num_partitions = 3;
            t.configs = vec![c];
            let mut r = CreateTopicsRequest::default();
            r.topics = vec![t];
            frame(ApiKey::CreateTopics, v, &r)
        }
        20 => {
            let mut t = delete_topics_request::DeleteTopicState::default();
            t.name = Some(topic());
            let mut r = DeleteTopicsRequest::default();
            if v < 6 {
                r.topic_names = vec![topic()];
            } else {
                r.topics = vec![t];
            }
            frame(ApiKey::DeleteTopics, v, &r)
        }
        22 => frame(ApiKey::InitProducerId, v, &InitProducerIdRequest::default()),
        32 => {
            let mut res = describe_configs_request::DescribeConfigsResource::default();
            res.resource_type = 2;
            res.resource_name = sb("t");
            res.configuration_keys = Some(vec![sb("retention.ms")]);
            let mut r = DescribeConfigsRequest::default();
            r.resources = vec![res];
            frame(ApiKey::DescribeConfigs, v, &r)
        }
        37 => {
            let mut t = create_partitions_request::CreatePartitionsTopic::default();
            t.name = topic();
            t.count = 4;
            let mut r = CreatePartitionsRequest::default();
            r.topics = vec![t];
            frame(ApiKey::CreatePartitions, v, &r)
        }
        42 => {
            let mut r = DeleteGroupsRequest::default();
            r.groups_names = vec![GroupId(sb("g"))];
            frame(ApiKey::DeleteGroups, v, &r)
        }
        47 => {
            let mut p = offset_delete_request::OffsetDeleteRequestPartition::default();
            p.partition_index = 1;
            let mut t = offset_delete_request::OffsetDeleteRequestTopic::default();
            t.name = topic();
            t.partitions = vec![p];
            let mut r = OffsetDeleteRequest::default();
            r.group_id = GroupId(sb("g"));
            r.topics = vec![t];
            frame(ApiKey::OffsetDelete, v, &r)
        }
        48 => {
            let mut c = describe_client_quotas_request::ComponentData::default();
            c.entity_type = sb("client-id");
            c._match = Some(sb("c"));
            let mut r = DescribeClientQuotasRequest::default();
            r.components = vec![c];
            frame(ApiKey::DescribeClientQuotas, v, &r)
        }
        49 => {
            let mut e = alter_client_quotas_request::EntityData::default();
            e.entity_type = sb("client-id");
            let mut op = alter_client_quotas_request::OpData::default();
            op.key = sb("consumer_byte_rate");
            op.value = 1e6;
            let mut entry = alter_client_quotas_request::EntryData::default();
            entry.entity = vec![e];
            entry.ops = vec![op];
            let mut r = AlterClientQuotasRequest::default();
            r.entries = vec![entry];
            frame(ApiKey::AlterClientQuotas, v, &r)
        }
        35 => {
            let mut t = describe_log_dirs_request::DescribableLogDirTopic::default();
            t.topic = TopicName(sb("t"));
            t.partitions = vec![0, 1];
            let mut r = DescribeLogDirsRequest::default();
            r.topics = Some(vec![t]);
            frame(ApiKey::DescribeLogDirs, v, &r)
        }
        60 => {
            let mut r = DescribeClusterRequest::default();
            r.endpoint_type = 1;
            frame(ApiKey::DescribeCluster, v, &r)
        }
        23 => {
            let mut p = offset_for_leader_epoch_request::OffsetForLeaderPartition::default();
            p.current_leader_epoch = 0;
            let mut t = offset_for_leader_epoch_request::OffsetForLeaderTopic::default();
            t.topic = TopicName(sb("t"));
            t.partitions = vec![p];
            let mut r = OffsetForLeaderEpochRequest::default();
            r.topics = vec![t];
            frame(ApiKey::OffsetForLeaderEpoch, v, &r)
        }
        44 => {
            let mut c = incremental_alter_configs_request::AlterableConfig::default();
            c.name = sb("retention.ms");
            c.value = Some(sb("1000"));
            let mut res = incremental_alter_configs_request::AlterConfigsResource::default();
            res.resource_type = 2;
            res.resource_name = sb("t");
            res.configs = vec![c];
            let mut r = IncrementalAlterConfigsRequest::default();
            r.resources = vec![res];
            frame(ApiKey::IncrementalAlterConfigs, v, &r)
        }
        33 => {
            let mut c = alter_configs_request::AlterableConfig::default();
            c.name = sb("retention.ms");
            c.value = Some(sb("1000"));
            let mut res = alter_configs_request::AlterConfigsResource::default();
            res.resource_type = 2;
            res.resource_name = sb("t");
            res.configs = vec![c];
            let mut r = AlterConfigsRequest::default();
            r.resources = vec![res];
            frame(ApiKey::AlterConfigs, v, &r)
        }
        43 => {
            let mut tp = elect_leaders_request::TopicPartitions::default();
            tp.topic = TopicName(sb("t"));
            tp.partitions = vec![0, 1];
            let mut r = ElectLeadersRequest::default();
            r.topic_partitions = Some(vec![tp]);
            frame(ApiKey::ElectLeaders, v, &r)
        }
        45 => {
            let mut moved = alter_partition_reassignments_request::ReassignablePartition::default();
            moved.partition_index = 0;
            moved.replicas = Some(vec![BrokerId(2), BrokerId(3)]);
            let mut cancelled = alter_partition_reassignments_request::ReassignablePartition::default();
            cancelled.partition_index = 1;
            cancelled.replicas = None;
            let mut t = alter_partition_reassignments_request::ReassignableTopic::default();
            t.name = TopicName(sb("t"));
            t.partitions = vec![moved, cancelled];
            let mut r = AlterPartitionReassignmentsRequest::default();
            r.topics = vec![t];
            frame(ApiKey::AlterPartitionReassignments, v, &r)
        }
        46 => {
            let mut t = list_partition_reassignments_request::ListPartitionReassignmentsTopics::default();
            t.name = TopicName(sb("t"));
            t.partition_indexes = vec![0];
            let mut r = ListPartitionReassignmentsRequest::default();
            r.topics = Some(vec![t]);
            frame(ApiKey::ListPartitionReassignments, v, &r)
        }
        61 => {
            let mut t = describe_producers_request::TopicRequest::default();
            t.name = TopicName(sb("t"));
            t.partition_indexes = vec![0, 1];
            let mut r = DescribeProducersRequest::default();
            r.topics = vec![t];
            frame(ApiKey::DescribeProducers, v, &r)
        }
        21 => {
            let mut p = delete_records_request::DeleteRecordsPartition::default();
            p.partition_index = 0;
            p.offset = 5;
            let mut t = delete_records_request::DeleteRecordsTopic::default();
            t.name = TopicName(sb("t"));
            t.partitions = vec![p];
            let mut r = DeleteRecordsRequest::default();
            r.topics = vec![t];
            frame(ApiKey::DeleteRecords, v, &r)
        }
        24 => {
            let mut t = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
            t.name = topic();
            t.partitions = vec![0, 1, 2];
            let mut r = AddPartitionsToTxnRequest::default();
            if v >= 4 {
                let mut txn = add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default();
                txn.transactional_id = TransactionalId(sb("txn"));
                txn.producer_id = ProducerId(7);
                txn.producer_epoch = 1;
                txn.verify_only = true;
                txn.topics = vec![t.clone(), t];
                r.transactions = vec![txn];
            } else {
                r.v3_and_below_transactional_id = TransactionalId(sb("txn"));
                r.v3_and_below_producer_id = ProducerId(7);
                r.v3_and_below_producer_epoch = 1;
                r.v3_and_below_topics = vec![t.clone(), t];
            }
            frame(ApiKey::AddPartitionsToTxn, v, &r)
        }
        25 => {
            let mut r = AddOffsetsToTxnRequest::default();
            r.transactional_id = TransactionalId(sb("txn"));
            r.producer_id = ProducerId(7);
            r.group_id = GroupId(sb("group"));
            frame(ApiKey::AddOffsetsToTxn, v, &r)
        }
        26 => {
            let mut r = EndTxnRequest::default();
            r.transactional_id = TransactionalId(sb("txn"));
            r.producer_id = ProducerId(7);
            r.committed = true;
            frame(ApiKey::EndTxn, v, &r)
        }
        28 => {
            let mut p = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
            p.partition_index = 3;
            p.committed_offset = 99;
            p.committed_metadata = Some(sb("m"));
            let mut t = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
            t.name = topic();
            t.partitions = vec![p.clone(), p];
            let mut r = TxnOffsetCommitRequest::default();
            r.transactional_id = TransactionalId(sb("txn"));
            r.group_id = GroupId(sb("group"));
            r.producer_id = ProducerId(7);
            if v >= 3 {
                r.member_id = sb("member");
            }
            r.topics = vec![t];
            frame(ApiKey::TxnOffsetCommit, v, &r)
        }
        27 if v >= 2 => {
            // kafka-protocol encodes only v1: v2 adds TransactionVersion (i8) to each marker.
            let mut f = frame(ApiKey::WriteTxnMarkers, 1, &WriteTxnMarkersRequest::default());
            f[2..4].copy_from_slice(&v.to_be_bytes());
            f.truncate(f.len() - 2); // the empty markers array and the tagged fields
            f.push(2); // one marker
            f.extend_from_slice(&7i64.to_be_bytes());
            f.extend_from_slice(&0i16.to_be_bytes());
            f.push(0); // abort
            f.push(2); // one topic
            f.push(4);
            f.extend_from_slice(b"abc");
            f.push(3); // two partitions
            f.extend_from_slice(&0i32.to_be_bytes());
            f.extend_from_slice(&1i32.to_be_bytes());
            f.push(0);
            f.extend_from_slice(&0i32.to_be_bytes()); // coordinator epoch
            f.push(2); // transaction version
            f.push(0);
            f.push(0);
            f
        }
        27 => {
            let mut t = write_txn_markers_request::WritableTxnMarkerTopic::default();
            t.name = topic();
            t.partition_indexes = vec![0, 1];
            let mut m = write_txn_markers_request::WritableTxnMarker::default();
            m.producer_id = ProducerId(7);
            m.transaction_result = false;
            m.topics = vec![t];
            let mut r = WriteTxnMarkersRequest::default();
            r.markers = vec![m.clone(), m];
            frame(ApiKey::WriteTxnMarkers, v, &r)
        }
        65 => {
            let mut r = DescribeTransactionsRequest::default();
            r.transactional_ids = vec![TransactionalId(sb("a")), TransactionalId(sb("b"))];
            frame(ApiKey::DescribeTransactions, v, &r)
        }
        66 => {
            let mut r = ListTransactionsRequest::default();
            r.state_filters = vec![sb("Ongoing")];
            r.producer_id_filters = vec![ProducerId(7)];
            if v >= 2 {
                r.transactional_id_pattern = Some(sb("tx-.*"));
            }
            frame(ApiKey::ListTransactions, v, &r)
        }
        17 => {
            let mut r = SaslHandshakeRequest::default();
            r.mechanism = sb("SCRAM-SHA-512");
            frame(ApiKey::SaslHandshake, v, &r)
        }
        36 => {
            let mut r = SaslAuthenticateRequest::default();
            r.auth_bytes = bytes::Bytes::from_static(b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL");
            frame(ApiKey::SaslAuthenticate, v, &r)
        }
        50 => {
            let mut r = DescribeUserScramCredentialsRequest::default();
            let mut u = describe_user_scram_credentials_request::UserName::default();
            u.name = sb("alice");
            r.users = Some(vec![u.clone(), u]);
            frame(ApiKey::DescribeUserScramCredentials, v, &r)
        }
        51 => {
            let mut r = AlterUserScramCredentialsRequest::default();
            let mut d = alter_user_scram_credentials_request::ScramCredentialDeletion::default();
            d.name = sb("bob");
            d.mechanism = 1;
            let mut u = alter_user_scram_credentials_request::ScramCredentialUpsertion::default();
            u.name = sb("alice");
            u.mechanism = 2;
            u.iterations = 4096;
            u.salt = bytes::Bytes::from_static(b"salt");
            u.salted_password = bytes::Bytes::from(vec![7u8; 64]);
            r.deletions = vec![d];
            r.upsertions = vec![u];
            frame(ApiKey::AlterUserScramCredentials, v, &r)
        }
        29 => frame(ApiKey::DescribeAcls, v, &acl_requests().0),
        30 => frame(ApiKey::CreateAcls, v, &acl_requests().1),
        31 => frame(ApiKey::DeleteAcls, v, &acl_requests().2),
        other => panic!("API {other} has no fuzz seed"),
    }
}

/// Values that decoders read as lengths and counts, written over a span of the frame.
const HOSTILE: &[&[u8]] = &[
    &[0x7f, 0xff, 0xff, 0xff],
    &[0x40, 0x00, 0x00, 0x00],
    &[0xff, 0xff, 0xff, 0xff],
    &[0x80, 0x00, 0x00, 0x00],
    &[0x7f, 0xff],
    &[0xff, 0xff, 0xff, 0xff, 0x0f],
    &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
    &[0x00],
];

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut f = seed.to_vec();
    // The first 4 bytes are the API key and version: keep them, so that mutations reach the
    // body's decoder rather than all being unknown keys.
    for _ in 0..1 + rng.below(3) {
        let at = 4 + rng.below(f.len().saturating_sub(4));
        match rng.below(4) {
            0 => {
                if at < f.len() {
                    f[at] ^= 1 << rng.below(8);
                }
            }
            1 => f.truncate(at),
            2 => {
                let h = HOSTILE[rng.below(HOSTILE.len())];
                for (i, b) in h.iter().enumerate() {
                    if at + i < f.len() {
                        f[at + i] = *b;
                    }
                }
            }
            _ => {
                let h = HOSTILE[rng.below(HOSTILE.len())];
                let at = at.min(f.len());
                f.splice(at..at, h.iter().copied());
            }
        }
    }
    f
}

#[test]
fn mutated_requests_never_panic_nor_allocate_from_untrusted_lengths() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut decoded, mut rejected) = (0u64, 0u64);
    for spec in API_TABLE {
        for v in spec.min_version..=spec.max_version {
            let seed = seed(spec.key as i16, v);
            // Seeds for coverage-guided fuzzing (fuzz/corpus/request_decoders).
            if let Some(dir) = std::env::var_os("LAMINAR_FUZZ_SEEDS_OUT") {
                let path = std::path::Path::new(&dir).join(format!("seed-{}-v{v}", spec.key as i16));
                std::fs::write(path, &seed).unwrap();
            }
            let (_, request) = decode(Bytes::from(seed.clone()))
                .unwrap_or_else(|e| panic!("the seed of {:?} v{v} must decode: {e}", spec.key));
            drop(request);
            for _ in 0..MUTATIONS_PER_SEED {
                let f = mutate(&mut rng, &seed);
                let len = f.len();
                let mut buf = BytesMut::with_capacity(len);
                buf.put_slice(&f);
                let (ok, largest, _) = watched_decode(buf.freeze());
                // Each element a decoder reserves room for takes at least one byte of the
                // frame, and no decoded element is larger than a few hundred bytes.
                assert!(
                    largest <= 512 * len + 4096,
                    "{:?} v{v}: a {len}-byte frame made a {largest}-byte allocation: {f:02x?}",
                    spec.key
                );
                if ok {
                    decoded += 1;
                } else {
                    rejected += 1;
                }
            }
        }
    }
    eprintln!("{decoded} mutated frames decoded, {rejected} rejected");
    assert!(rejected > 0 && decoded > 0, "the mutations reach both outcomes");
}

/// Issue 29, item 4's oracle: no frame decodes into more than
/// `DECODED_BYTES_PER_FRAME_BYTE` times its size plus `DECODED_SLACK_BYTES`. Frames large
/// enough to pass that bound if nothing were charged: every seed mutated as above, with 4 MiB
/// of zeros spliced in after its header (empty strings, zero counts and null fields by the
/// million, wherever they land). A 64 MiB Metadata request of 32M empty names decoded into 72
/// times its size before the charge.
#[test]
fn hostile_frames_decode_into_a_bounded_multiple_of_their_size() {
    use laminar_protocol::reader::{DECODED_BYTES_PER_FRAME_BYTE, DECODED_SLACK_BYTES};
    const ZEROS: usize = 4 << 20;
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut worst = 0f64;
    for spec in API_TABLE {
        for v in spec.min_version..=spec.max_version {
            let seed = seed(spec.key as i16, v);
            for _ in 0..HOSTILE_FRAMES_PER_SEED {
                let mut f = mutate(&mut rng, &seed);
                let at = 4 + rng.below(f.len().saturating_sub(4));
                f.splice(at..at, std::iter::repeat_n(0u8, ZEROS));
                let len = f.len();
                let (_, _, total) = watched_decode(Bytes::from(f));
                // The frame's own header fields (the client id) are allocated too.
                let bound = DECODED_BYTES_PER_FRAME_BYTE * len + DECODED_SLACK_BYTES + 4096;
                assert!(
                    total <= bound,
                    "{:?} v{v}: a {len}-byte frame decoded into {total} bytes (bound {bound})",
                    spec.key
                );
                worst = worst.max(total as f64 / len as f64);
            }
        }
    }
    eprintln!("the most a hostile frame decoded into: {worst:.2} times its size");
}

/// Hostile large frames per seed: each costs a 4 MiB copy and decode.
const HOSTILE_FRAMES_PER_SEED: usize = 3;

/// The transactional requests decode to what the client encoded, at every version.
#[test]
fn transactional_requests_decode_to_their_fields() {
    use laminar_protocol::requests::Request;
    for spec in API_TABLE
        .iter()
        .filter(|s| [24, 25, 26, 28].contains(&(s.key as i16)))
    {
        for v in spec.min_version..=spec.max_version {
            let (_, request) = decode(Bytes::from(seed(spec.key as i16, v))).unwrap();
            match request {
                Request::AddPartitionsToTxn(r) => {
                    assert_eq!(r.transactions.len(), 1);
                    let r = &r.transactions[0];
                    assert_eq!(
                        (r.producer.transactional_id.as_str(), r.producer.producer_id),
                        ("txn", 7)
                    );
                    assert_eq!(r.producer.producer_epoch, 1);
                    assert_eq!(r.verify_only, v >= 4, "v{v}");
                    assert_eq!(r.topics.len(), 2);
                    assert_eq!(r.topics[1], ("fuzz-topic".to_string(), vec![0, 1, 2]));
                }
                Request::AddOffsetsToTxn(r) => assert_eq!(r.group_id, "group"),
                Request::EndTxn(r) => assert!(r.committed && r.producer.producer_id == 7),
                Request::TxnOffsetCommit(r) => {
                    assert_eq!(
                        (r.group_id.as_str(), r.producer.transactional_id.as_str()),
                        ("group", "txn")
                    );
                    assert_eq!(r.member_id, if v >= 3 { "member" } else { "" });
                    let p = &r.topics[0].1[1];
                    assert_eq!((p.partition, p.offset, p.metadata.as_deref()), (3, 99, Some("m")));
                }
                other => panic!("v{v}: decoded as {other:?}"),
            }
        }
    }
}

/// AlterPartitionReassignments decodes a move and a cancellation (a null replica list).
#[test]
fn a_reassignment_request_decodes_its_moves_and_cancellations() {
    use laminar_protocol::requests::Request;
    let (_, request) = decode(Bytes::from(seed(45, 0))).unwrap();
    let Request::AlterPartitionReassignments(r) = request else {
        panic!("decoded as {request:?}");
    };
    assert_eq!(
        r.topics,
        vec![("t".to_string(), vec![(0, Some(vec![2, 3])), (1, None)])]
    );
}

fn acl_requests() -> (DescribeAclsRequest, CreateAclsRequest, DeleteAclsRequest) {
    let mut d = DescribeAclsRequest::default();
    d.resource_type_filter = 2;
    d.resource_name_filter = Some(sb("t"));
    d.pattern_type_filter = 3;
    d.principal_filter = Some(sb("User:alice"));
    d.host_filter = None;
    d.operation = 1;
    d.permission_type = 1;
    let mut c = create_acls_request::AclCreation::default();
    c.resource_type = 2;
    c.resource_name = sb("t");
    c.resource_pattern_type = 3;
    c.principal = sb("User:alice");
    c.host = sb("*");
    c.operation = 4;
    c.permission_type = 3;
    let mut cr = CreateAclsRequest::default();
    cr.creations = vec![c];
    let mut f = delete_acls_request::DeleteAclsFilter::default();
    f.resource_type_filter = 1;
    f.pattern_type_filter = 1;
    f.operation = 1;
    f.permission_type = 1;
    let mut dr = DeleteAclsRequest::default();
    dr.filters = vec![f];
    (d, cr, dr)
}
