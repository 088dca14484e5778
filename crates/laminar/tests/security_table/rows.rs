//! The rows of the security table: each API, sent at one version by one principal, and its
//! answer checked.

use super::*;

/// The principal `who` sends `key` at `version` on `c` and the answer is checked.
pub fn row(fx: &mut Fixture, c: &mut Raw, key: i16, v: i16, who: Who) {
    let refused = who != Who::Allowed;
    let at = format!("API {key} v{v} as {who:?}");
    let not_authz = |code: i16| !AUTHORIZATION_ERRORS.contains(&code);
    match key {
        18 => {
            let mut r = ApiVersionsRequest::default();
            if v >= 3 {
                r.client_software_name = sb("table");
                r.client_software_version = sb("1");
            }
            let resp: ApiVersionsResponse = c.call(ApiKey::ApiVersions, v, &r).unwrap();
            assert_eq!(resp.error_code, 0, "{at}");
        }
        // Authentication: any principal, on a connection of its own.
        17 | 36 => {
            let mut fresh = Raw::connect(&fx.sasl);
            let hv = if key == 17 { v } else { 1 };
            let mut r = SaslHandshakeRequest::default();
            r.mechanism = sb("PLAIN");
            let resp: SaslHandshakeResponse = fresh.call(ApiKey::SaslHandshake, hv, &r).unwrap();
            assert_eq!(resp.error_code, 0, "{at}");
            if hv == 1 {
                let mut r = SaslAuthenticateRequest::default();
                r.auth_bytes = format!("\0{}\0{}-secret", who.user(), who.user())
                    .into_bytes()
                    .into();
                let av = if key == 36 { v } else { 2 };
                let resp: SaslAuthenticateResponse = fresh.call(ApiKey::SaslAuthenticate, av, &r).unwrap();
                assert_eq!(resp.error_code, 0, "{at}");
            }
        }
        3 => {
            let mut r = MetadataRequest::default();
            let mut t = metadata_request::MetadataRequestTopic::default();
            t.name = Some(topic("sec"));
            r.topics = Some(vec![t]);
            if v >= 4 {
                r.allow_auto_topic_creation = false;
            }
            if (8..=10).contains(&v) {
                r.include_cluster_authorized_operations = true;
            }
            if v >= 8 {
                r.include_topic_authorized_operations = true;
            }
            let resp: MetadataResponse = c.call(ApiKey::Metadata, v, &r).unwrap();
            let t = &resp.topics[0];
            if refused {
                assert_eq!(t.error_code, TOPIC_AUTHORIZATION_FAILED, "{at}");
                assert!(t.partitions.is_empty(), "{at}: {t:?}");
                assert!(t.topic_id.is_nil(), "{at}: {t:?}");
            } else {
                assert_eq!((t.error_code, t.partitions.len()), (0, 1), "{at}");
                if v >= 8 {
                    assert_ne!(t.topic_authorized_operations & (1 << DESCRIBE), 0, "{at}");
                }
            }
            // Every topic: a refused one is not listed.
            let mut all = MetadataRequest::default();
            all.topics = if v == 0 { Some(vec![]) } else { None };
            let resp: MetadataResponse = c.call(ApiKey::Metadata, v, &all).unwrap();
            let listed = resp
                .topics
                .iter()
                .any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "sec"));
            if who == Who::Nobody {
                assert!(resp.topics.is_empty(), "{at}: {:?}", resp.topics);
            }
            assert_eq!(listed, !refused, "{at}");
        }
        0 => {
            let mut p = produce_request::PartitionProduceData::default();
            p.index = 0;
            p.records = Some(batch());
            let mut t = produce_request::TopicProduceData::default();
            if v >= 13 {
                t.topic_id = fx.sec_id;
            } else {
                t.name = topic("sec");
            }
            t.partition_data = vec![p];
            let mut r = ProduceRequest::default();
            r.acks = 1;
            r.timeout_ms = 5000;
            r.topic_data = vec![t];
            let resp: ProduceResponse = c.call(ApiKey::Produce, v, &r).unwrap();
            let code = resp.responses[0].partition_responses[0].error_code;
            if refused {
                assert_eq!(code, TOPIC_AUTHORIZATION_FAILED, "{at}");
            } else {
                assert_eq!(code, 0, "{at}");
                fx.produced += 3;
            }
        }
        1 => {
            let mut p = fetch_request::FetchPartition::default();
            p.partition = 0;
            p.fetch_offset = 0;
            p.partition_max_bytes = 1 << 20;
            let mut t = fetch_request::FetchTopic::default();
            if v >= 13 {
                t.topic_id = fx.sec_id;
            } else {
                t.topic = topic("sec");
            }
            t.partitions = vec![p];
            let mut r = FetchRequest::default();
            r.max_wait_ms = 0;
            r.min_bytes = 1;
            r.max_bytes = 1 << 20;
            r.topics = vec![t];
            if v <= 14 {
                r.replica_id = BrokerId(-1);
            }
            let resp: FetchResponse = c.call(ApiKey::Fetch, v, &r).unwrap();
            let part = &resp.responses[0].partitions[0];
            let records = part.records.as_ref().map_or(0, |r| r.len());
            if refused {
                assert_eq!(part.error_code, TOPIC_AUTHORIZATION_FAILED, "{at}");
                assert_eq!(records, 0, "{at}: records of a refused topic");
                assert!(part.high_watermark <= 0, "{at}: {part:?}");
            } else {
                assert_eq!(part.error_code, 0, "{at}");
                assert!(records > 0, "{at}");
            }
        }
        2 => {
            let mut p = list_offsets_request::ListOffsetsPartition::default();
            p.partition_index = 0;
            p.timestamp = -1;
            let mut t = list_offsets_request::ListOffsetsTopic::default();
            t.name = topic("sec");
            t.partitions = vec![p];
            let mut r = ListOffsetsRequest::default();
            r.replica_id = BrokerId(-1);
            r.topics = vec![t];
            let resp: ListOffsetsResponse = c.call_as(ApiKey::ListOffsets, v, v.min(10), &r).unwrap();
            let p = &resp.topics[0].partitions[0];
            if refused {
                assert_eq!(p.error_code, TOPIC_AUTHORIZATION_FAILED, "{at}");
                assert!(p.offset <= 0, "{at}: {p:?}");
            } else {
                assert_eq!(p.error_code, 0, "{at}");
                assert!(p.offset > 0, "{at}");
            }
        }
        19 => {
            let mut t = create_topics_request::CreatableTopic::default();
            t.name = topic(&format!("made-{v}-{}", who.user()));
            t.num_partitions = 1;
            t.replication_factor = 1;
            let mut r = CreateTopicsRequest::default();
            r.topics = vec![t];
            r.timeout_ms = 10_000;
            let resp: CreateTopicsResponse = c.call(ApiKey::CreateTopics, v, &r).unwrap();
            let code = resp.topics[0].error_code;
            assert_eq!(code, if refused { TOPIC_AUTHORIZATION_FAILED } else { 0 }, "{at}");
        }
        20 => {
            let name = format!("doomed-{v}-{}", who.user());
            let mut r = DeleteTopicsRequest::default();
            if v >= 6 {
                let mut t = delete_topics_request::DeleteTopicState::default();
                t.name = Some(topic(&name));
                r.topics = vec![t];
            } else {
                r.topic_names = vec![topic(&name)];
            }
            r.timeout_ms = 10_000;
            let resp: DeleteTopicsResponse = c.call(ApiKey::DeleteTopics, v, &r).unwrap();
            let code = resp.responses[0].error_code;
            assert_eq!(code, if refused { TOPIC_AUTHORIZATION_FAILED } else { 0 }, "{at}");
        }
        21 => {
            let mut p = delete_records_request::DeleteRecordsPartition::default();
            p.partition_index = 0;
            p.offset = 0;
            let mut t = delete_records_request::DeleteRecordsTopic::default();
            t.name = topic("sec");
            t.partitions = vec![p];
            let mut r = DeleteRecordsRequest::default();
            r.topics = vec![t];
            r.timeout_ms = 5000;
            let resp: DeleteRecordsResponse = c.call(ApiKey::DeleteRecords, v, &r).unwrap();
            let p = &resp.topics[0].partitions[0];
            if refused {
                assert_eq!(
                    (p.error_code, p.low_watermark),
                    (TOPIC_AUTHORIZATION_FAILED, -1),
                    "{at}"
                );
            } else {
                assert_eq!((p.error_code, p.low_watermark), (0, 0), "{at}");
            }
        }
        22 => {
            let mut r = InitProducerIdRequest::default();
            r.transactional_id = Some(TransactionalId(sb(&format!("tx-{v}-{}", who.user()))));
            r.transaction_timeout_ms = 60_000;
            let resp: InitProducerIdResponse = c.call(ApiKey::InitProducerId, v, &r).unwrap();
            if refused {
                assert_eq!(resp.error_code, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "{at}");
                assert_eq!(resp.producer_id.0, -1, "{at}");
            } else {
                assert_eq!(resp.error_code, 0, "{at}");
                assert!(resp.producer_id.0 >= 0, "{at}");
            }
        }
        32 => {
            let mut res = describe_configs_request::DescribeConfigsResource::default();
            res.resource_type = 2;
            res.resource_name = sb("sec");
            res.configuration_keys = None;
            let mut r = DescribeConfigsRequest::default();
            r.resources = vec![res];
            let resp: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, v, &r).unwrap();
            let res = &resp.results[0];
            if refused {
                assert_eq!(res.error_code, TOPIC_AUTHORIZATION_FAILED, "{at}");
                assert!(res.configs.is_empty(), "{at}");
            } else {
                assert_eq!(res.error_code, 0, "{at}");
                assert!(!res.configs.is_empty(), "{at}");
            }
        }
        33 => {
            let mut cfg = alter_configs_request::AlterableConfig::default();
            cfg.name = sb("retention.ms");
            cfg.value = Some(sb("604800000"));
            let mut res = alter_configs_request::AlterConfigsResource::default();
            res.resource_type = 2;
            res.resource_name = sb("sec");
            res.configs = vec![cfg];
            let mut r = AlterConfigsRequest::default();
            r.resources = vec![res];
            r.validate_only = true;
            let resp: AlterConfigsResponse = c.call(ApiKey::AlterConfigs, v, &r).unwrap();
            let code = resp.responses[0].error_code;
            assert_eq!(code, if refused { TOPIC_AUTHORIZATION_FAILED } else { 0 }, "{at}");
        }
        44 => {
            let mut cfg = incremental_alter_configs_request::AlterableConfig::default();
            cfg.name = sb("retention.ms");
            cfg.config_operation = 0;
            cfg.value = Some(sb("604800000"));
            let mut res = incremental_alter_configs_request::AlterConfigsResource::default();
            res.resource_type = 2;
            res.resource_name = sb("sec");
            res.configs = vec![cfg];
            let mut r = IncrementalAlterConfigsRequest::default();
            r.resources = vec![res];
            r.validate_only = true;
            let resp: IncrementalAlterConfigsResponse =
                c.call(ApiKey::IncrementalAlterConfigs, v, &r).unwrap();
            let code = resp.responses[0].error_code;
            assert_eq!(code, if refused { TOPIC_AUTHORIZATION_FAILED } else { 0 }, "{at}");
        }
        37 => {
            let mut t = create_partitions_request::CreatePartitionsTopic::default();
            t.name = topic("sec");
            t.count = 2;
            t.assignments = None;
            let mut r = CreatePartitionsRequest::default();
            r.topics = vec![t];
            r.timeout_ms = 5000;
            r.validate_only = true;
            let resp: CreatePartitionsResponse = c.call(ApiKey::CreatePartitions, v, &r).unwrap();
            let code = resp.results[0].error_code;
            assert_eq!(code, if refused { TOPIC_AUTHORIZATION_FAILED } else { 0 }, "{at}");
        }
        10 => {
            let mut r = FindCoordinatorRequest::default();
            if v >= 4 {
                r.coordinator_keys = vec![sb("g")];
            } else {
                r.key = sb("g");
            }
            let resp: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, v, &r).unwrap();
            let (code, port) = if v >= 4 {
                (resp.coordinators[0].error_code, resp.coordinators[0].port)
            } else {
                (resp.error_code, resp.port)
            };
            if refused {
                assert_eq!(code, GROUP_AUTHORIZATION_FAILED, "{at}");
                assert!(port <= 0, "{at}: no coordinator named");
            } else {
                assert_eq!(code, 0, "{at}");
            }
        }
        11 => {
            let mut r = JoinGroupRequest::default();
            r.group_id = GroupId(sb(&format!("jg-{v}-{}", who.user())));
            r.session_timeout_ms = 10_000;
            r.rebalance_timeout_ms = 10_000;
            r.protocol_type = sb("consumer");
            let mut p = join_group_request::JoinGroupRequestProtocol::default();
            p.name = sb("range");
            p.metadata = Bytes::from_static(b"meta");
            r.protocols = vec![p];
            let resp: JoinGroupResponse = c.call(ApiKey::JoinGroup, v, &r).unwrap();
            if refused {
                assert_eq!(resp.error_code, GROUP_AUTHORIZATION_FAILED, "{at}");
                assert!(resp.members.is_empty() && resp.leader.is_empty(), "{at}");
            } else {
                assert_eq!(resp.error_code, if v >= 4 { 79 } else { 0 }, "{at}");
            }
        }
        14 => {
            let mut r = SyncGroupRequest::default();
            r.group_id = GroupId(sb("sg"));
            r.generation_id = 1;
            r.member_id = sb("m");
            if v >= 5 {
                r.protocol_type = Some(sb("consumer"));
                r.protocol_name = Some(sb("range"));
            }
            let resp: SyncGroupResponse = c.call(ApiKey::SyncGroup, v, &r).unwrap();
            if refused {
                assert_eq!(resp.error_code, GROUP_AUTHORIZATION_FAILED, "{at}");
                assert!(resp.assignment.is_empty(), "{at}");
            } else {
                assert!(not_authz(resp.error_code), "{at}: {}", resp.error_code);
            }
        }
        12 => {
            let mut r = HeartbeatRequest::default();
            r.group_id = GroupId(sb("hb"));
            r.generation_id = 1;
            r.member_id = sb("m");
            let resp: HeartbeatResponse = c.call(ApiKey::Heartbeat, v, &r).unwrap();
            if refused {
                assert_eq!(resp.error_code, GROUP_AUTHORIZATION_FAILED, "{at}");
            } else {
                assert!(not_authz(resp.error_code), "{at}: {}", resp.error_code);
            }
        }
        13 => {
            let mut r = LeaveGroupRequest::default();
            r.group_id = GroupId(sb("lg"));
            if v >= 3 {
                let mut m = leave_group_request::MemberIdentity::default();
                m.member_id = sb("m");
                r.members = vec![m];
            } else {
                r.member_id = sb("m");
            }
            let resp: LeaveGroupResponse = c.call(ApiKey::LeaveGroup, v, &r).unwrap();
            if refused {
                assert_eq!(resp.error_code, GROUP_AUTHORIZATION_FAILED, "{at}");
                assert!(resp.members.is_empty(), "{at}");
            } else {
                assert!(not_authz(resp.error_code), "{at}: {}", resp.error_code);
            }
        }
        8 => {
            let mut p = offset_commit_request::OffsetCommitRequestPartition::default();
            p.partition_index = 0;
            p.committed_offset = 100 + v as i64;
            let mut t = offset_commit_request::OffsetCommitRequestTopic::default();
            t.name = topic("sec");
            t.partitions = vec![p];
            let mut r = OffsetCommitRequest::default();
            r.group_id = GroupId(sb("g"));
            r.generation_id_or_member_epoch = -1;
            r.topics = vec![t];
            let before = fx.committed("g");
            let resp: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, v, &r).unwrap();
            let code = resp.topics[0].partitions[0].error_code;
            if refused {
                assert_eq!(code, GROUP_AUTHORIZATION_FAILED, "{at}");
                assert_eq!(
                    fx.committed("g"),
                    before,
                    "{at}: a refused commit changed the offset"
                );
            } else {
                assert_eq!(code, 0, "{at}");
                assert_eq!(fx.committed("g"), 100 + v as i64, "{at}");
            }
        }
        9 => {
            let mut r = OffsetFetchRequest::default();
            if v >= 8 {
                let mut t = offset_fetch_request::OffsetFetchRequestTopics::default();
                t.name = topic("sec");
                t.partition_indexes = vec![0];
                let mut g = offset_fetch_request::OffsetFetchRequestGroup::default();
                g.group_id = GroupId(sb("g"));
                g.topics = Some(vec![t]);
                r.groups = vec![g];
            } else {
                let mut t = offset_fetch_request::OffsetFetchRequestTopic::default();
                t.name = topic("sec");
                t.partition_indexes = vec![0];
                r.group_id = GroupId(sb("g"));
                r.topics = Some(vec![t]);
            }
            let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, v, &r).unwrap();
            let (code, offsets): (i16, Vec<i64>) = if v >= 8 {
                let g = &resp.groups[0];
                (
                    g.error_code,
                    g.topics
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(|p| p.committed_offset))
                        .collect(),
                )
            } else if v >= 2 {
                (
                    resp.error_code,
                    resp.topics
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(|p| p.committed_offset))
                        .collect(),
                )
            } else {
                let p = &resp.topics[0].partitions[0];
                (p.error_code, vec![p.committed_offset])
            };
            if refused {
                assert_eq!(code, GROUP_AUTHORIZATION_FAILED, "{at}");
                assert!(offsets.iter().all(|o| *o < 0), "{at}: offsets {offsets:?}");
            } else {
                assert_eq!(code, 0, "{at}");
                assert!(
                    offsets.iter().all(|o| *o >= 1) && !offsets.is_empty(),
                    "{at}: {offsets:?}"
                );
            }
        }
        16 => {
            let r = ListGroupsRequest::default();
            let resp: ListGroupsResponse = c.call(ApiKey::ListGroups, v, &r).unwrap();
            assert_eq!(resp.error_code, 0, "{at}");
            let listed = resp.groups.iter().any(|g| g.group_id.0.as_str() == "g");
            assert_eq!(listed, !refused, "{at}");
            if who == Who::Nobody {
                assert!(resp.groups.is_empty(), "{at}");
            }
        }
        15 => {
            let mut r = DescribeGroupsRequest::default();
            r.groups = vec![GroupId(sb("g"))];
            if v >= 3 {
                r.include_authorized_operations = true;
            }
            let resp: DescribeGroupsResponse = c.call(ApiKey::DescribeGroups, v, &r).unwrap();
            let g = &resp.groups[0];
            if refused {
                assert_eq!(g.error_code, GROUP_AUTHORIZATION_FAILED, "{at}");
                assert!(g.members.is_empty() && g.protocol_type.is_empty(), "{at}");
                assert!(g.authorized_operations <= 0, "{at}");
            } else {
                assert_eq!((g.error_code, g.group_state.as_str()), (0, "Empty"), "{at}");
                if v >= 3 {
                    assert_ne!(g.authorized_operations & (1 << DESCRIBE), 0, "{at}");
                }
            }
        }
        42 => {
            let name = format!("dg-{v}-{}", who.user());
            let mut r = DeleteGroupsRequest::default();
            r.groups_names = vec![GroupId(sb(&name))];
            let resp: DeleteGroupsResponse = c.call(ApiKey::DeleteGroups, v, &r).unwrap();
            let code = resp.results[0].error_code;
            if refused {
                assert_eq!(code, GROUP_AUTHORIZATION_FAILED, "{at}");
                assert_eq!(fx.committed(&name), 1, "{at}: the group is still there");
            } else {
                assert_eq!(code, 0, "{at}");
                assert_eq!(fx.committed(&name), -1, "{at}");
            }
        }
        47 => {
            let mut p = offset_delete_request::OffsetDeleteRequestPartition::default();
            p.partition_index = 0;
            let mut t = offset_delete_request::OffsetDeleteRequestTopic::default();
            t.name = topic("sec");
            t.partitions = vec![p];
            let mut r = OffsetDeleteRequest::default();
            r.group_id = GroupId(sb("od"));
            r.topics = vec![t];
            let resp: OffsetDeleteResponse = c.call(ApiKey::OffsetDelete, v, &r).unwrap();
            if refused {
                assert_eq!(resp.error_code, GROUP_AUTHORIZATION_FAILED, "{at}");
                assert!(resp.topics.is_empty(), "{at}");
                assert_eq!(fx.committed("od"), 1, "{at}");
            } else {
                assert_eq!(resp.error_code, 0, "{at}");
                assert_eq!(fx.committed("od"), -1, "{at}");
                fx.commit("od", 1);
            }
        }
        48 => {
            let r = DescribeClientQuotasRequest::default();
            let resp: DescribeClientQuotasResponse = c.call(ApiKey::DescribeClientQuotas, v, &r).unwrap();
            if refused {
                assert_eq!(resp.error_code, CLUSTER_AUTHORIZATION_FAILED, "{at}");
                assert!(resp.entries.as_ref().is_none_or(|e| e.is_empty()), "{at}");
            } else {
                assert_eq!(resp.error_code, 0, "{at}");
            }
        }
        49 => {
            let mut entity = alter_client_quotas_request::EntityData::default();
            entity.entity_type = sb("client-id");
            entity.entity_name = Some(sb("table"));
            let mut op = alter_client_quotas_request::OpData::default();
            op.key = sb("consumer_byte_rate");
            op.value = 1024.0;
            let mut e = alter_client_quotas_request::EntryData::default();
            e.entity = vec![entity];
            e.ops = vec![op];
            let mut r = AlterClientQuotasRequest::default();
            r.entries = vec![e];
            r.validate_only = true;
            let resp: AlterClientQuotasResponse = c.call(ApiKey::AlterClientQuotas, v, &r).unwrap();
            let code = resp.entries[0].error_code;
            assert_eq!(
                code,
                if refused { CLUSTER_AUTHORIZATION_FAILED } else { 0 },
                "{at}"
            );
        }
        35 => {
            let mut t = describe_log_dirs_request::DescribableLogDirTopic::default();
            t.topic = topic("sec");
            t.partitions = vec![0];
            let mut r = DescribeLogDirsRequest::default();
            r.topics = Some(vec![t]);
            let resp: DescribeLogDirsResponse = c.call(ApiKey::DescribeLogDirs, v, &r).unwrap();
            if refused {
                if v >= 3 {
                    assert_eq!(resp.error_code, CLUSTER_AUTHORIZATION_FAILED, "{at}");
                }
                assert!(resp.results.is_empty(), "{at}: {:?}", resp.results);
            } else {
                assert_eq!(resp.results.len(), 1, "{at}");
                assert_eq!(resp.results[0].topics.len(), 1, "{at}");
            }
        }
        60 => {
            let mut r = DescribeClusterRequest::default();
            r.include_cluster_authorized_operations = true;
            if v >= 1 {
                r.endpoint_type = 1;
            }
            let resp: DescribeClusterResponse = c.call(ApiKey::DescribeCluster, v, &r).unwrap();
            // Answered to all (Kafka asks nothing of DescribeCluster); the cluster's
            // authorized operations only to who may DESCRIBE it.
            assert_eq!(resp.error_code, 0, "{at}");
            if refused {
                assert_eq!(resp.cluster_authorized_operations, 0, "{at}");
            } else {
                assert_ne!(resp.cluster_authorized_operations & (1 << DESCRIBE), 0, "{at}");
            }
        }
        23 => {
            let mut p = offset_for_leader_epoch_request::OffsetForLeaderPartition::default();
            p.partition = 0;
            p.current_leader_epoch = -1;
            p.leader_epoch = 0;
            let mut t = offset_for_leader_epoch_request::OffsetForLeaderTopic::default();
            t.topic = topic("sec");
            t.partitions = vec![p];
            let mut r = OffsetForLeaderEpochRequest::default();
            r.replica_id = BrokerId(-1);
            r.topics = vec![t];
            let resp: OffsetForLeaderEpochResponse = c.call(ApiKey::OffsetForLeaderEpoch, v, &r).unwrap();
            let p = &resp.topics[0].partitions[0];
            if refused {
                assert_eq!(
                    (p.error_code, p.end_offset),
                    (TOPIC_AUTHORIZATION_FAILED, -1),
                    "{at}"
                );
            } else {
                assert_eq!(p.error_code, 0, "{at}");
                assert!(p.end_offset > 0, "{at}");
            }
        }
        43 => {
            let mut tp = elect_leaders_request::TopicPartitions::default();
            tp.topic = topic("sec");
            tp.partitions = vec![0];
            let mut r = ElectLeadersRequest::default();
            r.topic_partitions = Some(vec![tp]);
            let resp: ElectLeadersResponse = c.call(ApiKey::ElectLeaders, v, &r).unwrap();
            if refused {
                // v0 has no top-level code: each partition carries the refusal, as Kafka's.
                if v >= 1 {
                    assert_eq!(resp.error_code, CLUSTER_AUTHORIZATION_FAILED, "{at}");
                }
                let codes: Vec<i16> = resp
                    .replica_election_results
                    .iter()
                    .flat_map(|t| t.partition_result.iter().map(|p| p.error_code))
                    .collect();
                assert_eq!(codes, [CLUSTER_AUTHORIZATION_FAILED], "{at}");
            } else {
                let code = resp.replica_election_results[0].partition_result[0].error_code;
                assert!(not_authz(code) && not_authz(resp.error_code), "{at}: {code}");
            }
        }
        45 => {
            let mut cancelled = alter_partition_reassignments_request::ReassignablePartition::default();
            cancelled.partition_index = 0;
            cancelled.replicas = None;
            let mut t = alter_partition_reassignments_request::ReassignableTopic::default();
            t.name = topic("sec");
            t.partitions = vec![cancelled];
            let mut r = AlterPartitionReassignmentsRequest::default();
            r.topics = vec![t];
            let resp: AlterPartitionReassignmentsResponse =
                c.call(ApiKey::AlterPartitionReassignments, v, &r).unwrap();
            if refused {
                assert_eq!(resp.error_code, CLUSTER_AUTHORIZATION_FAILED, "{at}");
                assert!(resp.responses.is_empty(), "{at}");
            } else {
                assert_eq!(resp.error_code, 0, "{at}");
                assert_eq!(resp.responses[0].partitions[0].error_code, 85, "{at}");
            }
        }
        46 => {
            let r = ListPartitionReassignmentsRequest::default();
            let resp: ListPartitionReassignmentsResponse =
                c.call(ApiKey::ListPartitionReassignments, v, &r).unwrap();
            let code = resp.error_code;
            assert_eq!(
                code,
                if refused { CLUSTER_AUTHORIZATION_FAILED } else { 0 },
                "{at}"
            );
        }
        61 => {
            let mut t = describe_producers_request::TopicRequest::default();
            t.name = topic("sec");
            t.partition_indexes = vec![0];
            let mut r = DescribeProducersRequest::default();
            r.topics = vec![t];
            let resp: DescribeProducersResponse = c.call(ApiKey::DescribeProducers, v, &r).unwrap();
            let p = &resp.topics[0].partitions[0];
            if refused {
                assert_eq!(p.error_code, TOPIC_AUTHORIZATION_FAILED, "{at}");
                assert!(p.active_producers.is_empty(), "{at}");
            } else {
                assert_eq!(p.error_code, 0, "{at}");
            }
        }
        24 if v >= 4 => {
            let mut t = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
            t.name = topic("sec");
            t.partitions = vec![0];
            let mut txn = add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default();
            txn.transactional_id = TransactionalId(sb("tx"));
            txn.producer_id = ProducerId(7);
            txn.verify_only = true;
            txn.topics = vec![t];
            let mut r = AddPartitionsToTxnRequest::default();
            r.transactions = vec![txn];
            let resp: AddPartitionsToTxnResponse = c.call(ApiKey::AddPartitionsToTxn, v, &r).unwrap();
            if refused {
                assert_eq!(resp.error_code, CLUSTER_AUTHORIZATION_FAILED, "{at}");
                assert!(resp.results_by_transaction.is_empty(), "{at}");
            } else {
                assert_eq!(resp.error_code, 0, "{at}");
            }
        }
        24 => {
            let mut t = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
            t.name = topic("sec");
            t.partitions = vec![0];
            let mut r = AddPartitionsToTxnRequest::default();
            r.v3_and_below_transactional_id = TransactionalId(sb("tx"));
            r.v3_and_below_producer_id = ProducerId(7);
            r.v3_and_below_topics = vec![t];
            let resp: AddPartitionsToTxnResponse = c.call(ApiKey::AddPartitionsToTxn, v, &r).unwrap();
            let code = resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code;
            if refused {
                assert_eq!(code, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "{at}");
            } else {
                assert!(not_authz(code), "{at}: {code}");
            }
        }
        25 => {
            let mut r = AddOffsetsToTxnRequest::default();
            r.transactional_id = TransactionalId(sb("tx"));
            r.producer_id = ProducerId(7);
            r.group_id = GroupId(sb("g"));
            let resp: AddOffsetsToTxnResponse = c.call(ApiKey::AddOffsetsToTxn, v, &r).unwrap();
            if refused {
                assert_eq!(resp.error_code, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "{at}");
            } else {
                assert!(not_authz(resp.error_code), "{at}: {}", resp.error_code);
            }
        }
        26 => {
            let mut r = EndTxnRequest::default();
            r.transactional_id = TransactionalId(sb("tx"));
            r.producer_id = ProducerId(7);
            r.committed = true;
            let resp: EndTxnResponse = c.call(ApiKey::EndTxn, v, &r).unwrap();
            if refused {
                assert_eq!(resp.error_code, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "{at}");
            } else {
                assert!(not_authz(resp.error_code), "{at}: {}", resp.error_code);
            }
        }
        // kafka-protocol encodes WriteTxnMarkers v1 only; v2 (the flexible form of the same
        // request) goes through the same rule.
        27 if v >= 2 => {}
        27 => {
            let mut t = write_txn_markers_request::WritableTxnMarkerTopic::default();
            t.name = topic("markers");
            t.partition_indexes = vec![0];
            let mut m = write_txn_markers_request::WritableTxnMarker::default();
            m.producer_id = ProducerId(1 << 40);
            m.coordinator_epoch = 0;
            m.topics = vec![t];
            let mut r = WriteTxnMarkersRequest::default();
            r.markers = vec![m];
            let resp: WriteTxnMarkersResponse = c.call(ApiKey::WriteTxnMarkers, v, &r).unwrap();
            let code = resp.markers[0].topics[0].partitions[0].error_code;
            assert_eq!(
                code,
                if refused { CLUSTER_AUTHORIZATION_FAILED } else { 0 },
                "{at}"
            );
        }
        28 => {
            let mut p = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
            p.partition_index = 0;
            p.committed_offset = 1;
            let mut t = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
            t.name = topic("sec");
            t.partitions = vec![p];
            let mut r = TxnOffsetCommitRequest::default();
            r.transactional_id = TransactionalId(sb("tx"));
            r.group_id = GroupId(sb("g"));
            r.producer_id = ProducerId(7);
            r.topics = vec![t];
            let resp: TxnOffsetCommitResponse = c.call(ApiKey::TxnOffsetCommit, v, &r).unwrap();
            let code = resp.topics[0].partitions[0].error_code;
            if refused {
                assert_eq!(code, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "{at}");
            } else {
                assert!(not_authz(code), "{at}: {code}");
            }
        }
        65 => {
            let mut r = DescribeTransactionsRequest::default();
            r.transactional_ids = vec![TransactionalId(sb("tx"))];
            let resp: DescribeTransactionsResponse = c.call(ApiKey::DescribeTransactions, v, &r).unwrap();
            let s = &resp.transaction_states[0];
            if refused {
                assert_eq!(s.error_code, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "{at}");
                assert!(s.topics.is_empty() && s.producer_id.0 <= 0, "{at}: {s:?}");
            } else {
                assert_eq!(s.error_code, 0, "{at}");
                assert!(s.producer_id.0 >= 0, "{at}");
            }
        }
        66 => {
            let r = ListTransactionsRequest::default();
            let resp: ListTransactionsResponse = c.call(ApiKey::ListTransactions, v, &r).unwrap();
            assert_eq!(resp.error_code, 0, "{at}");
            let listed = resp
                .transaction_states
                .iter()
                .any(|t| t.transactional_id.0.as_str() == "tx");
            assert_eq!(listed, !refused, "{at}");
        }
        50 => {
            let mut r = DescribeUserScramCredentialsRequest::default();
            r.users = None;
            let resp: DescribeUserScramCredentialsResponse =
                c.call(ApiKey::DescribeUserScramCredentials, v, &r).unwrap();
            if refused {
                assert_eq!(resp.error_code, CLUSTER_AUTHORIZATION_FAILED, "{at}");
                assert!(resp.results.is_empty(), "{at}");
            } else {
                assert_eq!(resp.error_code, 0, "{at}");
            }
        }
        51 => {
            let mut d = alter_user_scram_credentials_request::ScramCredentialDeletion::default();
            d.name = sb(&format!("ghost-{}", who.user()));
            d.mechanism = 1;
            let mut r = AlterUserScramCredentialsRequest::default();
            r.deletions = vec![d];
            let resp: AlterUserScramCredentialsResponse =
                c.call(ApiKey::AlterUserScramCredentials, v, &r).unwrap();
            let code = resp.results[0].error_code;
            if refused {
                assert_eq!(code, CLUSTER_AUTHORIZATION_FAILED, "{at}");
            } else {
                assert!(not_authz(code), "{at}: {code}");
            }
        }
        29 => {
            let mut d = DescribeAclsRequest::default();
            d.resource_type_filter = 1;
            d.resource_name_filter = None;
            d.pattern_type_filter = 1;
            d.principal_filter = None;
            d.host_filter = None;
            d.operation = 1;
            d.permission_type = 1;
            let resp: DescribeAclsResponse = c.call(ApiKey::DescribeAcls, v, &d).unwrap();
            if refused {
                assert_eq!(resp.error_code, CLUSTER_AUTHORIZATION_FAILED, "{at}");
                assert!(resp.resources.is_empty(), "{at}: ACLs shown");
            } else {
                assert_eq!(resp.error_code, 0, "{at}");
                assert!(!resp.resources.is_empty(), "{at}: {resp:?}");
            }
        }
        30 => {
            let mut r = CreateAclsRequest::default();
            r.creations = vec![creation(
                "User:x",
                ALLOW,
                (READ, TOPIC, &format!("probe-{v}-{}", who.user()), LITERAL),
            )];
            let resp: CreateAclsResponse = c.call(ApiKey::CreateAcls, v, &r).unwrap();
            let code = resp.results[0].error_code;
            assert_eq!(
                code,
                if refused { CLUSTER_AUTHORIZATION_FAILED } else { 0 },
                "{at}"
            );
        }
        31 => {
            let keep = creation("User:keeper", ALLOW, (READ, TOPIC, "keep", LITERAL));
            let mut r = DeleteAclsRequest::default();
            r.filters = vec![filter_of(&keep)];
            let resp: DeleteAclsResponse = c.call(ApiKey::DeleteAcls, v, &r).unwrap();
            let result = &resp.filter_results[0];
            if refused {
                assert_eq!(result.error_code, CLUSTER_AUTHORIZATION_FAILED, "{at}");
                assert!(result.matching_acls.is_empty(), "{at}");
                assert_eq!(fx.acls("keep"), ["keep"], "{at}: a refused DeleteAcls deleted");
            } else {
                assert_eq!((result.error_code, result.matching_acls.len()), (0, 1), "{at}");
                assert!(fx.acls("keep").is_empty(), "{at}");
                create_acls(&mut fx.admin, vec![keep]);
            }
        }
        other => panic!("API {other} has no row in the security table"),
    }
}
