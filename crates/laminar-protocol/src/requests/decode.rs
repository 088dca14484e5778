//! Request decoders: one function per API, following Kafka's JSON message schemas field by
//! field, for the versions in [`crate::API_TABLE`].

use bytes::Bytes;

use super::types::*;
use crate::apis::ApiKey;
use crate::reader::{Reader, Result};
use crate::ProtocolError;

/// Reads only the api key, version and correlation id, which is all that is needed to
/// answer a request this broker cannot decode (unknown key, unsupported version).
pub fn peek_header(frame: &[u8]) -> Option<(i16, i16, i32)> {
    if frame.len() < 8 {
        return None;
    }
    Some((
        i16::from_be_bytes([frame[0], frame[1]]),
        i16::from_be_bytes([frame[2], frame[3]]),
        i32::from_be_bytes(frame[4..8].try_into().unwrap()),
    ))
}

/// Decodes a whole request frame. Unknown keys and unsupported versions are errors the
/// caller answers without decoding further (see [`peek_header`]).
pub fn decode(frame: Bytes) -> Result<(RequestHeader, Request)> {
    let (key, version, _) =
        peek_header(&frame).ok_or(ProtocolError::Malformed("frame shorter than a header"))?;
    let api = ApiKey::from_i16(key).ok_or(ProtocolError::UnknownApiKey(key))?;
    if !api.supports(version) {
        return Err(ProtocolError::UnsupportedVersion { api, version });
    }
    let flexible = api.is_flexible(version);
    // The header's client id is a classic nullable string even in header v2.
    let mut r = Reader::new(frame, false);
    let header = RequestHeader {
        api_key: r.i16()?,
        api_version: r.i16()?,
        correlation_id: r.i32()?,
        client_id: r.nullable_string()?,
    };
    r.set_flexible(flexible);
    r.tagged_fields()?;
    let v = version;
    let request = match api {
        ApiKey::ApiVersions => Request::ApiVersions(api_versions(&mut r, v)?),
        ApiKey::Metadata => Request::Metadata(metadata(&mut r, v)?),
        ApiKey::Produce => Request::Produce(produce(&mut r, v)?),
        ApiKey::Fetch => Request::Fetch(fetch(&mut r, v)?),
        ApiKey::ListOffsets => Request::ListOffsets(list_offsets(&mut r, v)?),
        ApiKey::CreateTopics => Request::CreateTopics(create_topics(&mut r, v)?),
        ApiKey::DeleteTopics => Request::DeleteTopics(delete_topics(&mut r, v)?),
        ApiKey::InitProducerId => Request::InitProducerId(init_producer_id(&mut r, v)?),
        ApiKey::DescribeConfigs => Request::DescribeConfigs(describe_configs(&mut r, v)?),
        ApiKey::CreatePartitions => Request::CreatePartitions(create_partitions(&mut r, v)?),
        ApiKey::FindCoordinator => Request::FindCoordinator(find_coordinator(&mut r, v)?),
        ApiKey::JoinGroup => Request::JoinGroup(join_group(&mut r, v)?),
        ApiKey::SyncGroup => Request::SyncGroup(sync_group(&mut r, v)?),
        ApiKey::Heartbeat => Request::Heartbeat(heartbeat(&mut r, v)?),
        ApiKey::LeaveGroup => Request::LeaveGroup(leave_group(&mut r, v)?),
        ApiKey::OffsetCommit => Request::OffsetCommit(offset_commit(&mut r, v)?),
        ApiKey::OffsetFetch => Request::OffsetFetch(offset_fetch(&mut r, v)?),
        ApiKey::ListGroups => Request::ListGroups(list_groups(&mut r, v)?),
        ApiKey::DescribeGroups => Request::DescribeGroups(describe_groups(&mut r, v)?),
        ApiKey::DeleteGroups => Request::DeleteGroups(DeleteGroupsRequest {
            groups: r.array(1, |r| r.string())?,
        }),
        ApiKey::OffsetDelete => Request::OffsetDelete(offset_delete(&mut r)?),
        ApiKey::DescribeClientQuotas => Request::DescribeClientQuotas(describe_client_quotas(&mut r)?),
        ApiKey::AlterClientQuotas => Request::AlterClientQuotas(alter_client_quotas(&mut r)?),
        ApiKey::DescribeLogDirs => Request::DescribeLogDirs(DescribeLogDirsRequest {
            topics: fetch_topics(&mut r)?,
        }),
        ApiKey::OffsetForLeaderEpoch => Request::OffsetForLeaderEpoch(offset_for_leader_epoch(&mut r, v)?),
        ApiKey::AlterConfigs => Request::AlterConfigs(alter_configs(&mut r, false)?),
        ApiKey::ElectLeaders => {
            let election_type = if v >= 1 { r.i8()? } else { 0 };
            let topic_partitions = fetch_topics(&mut r)?;
            r.i32()?; // timeout_ms: an election on one node never waits
            Request::ElectLeaders(ElectLeadersRequest {
                election_type,
                topic_partitions,
            })
        }
        ApiKey::DescribeProducers => Request::DescribeProducers(DescribeProducersRequest {
            topics: fetch_topics(&mut r)?.unwrap_or_default(),
        }),
        ApiKey::DeleteRecords => {
            let topics = r.array(3, |r| {
                let name = r.string()?;
                let partitions = r.array(12, |r| {
                    let p = (r.i32()?, r.i64()?);
                    r.tagged_fields()?;
                    Ok(p)
                })?;
                r.tagged_fields()?;
                Ok((name, partitions))
            })?;
            Request::DeleteRecords(DeleteRecordsRequest {
                topics,
                timeout_ms: r.i32()?,
            })
        }
        ApiKey::AlterPartitionReassignments => {
            let timeout_ms = r.i32()?;
            let allow_replication_factor_change = if v >= 1 { r.bool()? } else { true };
            let topics = r.array(3, |r| {
                let name = r.string()?;
                let partitions = r.array(6, |r| {
                    let index = r.i32()?;
                    let replicas = match r.nullable_array_len::<i32>(4)? {
                        None => None,
                        Some(n) => Some((0..n).map(|_| r.i32()).collect::<Result<Vec<i32>>>()?),
                    };
                    r.tagged_fields()?;
                    Ok((index, replicas))
                })?;
                r.tagged_fields()?;
                Ok((name, partitions))
            })?;
            Request::AlterPartitionReassignments(AlterPartitionReassignmentsRequest {
                timeout_ms,
                allow_replication_factor_change,
                topics,
            })
        }
        ApiKey::ListPartitionReassignments => {
            r.i32()?; // timeout_ms
            Request::ListPartitionReassignments(ListPartitionReassignmentsRequest {
                topics: fetch_topics(&mut r)?,
            })
        }
        ApiKey::IncrementalAlterConfigs => Request::AlterConfigs(alter_configs(&mut r, true)?),
        ApiKey::AddPartitionsToTxn => {
            let topics = |r: &mut Reader| {
                r.array(3, |r| {
                    let name = r.string()?;
                    let partitions = r.array(4, |r| r.i32())?;
                    r.tagged_fields()?;
                    Ok((name, partitions))
                })
            };
            let transactions = if v >= 4 {
                r.array(16, |r| {
                    let producer = txn_producer(r)?;
                    let verify_only = r.bool()?;
                    let topics = topics(r)?;
                    r.tagged_fields()?;
                    Ok(TxnPartitions {
                        producer,
                        verify_only,
                        topics,
                    })
                })?
            } else {
                vec![TxnPartitions {
                    producer: txn_producer(&mut r)?,
                    verify_only: false,
                    topics: topics(&mut r)?,
                }]
            };
            Request::AddPartitionsToTxn(AddPartitionsToTxnRequest { transactions })
        }
        ApiKey::AddOffsetsToTxn => Request::AddOffsetsToTxn(AddOffsetsToTxnRequest {
            producer: txn_producer(&mut r)?,
            group_id: r.string()?,
        }),
        ApiKey::EndTxn => Request::EndTxn(EndTxnRequest {
            producer: txn_producer(&mut r)?,
            committed: r.bool()?,
        }),
        ApiKey::TxnOffsetCommit => Request::TxnOffsetCommit(txn_offset_commit(&mut r, v)?),
        ApiKey::WriteTxnMarkers => {
            let markers = r.array(16, |r| {
                let producer_id = r.i64()?;
                let producer_epoch = r.i16()?;
                let committed = r.bool()?;
                let topics = r.array(3, |r| {
                    let name = r.string()?;
                    let partitions = r.array(4, |r| r.i32())?;
                    r.tagged_fields()?;
                    Ok((name, partitions))
                })?;
                let coordinator_epoch = r.i32()?;
                if v >= 2 {
                    r.i8()?; // transaction_version
                }
                r.tagged_fields()?;
                Ok(TxnMarker {
                    producer_id,
                    producer_epoch,
                    committed,
                    topics,
                    coordinator_epoch,
                })
            })?;
            Request::WriteTxnMarkers(WriteTxnMarkersRequest { markers })
        }
        ApiKey::DescribeTransactions => Request::DescribeTransactions(DescribeTransactionsRequest {
            transactional_ids: r.array(1, |r| r.string())?,
        }),
        ApiKey::ListTransactions => Request::ListTransactions(ListTransactionsRequest {
            state_filters: r.array(1, |r| r.string())?,
            producer_id_filters: r.array(8, |r| r.i64())?,
            duration_filter_ms: if v >= 1 { r.i64()? } else { -1 },
            transactional_id_pattern: if v >= 2 { r.nullable_string()? } else { None },
        }),
        ApiKey::SaslHandshake => Request::SaslHandshake(SaslHandshakeRequest {
            mechanism: r.string()?,
        }),
        ApiKey::SaslAuthenticate => Request::SaslAuthenticate(SaslAuthenticateRequest {
            auth_bytes: r.nullable_bytes()?.unwrap_or_default(),
        }),
        ApiKey::DescribeUserScramCredentials => {
            let users = match r.nullable_array_len::<String>(2)? {
                None => None,
                Some(n) => Some(
                    (0..n)
                        .map(|_| {
                            let name = r.string()?;
                            r.tagged_fields()?;
                            Ok(name)
                        })
                        .collect::<Result<Vec<String>>>()?,
                ),
            };
            Request::DescribeUserScramCredentials(DescribeUserScramCredentialsRequest { users })
        }
        ApiKey::AlterUserScramCredentials => {
            let deletions = r.array(3, |r| {
                let user = r.string()?;
                let mechanism = r.i8()?;
                r.tagged_fields()?;
                Ok((user, mechanism))
            })?;
            let upsertions = r.array(11, |r| {
                let user = r.string()?;
                let mechanism = r.i8()?;
                let iterations = r.i32()?;
                let salt = r.nullable_bytes()?.unwrap_or_default();
                let salted_password = r.nullable_bytes()?.unwrap_or_default();
                r.tagged_fields()?;
                Ok(ScramUpsertion {
                    user,
                    mechanism,
                    iterations,
                    salt,
                    salted_password,
                })
            })?;
            Request::AlterUserScramCredentials(AlterUserScramCredentialsRequest {
                deletions,
                upsertions,
            })
        }
        ApiKey::DescribeAcls => Request::DescribeAcls(acl_spec(&mut r, true)?),
        ApiKey::CreateAcls => Request::CreateAcls(CreateAclsRequest {
            creations: r.array(7, |r| {
                let spec = acl_spec(r, false)?;
                r.tagged_fields()?;
                Ok(spec)
            })?,
        }),
        ApiKey::DeleteAcls => Request::DeleteAcls(DeleteAclsRequest {
            filters: r.array(7, |r| {
                let spec = acl_spec(r, true)?;
                r.tagged_fields()?;
                Ok(spec)
            })?,
        }),
        ApiKey::DescribeCluster => Request::DescribeCluster(DescribeClusterRequest {
            include_cluster_authorized_operations: r.bool()?,
            endpoint_type: if v >= 1 { r.i8()? } else { 1 },
            include_fenced_brokers: v >= 2 && r.bool()?,
        }),
    };
    // Fetch reads its own: from v15 a follower names itself in one of them.
    if api != ApiKey::Fetch {
        r.tagged_fields()?;
    }
    Ok((header, request))
}

/// Transactional id, producer id and epoch, in that order (AddPartitionsToTxn v0-3,
/// AddOffsetsToTxn, EndTxn).
fn txn_producer(r: &mut Reader) -> Result<TxnProducer> {
    Ok(TxnProducer {
        transactional_id: r.string()?,
        producer_id: r.i64()?,
        producer_epoch: r.i16()?,
    })
}

fn txn_offset_commit(r: &mut Reader, v: i16) -> Result<TxnOffsetCommitRequest> {
    let transactional_id = r.string()?;
    let group_id = r.string()?;
    let producer = TxnProducer {
        transactional_id,
        producer_id: r.i64()?,
        producer_epoch: r.i16()?,
    };
    let (generation_id, member_id, group_instance_id) = if v >= 3 {
        (r.i32()?, r.string()?, r.nullable_string()?)
    } else {
        (-1, String::new(), None)
    };
    let topics = r.array(3, |r| {
        let name = r.string()?;
        let partitions = r.array(14, |r| {
            let partition = r.i32()?;
            let offset = r.i64()?;
            let leader_epoch = if v >= 2 { r.i32()? } else { -1 };
            let metadata = r.nullable_string()?;
            r.tagged_fields()?;
            Ok(TxnOffsetCommitPartition {
                partition,
                offset,
                leader_epoch,
                metadata,
            })
        })?;
        r.tagged_fields()?;
        Ok((name, partitions))
    })?;
    Ok(TxnOffsetCommitRequest {
        producer,
        group_id,
        generation_id,
        member_id,
        group_instance_id,
        topics,
    })
}

fn api_versions(r: &mut Reader, v: i16) -> Result<ApiVersionsRequest> {
    let mut out = ApiVersionsRequest::default();
    if v >= 3 {
        out.client_software_name = r.nullable_string()?;
        out.client_software_version = r.nullable_string()?;
    }
    Ok(out)
}

fn metadata(r: &mut Reader, v: i16) -> Result<MetadataRequest> {
    // A name is at least its length (two bytes, one when flexible); from v10 an id too.
    let min_topic_bytes = if v >= 10 { 16 + 1 + 1 } else { 2 };
    let topics = match r.nullable_array_len::<MetadataTopic>(min_topic_bytes)? {
        None => None,
        // v0: an empty array asks for every topic.
        Some(0) if v == 0 => None,
        Some(n) => {
            let mut topics = Vec::with_capacity(n);
            for _ in 0..n {
                let topic_id = if v >= 10 { Some(r.uuid()?) } else { None };
                let name = if v >= 10 {
                    r.nullable_string()?
                } else {
                    Some(r.string()?)
                };
                r.tagged_fields()?;
                topics.push(MetadataTopic { topic_id, name });
            }
            Some(topics)
        }
    };
    let allow_auto_topic_creation = if v >= 4 { r.bool()? } else { true };
    let include_cluster_authorized_operations = (8..=10).contains(&v) && r.bool()?;
    let include_topic_authorized_operations = v >= 8 && r.bool()?;
    Ok(MetadataRequest {
        topics,
        allow_auto_topic_creation,
        include_cluster_authorized_operations,
        include_topic_authorized_operations,
    })
}

fn produce(r: &mut Reader, v: i16) -> Result<ProduceRequest> {
    let transactional_id = r.nullable_string()?;
    let acks = r.i16()?;
    let timeout_ms = r.i32()?;
    // v13 names each topic by its id (KIP-516), not by its name.
    let min_topic_bytes = if v >= 13 { 16 + 1 + 1 } else { 2 };
    let topics = r.array(min_topic_bytes, |r| {
        let (name, topic_id) = if v >= 13 {
            (String::new(), Some(r.uuid()?))
        } else {
            (r.string()?, None)
        };
        let partitions = r.array(5, |r| {
            let index = r.i32()?;
            let records = r.nullable_bytes()?;
            r.tagged_fields()?;
            Ok(ProducePartition { index, records })
        })?;
        r.tagged_fields()?;
        Ok(ProduceTopic {
            name,
            topic_id,
            partitions,
        })
    })?;
    Ok(ProduceRequest {
        transactional_id,
        acks,
        timeout_ms,
        topics,
    })
}

fn fetch(r: &mut Reader, v: i16) -> Result<FetchRequest> {
    let replica_id = if v <= 14 { r.i32()? } else { -1 };
    let max_wait_ms = r.i32()?;
    let min_bytes = r.i32()?;
    let max_bytes = r.i32()?;
    let isolation_level = r.i8()?;
    let (session_id, session_epoch) = if v >= 7 { (r.i32()?, r.i32()?) } else { (0, -1) };
    let topics = r.array(2, |r| {
        let (name, topic_id) = if v >= 13 {
            (None, Some(r.uuid()?))
        } else {
            (Some(r.string()?), None)
        };
        let partitions = r.array(16, |r| {
            let partition = r.i32()?;
            let current_leader_epoch = if v >= 9 { r.i32()? } else { -1 };
            let fetch_offset = r.i64()?;
            let last_fetched_epoch = if v >= 12 { r.i32()? } else { -1 };
            let log_start_offset = if v >= 5 { r.i64()? } else { -1 };
            let partition_max_bytes = r.i32()?;
            r.tagged_fields()?;
            Ok(FetchPartition {
                partition,
                current_leader_epoch,
                fetch_offset,
                last_fetched_epoch,
                log_start_offset,
                partition_max_bytes,
            })
        })?;
        r.tagged_fields()?;
        Ok(FetchTopic {
            name,
            topic_id,
            partitions,
        })
    })?;
    if v >= 7 {
        // forgotten_topics_data: only meaningful with fetch sessions, which Laminar does
        // not keep (every fetch is a full fetch); read and dropped.
        r.array(2, |r| {
            if v >= 13 {
                r.uuid()?;
            } else {
                r.string()?;
            }
            r.array(4, |r| r.i32())?;
            r.tagged_fields()
        })?;
    }
    if v >= 11 {
        r.string()?; // rack_id
    }
    // From v15 a follower names itself in ReplicaState (tag 1) with its broker epoch, the
    // metadata offset of its registration (KIP-903); tag 0 is the cluster id.
    let (mut replica_id, mut replica_epoch) = (replica_id, -1);
    r.tagged_fields_with(|tag, field| {
        if tag == 1 && v >= 15 {
            replica_id = field.i32()?;
            replica_epoch = field.i64()?;
            field.tagged_fields()?;
        }
        Ok(())
    })?;
    Ok(FetchRequest {
        replica_id,
        replica_epoch,
        max_wait_ms,
        min_bytes,
        max_bytes,
        isolation_level,
        session_id,
        session_epoch,
        topics,
    })
}

fn list_offsets(r: &mut Reader, v: i16) -> Result<ListOffsetsRequest> {
    let replica_id = r.i32()?;
    let isolation_level = if v >= 2 { r.i8()? } else { 0 };
    let topics = r.array(2, |r| {
        let name = r.string()?;
        let partitions = r.array(12, |r| {
            let partition_index = r.i32()?;
            let current_leader_epoch = if v >= 4 { r.i32()? } else { -1 };
            let timestamp = r.i64()?;
            r.tagged_fields()?;
            Ok(ListOffsetsPartition {
                partition_index,
                current_leader_epoch,
                timestamp,
            })
        })?;
        r.tagged_fields()?;
        Ok(ListOffsetsTopic { name, partitions })
    })?;
    // v10's TimeoutMs bounds a lookup in remote (tiered) storage, which Laminar has not
    // (v11 is v10 with one more timestamp value).
    if v >= 10 {
        r.i32()?;
    }
    Ok(ListOffsetsRequest {
        replica_id,
        isolation_level,
        topics,
    })
}

fn create_topics(r: &mut Reader, v: i16) -> Result<CreateTopicsRequest> {
    let topics = r.array(8, |r| {
        let name = r.string()?;
        let num_partitions = r.i32()?;
        let replication_factor = r.i16()?;
        let assignments = r
            .array(5, |r| {
                r.i32()?;
                r.array(4, |r| r.i32())?;
                r.tagged_fields()
            })?
            .len();
        let configs = r.array(2, |r| {
            let name = r.string()?;
            let value = r.nullable_string()?;
            r.tagged_fields()?;
            Ok((name, value))
        })?;
        r.tagged_fields()?;
        Ok(CreatableTopic {
            name,
            num_partitions,
            replication_factor,
            assignments,
            configs,
        })
    })?;
    let timeout_ms = r.i32()?;
    let validate_only = if v >= 1 { r.bool()? } else { false };
    Ok(CreateTopicsRequest {
        topics,
        timeout_ms,
        validate_only,
    })
}

fn delete_topics(r: &mut Reader, v: i16) -> Result<DeleteTopicsRequest> {
    let topics = if v >= 6 {
        r.array(17, |r| {
            let name = r.nullable_string()?;
            let topic_id = r.uuid()?;
            r.tagged_fields()?;
            Ok(MetadataTopic {
                topic_id: Some(topic_id),
                name,
            })
        })?
    } else {
        r.array(1, |r| {
            Ok(MetadataTopic {
                topic_id: None,
                name: Some(r.string()?),
            })
        })?
    };
    let timeout_ms = r.i32()?;
    Ok(DeleteTopicsRequest { topics, timeout_ms })
}

fn init_producer_id(r: &mut Reader, v: i16) -> Result<InitProducerIdRequest> {
    let transactional_id = r.nullable_string()?;
    let transaction_timeout_ms = r.i32()?;
    let (producer_id, producer_epoch) = if v >= 3 { (r.i64()?, r.i16()?) } else { (-1, -1) };
    Ok(InitProducerIdRequest {
        transactional_id,
        transaction_timeout_ms,
        producer_id,
        producer_epoch,
    })
}

fn describe_configs(r: &mut Reader, v: i16) -> Result<DescribeConfigsRequest> {
    let resources = r.array(4, |r| {
        let resource_type = r.i8()?;
        let resource_name = r.string()?;
        let configuration_keys = match r.nullable_array_len::<String>(1)? {
            None => None,
            Some(n) => Some((0..n).map(|_| r.string()).collect::<Result<Vec<_>>>()?),
        };
        r.tagged_fields()?;
        Ok(DescribeConfigsResource {
            resource_type,
            resource_name,
            configuration_keys,
        })
    })?;
    let include_synonyms = if v >= 1 { r.bool()? } else { false };
    let include_documentation = if v >= 3 { r.bool()? } else { false };
    Ok(DescribeConfigsRequest {
        resources,
        include_synonyms,
        include_documentation,
    })
}

fn create_partitions(r: &mut Reader, _v: i16) -> Result<CreatePartitionsRequest> {
    let topics = r.array(6, |r| {
        let name = r.string()?;
        let count = r.i32()?;
        r.array(1, |r| {
            r.array(4, |r| r.i32())?;
            r.tagged_fields()
        })?;
        r.tagged_fields()?;
        Ok((name, count))
    })?;
    let timeout_ms = r.i32()?;
    let validate_only = r.bool()?;
    Ok(CreatePartitionsRequest {
        topics,
        timeout_ms,
        validate_only,
    })
}

fn find_coordinator(r: &mut Reader, v: i16) -> Result<FindCoordinatorRequest> {
    if v >= 4 {
        let key_type = r.i8()?;
        let keys = r.array(1, |r| r.string())?;
        return Ok(FindCoordinatorRequest { key_type, keys });
    }
    let key = r.string()?;
    let key_type = if v >= 1 { r.i8()? } else { 0 };
    Ok(FindCoordinatorRequest {
        key_type,
        keys: vec![key],
    })
}

fn join_group(r: &mut Reader, v: i16) -> Result<JoinGroupRequest> {
    let group_id = r.string()?;
    let session_timeout_ms = r.i32()?;
    let rebalance_timeout_ms = if v >= 1 { r.i32()? } else { session_timeout_ms };
    let member_id = r.string()?;
    let group_instance_id = if v >= 5 { r.nullable_string()? } else { None };
    let protocol_type = r.string()?;
    let protocols = r.array(3, |r| {
        let name = r.string()?;
        let metadata = r.nullable_bytes()?.unwrap_or_default();
        r.tagged_fields()?;
        Ok((name, metadata))
    })?;
    let reason = if v >= 8 { r.nullable_string()? } else { None };
    Ok(JoinGroupRequest {
        group_id,
        session_timeout_ms,
        rebalance_timeout_ms,
        member_id,
        group_instance_id,
        protocol_type,
        protocols,
        reason,
    })
}

fn sync_group(r: &mut Reader, v: i16) -> Result<SyncGroupRequest> {
    let group_id = r.string()?;
    let generation_id = r.i32()?;
    let member_id = r.string()?;
    let group_instance_id = if v >= 3 { r.nullable_string()? } else { None };
    let (protocol_type, protocol_name) = if v >= 5 {
        (r.nullable_string()?, r.nullable_string()?)
    } else {
        (None, None)
    };
    let assignments = r.array(3, |r| {
        let member = r.string()?;
        let assignment = r.nullable_bytes()?.unwrap_or_default();
        r.tagged_fields()?;
        Ok((member, assignment))
    })?;
    Ok(SyncGroupRequest {
        group_id,
        generation_id,
        member_id,
        group_instance_id,
        protocol_type,
        protocol_name,
        assignments,
    })
}

fn heartbeat(r: &mut Reader, v: i16) -> Result<HeartbeatRequest> {
    let group_id = r.string()?;
    let generation_id = r.i32()?;
    let member_id = r.string()?;
    let group_instance_id = if v >= 3 { r.nullable_string()? } else { None };
    Ok(HeartbeatRequest {
        group_id,
        generation_id,
        member_id,
        group_instance_id,
    })
}

fn leave_group(r: &mut Reader, v: i16) -> Result<LeaveGroupRequest> {
    let group_id = r.string()?;
    let members = if v >= 3 {
        r.array(3, |r| {
            let member_id = r.string()?;
            let instance = r.nullable_string()?;
            if v >= 5 {
                r.nullable_string()?; // reason
            }
            r.tagged_fields()?;
            Ok((member_id, instance))
        })?
    } else {
        vec![(r.string()?, None)]
    };
    Ok(LeaveGroupRequest { group_id, members })
}

fn offset_commit(r: &mut Reader, v: i16) -> Result<OffsetCommitRequest> {
    let group_id = r.string()?;
    let generation_id = r.i32()?;
    let member_id = r.string()?;
    let group_instance_id = if v >= 7 { r.nullable_string()? } else { None };
    if (2..=4).contains(&v) {
        r.i64()?; // retention_time_ms: ignored, as Kafka 2.1+ does
    }
    let topics = r.array(2, |r| {
        let name = r.string()?;
        let partitions = r.array(14, |r| {
            let p = r.i32()?;
            let offset = r.i64()?;
            let epoch = if v >= 6 { r.i32()? } else { -1 };
            let metadata = r.nullable_string()?;
            r.tagged_fields()?;
            Ok((p, offset, epoch, metadata))
        })?;
        r.tagged_fields()?;
        Ok(OffsetCommitTopic { name, partitions })
    })?;
    Ok(OffsetCommitRequest {
        group_id,
        generation_id,
        member_id,
        group_instance_id,
        topics,
    })
}

/// A nullable array of `(topic, [partition])`.
fn fetch_topics(r: &mut Reader) -> Result<Option<TopicPartitions>> {
    let Some(n) = r.nullable_array_len::<(String, Vec<i32>)>(2 + 4)? else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.string()?;
        let partitions = r.array(4, |r| r.i32())?;
        r.tagged_fields()?;
        out.push((name, partitions));
    }
    Ok(Some(out))
}

fn offset_fetch(r: &mut Reader, v: i16) -> Result<OffsetFetchRequest> {
    if v >= 8 {
        let groups = r.array(3, |r| {
            let group_id = r.string()?;
            if v >= 9 {
                r.nullable_string()?; // member_id
                r.i32()?; // member_epoch
            }
            let topics = fetch_topics(r)?;
            r.tagged_fields()?;
            Ok(OffsetFetchGroup { group_id, topics })
        })?;
        let require_stable = r.bool()?;
        return Ok(OffsetFetchRequest {
            groups,
            require_stable,
        });
    }
    let group_id = r.string()?;
    let topics = fetch_topics(r)?;
    let require_stable = if v >= 7 { r.bool()? } else { false };
    Ok(OffsetFetchRequest {
        groups: vec![OffsetFetchGroup { group_id, topics }],
        require_stable,
    })
}

fn alter_configs(r: &mut Reader, incremental: bool) -> Result<AlterConfigsRequest> {
    let resources = r.array(4, |r| {
        let resource_type = r.i8()?;
        let resource_name = r.string()?;
        let configs = r.array(3, |r| {
            let name = r.string()?;
            let operation = if incremental { r.i8()? } else { 0 };
            let value = r.nullable_string()?;
            r.tagged_fields()?;
            Ok(AlterableConfig {
                name,
                operation,
                value,
            })
        })?;
        r.tagged_fields()?;
        Ok(AlterConfigsResource {
            resource_type,
            resource_name,
            configs,
        })
    })?;
    let validate_only = r.bool()?;
    Ok(AlterConfigsRequest {
        incremental,
        resources,
        validate_only,
    })
}

fn offset_for_leader_epoch(r: &mut Reader, v: i16) -> Result<OffsetForLeaderEpochRequest> {
    let replica_id = if v >= 3 { r.i32()? } else { -2 };
    let topics = r.array(3, |r| {
        let name = r.string()?;
        let partitions = r.array(12, |r| {
            let p = OffsetForLeaderEpochPartition {
                partition: r.i32()?,
                current_leader_epoch: r.i32()?,
                leader_epoch: r.i32()?,
            };
            r.tagged_fields()?;
            Ok(p)
        })?;
        r.tagged_fields()?;
        Ok(OffsetForLeaderEpochTopic { name, partitions })
    })?;
    Ok(OffsetForLeaderEpochRequest { replica_id, topics })
}

fn list_groups(r: &mut Reader, v: i16) -> Result<ListGroupsRequest> {
    let states_filter = if v >= 4 {
        r.array(1, |r| r.string())?
    } else {
        Vec::new()
    };
    if v >= 5 {
        r.array(1, |r| r.string())?; // types_filter
    }
    Ok(ListGroupsRequest { states_filter })
}

fn describe_groups(r: &mut Reader, v: i16) -> Result<DescribeGroupsRequest> {
    let groups = r.array(1, |r| r.string())?;
    let include_authorized_operations = v >= 3 && r.bool()?;
    Ok(DescribeGroupsRequest {
        groups,
        include_authorized_operations,
    })
}

fn offset_delete(r: &mut Reader) -> Result<OffsetDeleteRequest> {
    let group_id = r.string()?;
    let topics = r.array(6, |r| {
        let name = r.string()?;
        let partitions = r.array(4, |r| r.i32())?;
        Ok((name, partitions))
    })?;
    Ok(OffsetDeleteRequest { group_id, topics })
}

fn describe_client_quotas(r: &mut Reader) -> Result<DescribeClientQuotasRequest> {
    let components = r.array(4, |r| {
        let f = QuotaFilter {
            entity_type: r.string()?,
            match_type: r.i8()?,
            name: r.nullable_string()?,
        };
        r.tagged_fields()?;
        Ok(f)
    })?;
    let strict = r.bool()?;
    Ok(DescribeClientQuotasRequest { components, strict })
}

fn alter_client_quotas(r: &mut Reader) -> Result<AlterClientQuotasRequest> {
    let entries = r.array(2, |r| {
        let entity = r.array(3, |r| {
            let e = (r.string()?, r.nullable_string()?);
            r.tagged_fields()?;
            Ok(e)
        })?;
        let ops = r.array(10, |r| {
            let op = QuotaOp {
                key: r.string()?,
                value: r.f64()?,
                remove: r.bool()?,
            };
            r.tagged_fields()?;
            Ok(op)
        })?;
        r.tagged_fields()?;
        Ok((entity, ops))
    })?;
    let validate_only = r.bool()?;
    Ok(AlterClientQuotasRequest {
        entries,
        validate_only,
    })
}

/// An ACL binding (CreateAcls: names are not null) or filter (DescribeAcls, DeleteAcls:
/// null names match anything), v1+ (with its pattern type).
fn acl_spec(r: &mut Reader, filter: bool) -> Result<AclFilterSpec> {
    let resource_type = r.i8()?;
    let name = if filter {
        r.nullable_string()?
    } else {
        Some(r.string()?)
    };
    let pattern_type = r.i8()?;
    let principal = if filter {
        r.nullable_string()?
    } else {
        Some(r.string()?)
    };
    let host = if filter {
        r.nullable_string()?
    } else {
        Some(r.string()?)
    };
    Ok(AclFilterSpec {
        resource_type,
        name,
        pattern_type,
        principal,
        host,
        operation: r.i8()?,
        permission: r.i8()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn encoded<R: Encodable>(key: ApiKey, version: i16, req: &R) -> Bytes {
        let mut header = kafka_protocol::messages::RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.client_id = Some(StrBytes::from_static_str("t"));
        let header_version = kafka_protocol::messages::ApiKey::try_from(key as i16)
            .unwrap()
            .request_header_version(version);
        let mut buf = BytesMut::new();
        header.encode(&mut buf, header_version).unwrap();
        req.encode(&mut buf, version).unwrap();
        buf.freeze()
    }

    /// A follower names itself in the body up to v14 and in ReplicaState from v15, with its
    /// broker epoch; a consumer is -1 either way.
    #[test]
    fn fetch_replica_from_the_body_or_replica_state() {
        use kafka_protocol::messages::{BrokerId, FetchRequest as KFetch};
        for v in [12, 14, 15, 16] {
            let mut k = KFetch::default();
            if v >= 15 {
                k.replica_state.replica_id = BrokerId(3);
                k.replica_state.replica_epoch = 42;
            } else {
                k.replica_id = BrokerId(3);
            }
            k.cluster_id = Some(StrBytes::from_static_str("c"));
            let (_, req) = decode(encoded(ApiKey::Fetch, v, &k)).unwrap();
            let Request::Fetch(f) = req else {
                panic!("not a fetch")
            };
            assert_eq!(f.replica_id, 3, "v{v}");
            assert_eq!(f.replica_epoch, if v >= 15 { 42 } else { -1 }, "v{v}");
            let (_, req) = decode(encoded(ApiKey::Fetch, v, &KFetch::default())).unwrap();
            let Request::Fetch(f) = req else {
                panic!("not a fetch")
            };
            assert_eq!((f.replica_id, f.replica_epoch), (-1, -1), "v{v}");
        }
    }
}
