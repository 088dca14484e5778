//! Every API at every version Laminar advertises: a request encoded by the independent
//! `kafka-protocol` crate is decoded by Laminar, and Laminar's response (the hand-framed
//! Fetch response included) decodes with `kafka-protocol` with no byte left over.

mod common;

use common::raw::{call, call_as};

use std::net::TcpStream;

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use laminar_protocol::API_TABLE;
use laminar_records::{BatchBuilder, Compression, RecordSpec};

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn batch() -> Bytes {
    let mut b = BatchBuilder::new(Compression::None, 1_700_000_000_000);
    for i in 0..3 {
        b.push(RecordSpec {
            timestamp_ms: 1_700_000_000_000 + i,
            key: None,
            value: Some(b"v".to_vec()),
            headers: vec![],
        });
    }
    Bytes::from(b.build().unwrap())
}

#[test]
fn every_advertised_version_round_trips() {
    let b = common::TestBroker::start_with(|c| c.group_initial_rebalance_delay_ms = 0);
    let mut s = TcpStream::connect(&b.addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut cid = 0;
    let mut next = || {
        cid += 1;
        cid
    };

    // Create the topic the other requests use, and learn its id.
    let mut md = MetadataRequest::default();
    let mut t = metadata_request::MetadataRequestTopic::default();
    t.name = Some(TopicName(sb("conf")));
    md.topics = Some(vec![t]);
    md.allow_auto_topic_creation = true;
    let resp: MetadataResponse = call(&mut s, ApiKey::Metadata, 12, next(), &md);
    let topic_id = resp.topics[0].topic_id;
    assert!(!topic_id.is_nil());

    for spec in API_TABLE {
        for v in spec.min_version..=spec.max_version {
            match spec.key as i16 {
                18 => {
                    let mut r = ApiVersionsRequest::default();
                    if v >= 3 {
                        r.client_software_name = sb("conformance");
                        r.client_software_version = sb("1");
                    }
                    let resp: ApiVersionsResponse = call(&mut s, ApiKey::ApiVersions, v, next(), &r);
                    assert_eq!(resp.error_code, 0);
                    assert_eq!(resp.api_keys.len(), API_TABLE.len());
                }
                3 => {
                    let mut r = MetadataRequest::default();
                    let mut t = metadata_request::MetadataRequestTopic::default();
                    t.name = Some(TopicName(sb("conf")));
                    r.topics = Some(vec![t]);
                    let resp: MetadataResponse = call(&mut s, ApiKey::Metadata, v, next(), &r);
                    assert_eq!(resp.topics[0].error_code, 0, "Metadata v{v}");
                    assert_eq!(resp.brokers.len(), 1);
                }
                0 => {
                    let mut p = produce_request::PartitionProduceData::default();
                    p.index = 0;
                    p.records = Some(batch());
                    let mut t = produce_request::TopicProduceData::default();
                    if v >= 13 {
                        t.topic_id = topic_id;
                    } else {
                        t.name = TopicName(sb("conf"));
                    }
                    t.partition_data = vec![p];
                    let mut r = ProduceRequest::default();
                    r.acks = 1;
                    r.timeout_ms = 5000;
                    r.topic_data = vec![t];
                    let resp: ProduceResponse = call(&mut s, ApiKey::Produce, v, next(), &r);
                    assert_eq!(
                        resp.responses[0].partition_responses[0].error_code, 0,
                        "Produce v{v}"
                    );
                    if v >= 13 {
                        assert_eq!(resp.responses[0].topic_id, topic_id, "answered by id");
                        // An id no topic has: UNKNOWN_TOPIC_ID, nothing appended.
                        r.topic_data[0].topic_id = uuid::Uuid::from_u128(7);
                        let resp: ProduceResponse = call(&mut s, ApiKey::Produce, v, next(), &r);
                        let t = &resp.responses[0];
                        assert_eq!(
                            (t.topic_id, t.partition_responses[0].error_code),
                            (r.topic_data[0].topic_id, 100)
                        );
                    }
                }
                1 => {
                    let mut p = fetch_request::FetchPartition::default();
                    p.partition = 0;
                    p.fetch_offset = 0;
                    p.partition_max_bytes = 1 << 20;
                    let mut t = fetch_request::FetchTopic::default();
                    if v >= 13 {
                        t.topic_id = topic_id;
                    } else {
                        t.topic = TopicName(sb("conf"));
                    }
                    t.partitions = vec![p];
                    let mut r = FetchRequest::default();
                    r.max_wait_ms = 100;
                    r.min_bytes = 1;
                    r.max_bytes = 1 << 20;
                    r.topics = vec![t];
                    if v <= 14 {
                        r.replica_id = BrokerId(-1);
                    }
                    let resp: FetchResponse = call(&mut s, ApiKey::Fetch, v, next(), &r);
                    let part = &resp.responses[0].partitions[0];
                    assert_eq!(part.error_code, 0, "Fetch v{v}");
                    assert!(
                        part.records.as_ref().is_some_and(|r| !r.is_empty()),
                        "Fetch v{v} returned records"
                    );
                }
                2 => {
                    let mut list = |timestamp: i64| -> list_offsets_response::ListOffsetsPartitionResponse {
                        let mut p = list_offsets_request::ListOffsetsPartition::default();
                        p.partition_index = 0;
                        p.timestamp = timestamp;
                        let mut t = list_offsets_request::ListOffsetsTopic::default();
                        t.name = TopicName(sb("conf"));
                        t.partitions = vec![p];
                        let mut r = ListOffsetsRequest::default();
                        r.replica_id = BrokerId(-1);
                        r.topics = vec![t];
                        let mut resp: ListOffsetsResponse =
                            call_as(&mut s, ApiKey::ListOffsets, v, v.min(10), next(), &r);
                        resp.topics.remove(0).partitions.remove(0)
                    };
                    let latest = list(-1);
                    assert_eq!(latest.error_code, 0);
                    assert!(latest.offset > 0, "ListOffsets v{v}");
                    if v >= 7 {
                        // Max timestamp: the produce loop above wrote 3 records per version,
                        // at timestamps base+0..2, so the first with base+2 is offset 2.
                        let max = list(-3);
                        assert_eq!(
                            (max.offset, max.timestamp),
                            (2, 1_700_000_000_002),
                            "max timestamp"
                        );
                    }
                    if v >= 8 {
                        // Earliest local (-4): nothing is tiered, so the log start.
                        let local = list(-4);
                        assert_eq!((local.error_code, local.offset), (0, list(-2).offset));
                    }
                    if v >= 9 {
                        // Latest tiered (-5): none, as Kafka answers without tiered storage.
                        let tiered = list(-5);
                        assert_eq!(
                            (tiered.error_code, tiered.offset, tiered.leader_epoch),
                            (0, -1, -1)
                        );
                    }
                    if v >= 11 {
                        // Earliest pending upload (-6): none either.
                        let pending = list(-6);
                        assert_eq!(
                            (pending.error_code, pending.offset, pending.leader_epoch),
                            (0, -1, -1)
                        );
                    }
                }
                19 => {
                    let mut t = create_topics_request::CreatableTopic::default();
                    t.name = TopicName(sb(&format!("created-v{v}")));
                    t.num_partitions = 2;
                    t.replication_factor = 1;
                    let mut r = CreateTopicsRequest::default();
                    r.topics = vec![t];
                    r.timeout_ms = 5000;
                    let resp: CreateTopicsResponse = call(&mut s, ApiKey::CreateTopics, v, next(), &r);
                    assert_eq!(resp.topics[0].error_code, 0, "CreateTopics v{v}");
                }
                20 => {
                    let name = format!("created-v{}", v + 1);
                    let mut r = DeleteTopicsRequest::default();
                    if v >= 6 {
                        let mut t = delete_topics_request::DeleteTopicState::default();
                        t.name = Some(TopicName(sb(&name)));
                        r.topics = vec![t];
                    } else {
                        r.topic_names = vec![TopicName(sb(&name))];
                    }
                    r.timeout_ms = 5000;
                    let resp: DeleteTopicsResponse = call(&mut s, ApiKey::DeleteTopics, v, next(), &r);
                    assert_eq!(resp.responses[0].error_code, 0, "DeleteTopics v{v}");
                }
                22 => {
                    let mut r = InitProducerIdRequest::default();
                    r.transactional_id = None;
                    r.transaction_timeout_ms = 60_000;
                    let resp: InitProducerIdResponse = call(&mut s, ApiKey::InitProducerId, v, next(), &r);
                    assert_eq!(resp.error_code, 0, "InitProducerId v{v}");
                    assert!(resp.producer_id.0 >= 0, "InitProducerId v{v}");
                }
                32 => {
                    let mut res = describe_configs_request::DescribeConfigsResource::default();
                    res.resource_type = 2;
                    res.resource_name = sb("conf");
                    res.configuration_keys = None;
                    let mut r = DescribeConfigsRequest::default();
                    r.resources = vec![res];
                    let resp: DescribeConfigsResponse = call(&mut s, ApiKey::DescribeConfigs, v, next(), &r);
                    assert_eq!(resp.results[0].error_code, 0);
                    assert!(!resp.results[0].configs.is_empty(), "DescribeConfigs v{v}");
                }
                37 => {
                    let mut t = create_partitions_request::CreatePartitionsTopic::default();
                    t.name = TopicName(sb("conf"));
                    t.count = 2 + v as i32;
                    t.assignments = None;
                    let mut r = CreatePartitionsRequest::default();
                    r.topics = vec![t];
                    r.timeout_ms = 5000;
                    let resp: CreatePartitionsResponse =
                        call(&mut s, ApiKey::CreatePartitions, v, next(), &r);
                    assert_eq!(resp.results[0].error_code, 0, "CreatePartitions v{v}");
                }
                10 => {
                    let mut r = FindCoordinatorRequest::default();
                    if v >= 4 {
                        r.coordinator_keys = vec![sb("g")];
                    } else {
                        r.key = sb("g");
                    }
                    let resp: FindCoordinatorResponse = call(&mut s, ApiKey::FindCoordinator, v, next(), &r);
                    let (err, port) = if v >= 4 {
                        (resp.coordinators[0].error_code, resp.coordinators[0].port)
                    } else {
                        (resp.error_code, resp.port)
                    };
                    assert_eq!(err, 0, "FindCoordinator v{v}");
                    assert!(port > 0);
                }
                11..=14 => {
                    // One group per API and version: join (twice from v4), sync, heartbeat, leave.
                    let group = format!("cg-{}-v{v}", spec.key as i16);
                    let jv = if spec.key as i16 == 11 { v } else { 5 };
                    let join = |s: &mut TcpStream, cid: i32, member: &str| -> JoinGroupResponse {
                        let mut r = JoinGroupRequest::default();
                        r.group_id = GroupId(sb(&group));
                        r.session_timeout_ms = 10_000;
                        r.rebalance_timeout_ms = 10_000;
                        r.member_id = sb(member);
                        r.protocol_type = sb("consumer");
                        let mut p = join_group_request::JoinGroupRequestProtocol::default();
                        p.name = sb("range");
                        p.metadata = Bytes::from_static(b"meta");
                        r.protocols = vec![p];
                        call(s, ApiKey::JoinGroup, jv, cid, &r)
                    };
                    let mut joined = join(&mut s, next(), "");
                    if jv >= 4 {
                        assert_eq!(joined.error_code, 79, "MEMBER_ID_REQUIRED at JoinGroup v{jv}");
                        let id = joined.member_id.as_str().to_string();
                        joined = join(&mut s, next(), &id);
                    }
                    assert_eq!(joined.error_code, 0, "JoinGroup v{jv}");
                    assert_eq!(joined.leader, joined.member_id);
                    assert_eq!(joined.members.len(), 1);
                    let member = joined.member_id.clone();
                    let generation = joined.generation_id;
                    let sv = if spec.key as i16 == 14 { v } else { 3 };
                    let mut r = SyncGroupRequest::default();
                    r.group_id = GroupId(sb(&group));
                    r.generation_id = generation;
                    r.member_id = member.clone();
                    if sv >= 5 {
                        r.protocol_type = Some(sb("consumer"));
                        r.protocol_name = Some(sb("range"));
                    }
                    let mut a = sync_group_request::SyncGroupRequestAssignment::default();
                    a.member_id = member.clone();
                    a.assignment = Bytes::from_static(b"assigned");
                    r.assignments = vec![a];
                    let synced: SyncGroupResponse = call(&mut s, ApiKey::SyncGroup, sv, next(), &r);
                    assert_eq!(synced.error_code, 0, "SyncGroup v{sv}");
                    assert_eq!(&synced.assignment[..], b"assigned");
                    let hv = if spec.key as i16 == 12 { v } else { 3 };
                    let mut r = HeartbeatRequest::default();
                    r.group_id = GroupId(sb(&group));
                    r.generation_id = generation;
                    r.member_id = member.clone();
                    let hb: HeartbeatResponse = call(&mut s, ApiKey::Heartbeat, hv, next(), &r);
                    assert_eq!(hb.error_code, 0, "Heartbeat v{hv}");
                    let lv = if spec.key as i16 == 13 { v } else { 3 };
                    let mut r = LeaveGroupRequest::default();
                    r.group_id = GroupId(sb(&group));
                    if lv >= 3 {
                        let mut m = leave_group_request::MemberIdentity::default();
                        m.member_id = member.clone();
                        r.members = vec![m];
                    } else {
                        r.member_id = member.clone();
                    }
                    let left: LeaveGroupResponse = call(&mut s, ApiKey::LeaveGroup, lv, next(), &r);
                    assert_eq!(left.error_code, 0, "LeaveGroup v{lv}");
                    if lv >= 3 {
                        assert_eq!(left.members[0].error_code, 0);
                    }
                }
                8 => {
                    let mut pr = offset_commit_request::OffsetCommitRequestPartition::default();
                    pr.partition_index = 0;
                    pr.committed_offset = 2;
                    pr.committed_metadata = Some(sb("m"));
                    let mut t = offset_commit_request::OffsetCommitRequestTopic::default();
                    t.name = TopicName(sb("conf"));
                    t.partitions = vec![pr];
                    let mut r = OffsetCommitRequest::default();
                    r.group_id = GroupId(sb(&format!("oc-v{v}")));
                    r.generation_id_or_member_epoch = -1;
                    r.topics = vec![t];
                    let resp: OffsetCommitResponse = call(&mut s, ApiKey::OffsetCommit, v, next(), &r);
                    assert_eq!(resp.topics[0].partitions[0].error_code, 0, "OffsetCommit v{v}");
                }
                9 => {
                    let group = "oc-v9";
                    let mut r = OffsetFetchRequest::default();
                    if v >= 8 {
                        let mut t = offset_fetch_request::OffsetFetchRequestTopics::default();
                        t.name = TopicName(sb("conf"));
                        t.partition_indexes = vec![0];
                        let mut g = offset_fetch_request::OffsetFetchRequestGroup::default();
                        g.group_id = GroupId(sb(group));
                        g.topics = Some(vec![t]);
                        r.groups = vec![g];
                    } else {
                        let mut t = offset_fetch_request::OffsetFetchRequestTopic::default();
                        t.name = TopicName(sb("conf"));
                        t.partition_indexes = vec![0];
                        r.group_id = GroupId(sb(group));
                        r.topics = Some(vec![t]);
                    }
                    let resp: OffsetFetchResponse = call(&mut s, ApiKey::OffsetFetch, v, next(), &r);
                    let offset = if v >= 8 {
                        resp.groups[0].topics[0].partitions[0].committed_offset
                    } else {
                        resp.topics[0].partitions[0].committed_offset
                    };
                    assert_eq!(offset, 2, "OffsetFetch v{v}");
                }
                16 => {
                    let r = ListGroupsRequest::default();
                    let resp: ListGroupsResponse = call(&mut s, ApiKey::ListGroups, v, next(), &r);
                    assert_eq!(resp.error_code, 0);
                    assert!(
                        resp.groups.iter().any(|g| g.group_id.0.as_str() == "oc-v9"),
                        "ListGroups v{v}"
                    );
                }
                15 => {
                    let mut r = DescribeGroupsRequest::default();
                    r.groups = vec![GroupId(sb("oc-v9"))];
                    let resp: DescribeGroupsResponse = call(&mut s, ApiKey::DescribeGroups, v, next(), &r);
                    assert_eq!(resp.groups[0].error_code, 0);
                    assert_eq!(
                        resp.groups[0].group_state.as_str(),
                        "Empty",
                        "DescribeGroups v{v}"
                    );
                    // A group that does not exist: Dead, and from v6 GROUP_ID_NOT_FOUND.
                    r.groups = vec![GroupId(sb("never-was"))];
                    let resp: DescribeGroupsResponse = call(&mut s, ApiKey::DescribeGroups, v, next(), &r);
                    let expected = if v >= 6 { 69 } else { 0 };
                    assert_eq!(
                        (resp.groups[0].error_code, resp.groups[0].group_state.as_str()),
                        (expected, "Dead"),
                        "DescribeGroups v{v}"
                    );
                }
                42 => {
                    let mut r = DeleteGroupsRequest::default();
                    r.groups_names = vec![GroupId(sb(&format!("oc-v{}", 2 + v)))];
                    let resp: DeleteGroupsResponse = call(&mut s, ApiKey::DeleteGroups, v, next(), &r);
                    assert_eq!(resp.results[0].error_code, 0, "DeleteGroups v{v}");
                }
                47 => {
                    let mut pr = offset_delete_request::OffsetDeleteRequestPartition::default();
                    pr.partition_index = 0;
                    let mut t = offset_delete_request::OffsetDeleteRequestTopic::default();
                    t.name = TopicName(sb("conf"));
                    t.partitions = vec![pr];
                    let mut r = OffsetDeleteRequest::default();
                    r.group_id = GroupId(sb("oc-v8"));
                    r.topics = vec![t];
                    let resp: OffsetDeleteResponse = call(&mut s, ApiKey::OffsetDelete, v, next(), &r);
                    assert_eq!(resp.error_code, 0);
                    assert_eq!(resp.topics[0].partitions[0].error_code, 0, "OffsetDelete v{v}");
                }
                49 => {
                    let mut entity = alter_client_quotas_request::EntityData::default();
                    entity.entity_type = sb("client-id");
                    entity.entity_name = Some(sb(&format!("conf-v{v}")));
                    let mut op = alter_client_quotas_request::OpData::default();
                    op.key = sb("consumer_byte_rate");
                    op.value = 1024.0 * (v + 1) as f64;
                    let mut e = alter_client_quotas_request::EntryData::default();
                    e.entity = vec![entity];
                    e.ops = vec![op];
                    let mut r = AlterClientQuotasRequest::default();
                    r.entries = vec![e];
                    let resp: AlterClientQuotasResponse =
                        call(&mut s, ApiKey::AlterClientQuotas, v, next(), &r);
                    assert_eq!(resp.entries[0].error_code, 0, "AlterClientQuotas v{v}");
                    assert_eq!(
                        resp.entries[0].entity[0].entity_name.as_deref(),
                        Some(format!("conf-v{v}").as_str())
                    );
                }
                48 => {
                    // A quota of its own to describe.
                    let mut entity = alter_client_quotas_request::EntityData::default();
                    entity.entity_type = sb("client-id");
                    entity.entity_name = Some(sb("described"));
                    let mut op = alter_client_quotas_request::OpData::default();
                    op.key = sb("producer_byte_rate");
                    op.value = 4096.0;
                    let mut e = alter_client_quotas_request::EntryData::default();
                    e.entity = vec![entity];
                    e.ops = vec![op];
                    let mut a = AlterClientQuotasRequest::default();
                    a.entries = vec![e];
                    let _: AlterClientQuotasResponse = call(&mut s, ApiKey::AlterClientQuotas, 1, next(), &a);
                    let mut c = describe_client_quotas_request::ComponentData::default();
                    c.entity_type = sb("client-id");
                    c.match_type = 0;
                    c._match = Some(sb("described"));
                    let mut r = DescribeClientQuotasRequest::default();
                    r.components = vec![c];
                    let resp: DescribeClientQuotasResponse =
                        call(&mut s, ApiKey::DescribeClientQuotas, v, next(), &r);
                    assert_eq!(resp.error_code, 0);
                    let entries = resp.entries.expect("entries");
                    assert_eq!(entries.len(), 1, "DescribeClientQuotas v{v}");
                    assert_eq!(entries[0].values[0].key.as_str(), "producer_byte_rate");
                    assert_eq!(entries[0].values[0].value, 4096.0);
                }
                35 => {
                    let mut t = describe_log_dirs_request::DescribableLogDirTopic::default();
                    t.topic = TopicName(sb("conf"));
                    t.partitions = vec![0, 999];
                    let mut r = DescribeLogDirsRequest::default();
                    r.topics = Some(vec![t]);
                    let resp: DescribeLogDirsResponse = call(&mut s, ApiKey::DescribeLogDirs, v, next(), &r);
                    assert_eq!(resp.results.len(), 1, "DescribeLogDirs v{v}: one data directory");
                    let dir = &resp.results[0];
                    assert_eq!(dir.error_code, 0);
                    assert!(
                        dir.log_dir.starts_with('/'),
                        "an absolute path: {}",
                        dir.log_dir.as_str()
                    );
                    assert_eq!(dir.topics.len(), 1);
                    let parts: Vec<i32> = dir.topics[0]
                        .partitions
                        .iter()
                        .map(|p| p.partition_index)
                        .collect();
                    assert_eq!(parts, [0], "a partition that does not exist is left out");
                    if v >= 4 {
                        assert!(
                            dir.total_bytes > 0
                                && dir.usable_bytes > 0
                                && dir.usable_bytes <= dir.total_bytes
                        );
                    }
                    // A null list asks for every topic.
                    let mut r = DescribeLogDirsRequest::default();
                    r.topics = None;
                    let all: DescribeLogDirsResponse = call(&mut s, ApiKey::DescribeLogDirs, v, next(), &r);
                    assert!(all.results[0].topics.iter().any(|t| t.name.0.as_str() == "conf"));
                }
                60 => {
                    let mut r = DescribeClusterRequest::default();
                    r.endpoint_type = 1;
                    let resp: DescribeClusterResponse = call(&mut s, ApiKey::DescribeCluster, v, next(), &r);
                    assert_eq!(resp.error_code, 0, "DescribeCluster v{v}");
                    assert!(!resp.cluster_id.is_empty());
                    assert_eq!(resp.brokers.len(), 1);
                    assert_eq!(resp.brokers[0].broker_id, resp.controller_id);
                    if v >= 1 {
                        r.endpoint_type = 2;
                        let resp: DescribeClusterResponse =
                            call(&mut s, ApiKey::DescribeCluster, v, next(), &r);
                        assert_eq!(resp.error_code, 115, "UNSUPPORTED_ENDPOINT_TYPE for controllers");
                    }
                }
                23 => {
                    let part = |partition, current_leader_epoch, leader_epoch| {
                        let mut p = offset_for_leader_epoch_request::OffsetForLeaderPartition::default();
                        p.partition = partition;
                        p.current_leader_epoch = current_leader_epoch;
                        p.leader_epoch = leader_epoch;
                        p
                    };
                    let mut t = offset_for_leader_epoch_request::OffsetForLeaderTopic::default();
                    t.topic = TopicName(sb("conf"));
                    t.partitions = vec![part(0, 0, 0), part(0, -1, 3), part(0, 1, 0), part(99, -1, 0)];
                    let mut r = OffsetForLeaderEpochRequest::default();
                    r.replica_id = BrokerId(-1);
                    r.topics = vec![t];
                    let resp: OffsetForLeaderEpochResponse =
                        call(&mut s, ApiKey::OffsetForLeaderEpoch, v, next(), &r);
                    let got: Vec<(i16, i32, i64)> = resp.topics[0]
                        .partitions
                        .iter()
                        .map(|p| (p.error_code, p.leader_epoch, p.end_offset))
                        .collect();
                    let log_end = got[0].2;
                    assert!(log_end > 0, "conf has records: {got:?}");
                    assert_eq!(
                        got,
                        [(0, 0, log_end), (0, -1, -1), (75, -1, -1), (3, -1, -1)],
                        "OffsetForLeaderEpoch v{v}: epoch 0 ends at the log end; another epoch is \
                         unknown; a newer current epoch is UNKNOWN_LEADER_EPOCH; no such partition"
                    );
                }
                44 => {
                    let mut c = incremental_alter_configs_request::AlterableConfig::default();
                    c.name = sb("retention.ms");
                    c.config_operation = 0;
                    c.value = Some(sb(&format!("{}", 60_000 + v as i64)));
                    let mut res = incremental_alter_configs_request::AlterConfigsResource::default();
                    res.resource_type = 2;
                    res.resource_name = sb("conf");
                    res.configs = vec![c];
                    let mut bad = res.clone();
                    bad.resource_name = sb("no-such-topic");
                    let mut r = IncrementalAlterConfigsRequest::default();
                    r.resources = vec![res, bad];
                    let resp: IncrementalAlterConfigsResponse =
                        call(&mut s, ApiKey::IncrementalAlterConfigs, v, next(), &r);
                    let codes: Vec<i16> = resp.responses.iter().map(|r| r.error_code).collect();
                    assert_eq!(codes, [0, 3], "IncrementalAlterConfigs v{v}");
                    let mut d = describe_configs_request::DescribeConfigsResource::default();
                    d.resource_type = 2;
                    d.resource_name = sb("conf");
                    d.configuration_keys = Some(vec![sb("retention.ms")]);
                    let mut dr = DescribeConfigsRequest::default();
                    dr.resources = vec![d];
                    let described: DescribeConfigsResponse =
                        call(&mut s, ApiKey::DescribeConfigs, 4, next(), &dr);
                    let e = &described.results[0].configs[0];
                    assert_eq!(
                        e.value.as_deref(),
                        Some(format!("{}", 60_000 + v as i64).as_str())
                    );
                    assert_eq!(e.config_source, 1, "a topic override");
                }
                33 => {
                    let mut c = alter_configs_request::AlterableConfig::default();
                    c.name = sb("retention.bytes");
                    c.value = Some(sb("1048576"));
                    let mut res = alter_configs_request::AlterConfigsResource::default();
                    res.resource_type = 2;
                    res.resource_name = sb("conf");
                    res.configs = vec![c];
                    let mut threads = alter_configs_request::AlterableConfig::default();
                    threads.name = sb("num.io.threads");
                    threads.value = Some(sb("8"));
                    let mut broker = alter_configs_request::AlterConfigsResource::default();
                    broker.resource_type = 4;
                    broker.resource_name = sb("0");
                    broker.configs = vec![threads];
                    let mut r = AlterConfigsRequest::default();
                    r.resources = vec![res, broker];
                    let resp: AlterConfigsResponse = call(&mut s, ApiKey::AlterConfigs, v, next(), &r);
                    let codes: Vec<i16> = resp.responses.iter().map(|r| r.error_code).collect();
                    assert_eq!(
                        codes,
                        [0, 40],
                        "AlterConfigs v{v}: topics yes, broker settings read only at start no"
                    );
                }
                43 => {
                    let mut tp = elect_leaders_request::TopicPartitions::default();
                    tp.topic = TopicName(sb("conf"));
                    tp.partitions = vec![0, 99];
                    let mut r = ElectLeadersRequest::default();
                    r.topic_partitions = Some(vec![tp]);
                    let resp: ElectLeadersResponse = call(&mut s, ApiKey::ElectLeaders, v, next(), &r);
                    let codes: Vec<i16> = resp.replica_election_results[0]
                        .partition_result
                        .iter()
                        .map(|p| p.error_code)
                        .collect();
                    assert_eq!(
                        codes,
                        [84, 3],
                        "ElectLeaders v{v}: ELECTION_NOT_NEEDED, no such partition"
                    );
                    r.topic_partitions = None;
                    let all: ElectLeadersResponse = call(&mut s, ApiKey::ElectLeaders, v, next(), &r);
                    assert!(
                        all.replica_election_results.is_empty(),
                        "every partition: none needed one"
                    );
                }
                45 => {
                    let mut moved = alter_partition_reassignments_request::ReassignablePartition::default();
                    moved.partition_index = 0;
                    moved.replicas = Some(vec![BrokerId(7)]);
                    let mut cancelled =
                        alter_partition_reassignments_request::ReassignablePartition::default();
                    cancelled.partition_index = 0;
                    cancelled.replicas = None;
                    let mut t = alter_partition_reassignments_request::ReassignableTopic::default();
                    t.name = TopicName(sb("conf"));
                    t.partitions = vec![moved, cancelled];
                    let mut r = AlterPartitionReassignmentsRequest::default();
                    r.topics = vec![t];
                    let resp: AlterPartitionReassignmentsResponse =
                        call(&mut s, ApiKey::AlterPartitionReassignments, v, next(), &r);
                    let codes: Vec<i16> = resp.responses[0]
                        .partitions
                        .iter()
                        .map(|p| p.error_code)
                        .collect();
                    assert_eq!(
                        codes,
                        [39, 85],
                        "one node: INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS"
                    );
                    if v >= 1 {
                        // KIP-860: a move to two replicas of a one-replica partition, refused.
                        let mut grown =
                            alter_partition_reassignments_request::ReassignablePartition::default();
                        grown.partition_index = 0;
                        grown.replicas = Some(vec![BrokerId(0), BrokerId(7)]);
                        r.topics[0].partitions = vec![grown];
                        r.allow_replication_factor_change = false;
                        let resp: AlterPartitionReassignmentsResponse =
                            call(&mut s, ApiKey::AlterPartitionReassignments, v, next(), &r);
                        assert!(!resp.allow_replication_factor_change);
                        let p = &resp.responses[0].partitions[0];
                        assert_eq!(
                            (p.error_code, p.error_message.as_ref().map(|m| m.to_string())),
                            (
                                38,
                                Some("The replication factor is changed from 1 to 2".to_string())
                            )
                        );
                    }
                }
                46 => {
                    let mut r = ListPartitionReassignmentsRequest::default();
                    r.topics = None;
                    let resp: ListPartitionReassignmentsResponse =
                        call(&mut s, ApiKey::ListPartitionReassignments, v, next(), &r);
                    assert_eq!(resp.error_code, 0);
                    assert!(resp.topics.is_empty(), "nothing moves on one node");
                }
                61 => {
                    let mut t = describe_producers_request::TopicRequest::default();
                    t.name = TopicName(sb("conf"));
                    t.partition_indexes = vec![0, 99];
                    let mut r = DescribeProducersRequest::default();
                    r.topics = vec![t];
                    let resp: DescribeProducersResponse =
                        call(&mut s, ApiKey::DescribeProducers, v, next(), &r);
                    let parts = &resp.topics[0].partitions;
                    assert_eq!(parts[0].error_code, 0, "DescribeProducers v{v}");
                    assert_eq!(parts[1].error_code, 3, "no such partition");
                }
                21 => {
                    let part = |partition_index: i32, offset: i64| {
                        let mut p = delete_records_request::DeleteRecordsPartition::default();
                        p.partition_index = partition_index;
                        p.offset = offset;
                        p
                    };
                    let mut t = delete_records_request::DeleteRecordsTopic::default();
                    t.name = TopicName(sb("conf"));
                    t.partitions = vec![part(0, 0), part(0, 1 << 40), part(99, 0)];
                    let mut r = DeleteRecordsRequest::default();
                    r.topics = vec![t];
                    r.timeout_ms = 1000;
                    let resp: DeleteRecordsResponse = call(&mut s, ApiKey::DeleteRecords, v, next(), &r);
                    let got: Vec<(i16, i64)> = resp.topics[0]
                        .partitions
                        .iter()
                        .map(|p| (p.error_code, p.low_watermark))
                        .collect();
                    assert_eq!(
                        got,
                        [(0, 0), (1, -1), (3, -1)],
                        "DeleteRecords v{v}: nothing below 0, past the end, no such partition"
                    );
                }
                24 if v >= 4 => {
                    // A partition leader's question, for a producer the coordinator does not
                    // know, and for a partition that does not exist.
                    let mut t = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
                    t.name = TopicName(sb("conf"));
                    t.partitions = vec![0];
                    let mut txn = add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default();
                    txn.transactional_id = TransactionalId(sb("conf-txn"));
                    txn.producer_id = ProducerId(7);
                    txn.verify_only = true;
                    txn.topics = vec![t.clone()];
                    let mut unknown = txn.clone();
                    unknown.transactional_id = TransactionalId(sb("conf-txn-2"));
                    unknown.topics[0].partitions = vec![99];
                    let mut r = AddPartitionsToTxnRequest::default();
                    r.transactions = vec![txn, unknown];
                    let resp: AddPartitionsToTxnResponse =
                        call(&mut s, ApiKey::AddPartitionsToTxn, v, next(), &r);
                    assert_eq!(resp.error_code, 0, "AddPartitionsToTxn v{v}");
                    let codes: Vec<(String, i16)> = resp
                        .results_by_transaction
                        .iter()
                        .map(|t| {
                            (
                                t.transactional_id.0.to_string(),
                                t.topic_results[0].results_by_partition[0].partition_error_code,
                            )
                        })
                        .collect();
                    assert_eq!(
                        codes,
                        [("conf-txn".to_string(), 49), ("conf-txn-2".to_string(), 3)],
                        "AddPartitionsToTxn v{v}: an unknown producer, an unknown partition"
                    );
                }
                24 => {
                    let mut t = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
                    t.name = TopicName(sb("conf"));
                    t.partitions = vec![0, 99];
                    let mut r = AddPartitionsToTxnRequest::default();
                    r.v3_and_below_transactional_id = TransactionalId(sb("conf-txn"));
                    r.v3_and_below_producer_id = ProducerId(7);
                    r.v3_and_below_topics = vec![t];
                    let resp: AddPartitionsToTxnResponse =
                        call(&mut s, ApiKey::AddPartitionsToTxn, v, next(), &r);
                    let codes: Vec<i16> = resp.results_by_topic_v3_and_below[0]
                        .results_by_partition
                        .iter()
                        .map(|p| p.partition_error_code)
                        .collect();
                    assert_eq!(
                        codes,
                        [55, 3],
                        "AddPartitionsToTxn v{v}: not attempted, no such partition"
                    );
                    t_only_known(&mut r);
                    let resp: AddPartitionsToTxnResponse =
                        call(&mut s, ApiKey::AddPartitionsToTxn, v, next(), &r);
                    let code =
                        resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code;
                    assert_eq!(code, 49, "AddPartitionsToTxn v{v}: an unknown transactional id");
                }
                25 => {
                    let mut r = AddOffsetsToTxnRequest::default();
                    r.transactional_id = TransactionalId(sb("conf-txn"));
                    r.producer_id = ProducerId(7);
                    r.group_id = GroupId(sb("conf-group"));
                    let resp: AddOffsetsToTxnResponse = call(&mut s, ApiKey::AddOffsetsToTxn, v, next(), &r);
                    assert_eq!(resp.error_code, 49, "AddOffsetsToTxn v{v}");
                }
                26 => {
                    let mut r = EndTxnRequest::default();
                    r.transactional_id = TransactionalId(sb("conf-txn"));
                    r.producer_id = ProducerId(7);
                    r.committed = true;
                    let resp: EndTxnResponse = call(&mut s, ApiKey::EndTxn, v, next(), &r);
                    assert_eq!(resp.error_code, 49, "EndTxn v{v}");
                    if v >= 5 {
                        assert_eq!((resp.producer_id, resp.producer_epoch), (ProducerId(-1), -1));
                    }
                }
                // kafka-protocol encodes WriteTxnMarkers v1 only; the decoder test of
                // laminar-protocol (fuzz_decoders.rs) decodes a hand-made v2.
                27 if v >= 2 => {}
                27 => {
                    let mut t = write_txn_markers_request::WritableTxnMarkerTopic::default();
                    t.name = TopicName(sb("conf"));
                    t.partition_indexes = vec![99];
                    let mut m = write_txn_markers_request::WritableTxnMarker::default();
                    m.producer_id = ProducerId(7);
                    m.topics = vec![t];
                    let mut commit = m.clone();
                    commit.transaction_result = true;
                    let mut r = WriteTxnMarkersRequest::default();
                    r.markers = vec![m, commit];
                    let resp: WriteTxnMarkersResponse = call(&mut s, ApiKey::WriteTxnMarkers, v, next(), &r);
                    let code = resp.markers[0].topics[0].partitions[0].error_code;
                    assert_eq!(code, 3, "WriteTxnMarkers v{v}: no such partition");
                    let code = resp.markers[1].topics[0].partitions[0].error_code;
                    assert_eq!(code, 31, "WriteTxnMarkers v{v}: a client does not commit");
                    // A marker from a coordinator epoch above the transaction log's leader
                    // epoch is refused (it would fence the real coordinator's markers for
                    // good; a new node's transaction log is led at epoch 0 or later). On a
                    // single node an abort for a producer with no transaction open here
                    // writes nothing (it would only move the producer's epoch), so neither
                    // the second nor the third is written, and nothing is fenced.
                    let mut fenced = Vec::new();
                    for coordinator_epoch in [i32::MAX, 0, -1] {
                        let mut t = write_txn_markers_request::WritableTxnMarkerTopic::default();
                        t.name = TopicName(sb("conf"));
                        t.partition_indexes = vec![0];
                        let mut m = write_txn_markers_request::WritableTxnMarker::default();
                        m.producer_id = ProducerId(1 << 40);
                        m.coordinator_epoch = coordinator_epoch;
                        m.topics = vec![t];
                        let mut r = WriteTxnMarkersRequest::default();
                        r.markers = vec![m];
                        let resp: WriteTxnMarkersResponse =
                            call(&mut s, ApiKey::WriteTxnMarkers, v, next(), &r);
                        fenced.push(resp.markers[0].topics[0].partitions[0].error_code);
                    }
                    assert_eq!(
                        fenced,
                        [42, 0, 0],
                        "WriteTxnMarkers v{v}: a future coordinator is refused, a marker that ends nothing is not written"
                    );
                }
                28 => {
                    let mut p = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
                    p.partition_index = 0;
                    p.committed_offset = 1;
                    let mut t = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
                    t.name = TopicName(sb("conf"));
                    t.partitions = vec![p];
                    let mut r = TxnOffsetCommitRequest::default();
                    r.transactional_id = TransactionalId(sb("conf-txn"));
                    r.group_id = GroupId(sb("conf-group"));
                    r.producer_id = ProducerId(7);
                    r.topics = vec![t];
                    let resp: TxnOffsetCommitResponse = call(&mut s, ApiKey::TxnOffsetCommit, v, next(), &r);
                    assert_eq!(
                        resp.topics[0].partitions[0].error_code, 49,
                        "TxnOffsetCommit v{v}"
                    );
                }
                65 => {
                    let mut r = DescribeTransactionsRequest::default();
                    r.transactional_ids = vec![TransactionalId(sb("conf-txn"))];
                    let resp: DescribeTransactionsResponse =
                        call(&mut s, ApiKey::DescribeTransactions, v, next(), &r);
                    assert_eq!(
                        resp.transaction_states[0].error_code, 105,
                        "DescribeTransactions v{v}"
                    );
                }
                66 => {
                    let mut r = ListTransactionsRequest::default();
                    r.state_filters = vec![sb("Ongoing"), sb("Bogus")];
                    let resp: ListTransactionsResponse =
                        call(&mut s, ApiKey::ListTransactions, v, next(), &r);
                    assert_eq!(resp.error_code, 0, "ListTransactions v{v}");
                    assert_eq!(resp.unknown_state_filters, [sb("Bogus")]);
                    assert!(resp.transaction_states.is_empty());
                }
                // SASL on a listener without it: Kafka's ILLEGAL_SASL_STATE.
                17 => {
                    let mut r = SaslHandshakeRequest::default();
                    r.mechanism = sb("SCRAM-SHA-512");
                    let resp: SaslHandshakeResponse = call(&mut s, ApiKey::SaslHandshake, v, next(), &r);
                    assert_eq!(resp.error_code, 34, "SaslHandshake v{v}");
                }
                36 => {
                    let mut r = SaslAuthenticateRequest::default();
                    r.auth_bytes = Bytes::from_static(b"n,,n=alice,r=abc");
                    let resp: SaslAuthenticateResponse =
                        call(&mut s, ApiKey::SaslAuthenticate, v, next(), &r);
                    assert_eq!(resp.error_code, 34, "SaslAuthenticate v{v}");
                }
                50 => {
                    let mut r = DescribeUserScramCredentialsRequest::default();
                    let mut u = describe_user_scram_credentials_request::UserName::default();
                    u.name = sb("nobody");
                    r.users = Some(vec![u]);
                    let resp: DescribeUserScramCredentialsResponse =
                        call(&mut s, ApiKey::DescribeUserScramCredentials, v, next(), &r);
                    assert_eq!(
                        resp.results[0].error_code, 91,
                        "DescribeUserScramCredentials v{v}"
                    );
                }
                51 => {
                    // Too few iterations: UNACCEPTABLE_CREDENTIAL, nothing stored.
                    let mut r = AlterUserScramCredentialsRequest::default();
                    let mut u = alter_user_scram_credentials_request::ScramCredentialUpsertion::default();
                    u.name = sb("alice");
                    u.mechanism = 2;
                    u.iterations = 1;
                    u.salt = Bytes::from_static(b"salt");
                    u.salted_password = Bytes::from(vec![0u8; 64]);
                    r.upsertions = vec![u];
                    let resp: AlterUserScramCredentialsResponse =
                        call(&mut s, ApiKey::AlterUserScramCredentials, v, next(), &r);
                    assert_eq!(resp.results[0].error_code, 93, "AlterUserScramCredentials v{v}");
                }
                // No authorizer: Kafka's SECURITY_DISABLED.
                29 => {
                    let resp: DescribeAclsResponse =
                        call(&mut s, ApiKey::DescribeAcls, v, next(), &acl_requests().0);
                    assert_eq!(resp.error_code, 54, "DescribeAcls v{v}");
                }
                30 => {
                    let resp: CreateAclsResponse =
                        call(&mut s, ApiKey::CreateAcls, v, next(), &acl_requests().1);
                    assert_eq!(resp.results[0].error_code, 54, "CreateAcls v{v}");
                }
                31 => {
                    let resp: DeleteAclsResponse =
                        call(&mut s, ApiKey::DeleteAcls, v, next(), &acl_requests().2);
                    assert_eq!(resp.filter_results[0].error_code, 54, "DeleteAcls v{v}");
                }
                other => panic!("API {other} has no conformance case"),
            }
        }
    }
}

/// Keeps only the known partition of an AddPartitionsToTxn request, so that it is attempted.
fn t_only_known(r: &mut AddPartitionsToTxnRequest) {
    r.v3_and_below_topics[0].partitions = vec![0];
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
