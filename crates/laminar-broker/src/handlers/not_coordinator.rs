//! In a cluster, a group request that reaches a broker which is not the group coordinator
//! (the leader of `__consumer_offsets-0`), or one that is still loading the group state,
//! is answered with NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS in the API's own shape,
//! as Kafka answers it: the client finds the coordinator again, or retries.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    DeleteGroupsResponse, DescribeGroupsResponse, GroupId, HeartbeatResponse, JoinGroupResponse,
    LeaveGroupResponse, OffsetCommitResponse, OffsetDeleteResponse, OffsetFetchResponse, SyncGroupResponse,
    TxnOffsetCommitResponse,
};
use laminar_protocol::requests::Request;
use laminar_protocol::{responses, ApiKey, ErrorCode};

use super::{sb, topic_name, Encoded};

/// The refusal of `request` with `code`, or `None` if it is not a request for the group
/// coordinator.
pub fn refuse(request: &Request, version: i16, correlation_id: i32, code: ErrorCode) -> Option<Encoded> {
    let code = code.code();
    let encoded = match request {
        Request::JoinGroup(_) => {
            let mut r = JoinGroupResponse::default();
            r.error_code = code;
            r.generation_id = -1;
            responses::encode(ApiKey::JoinGroup, version, correlation_id, &r)
        }
        Request::SyncGroup(_) => {
            let mut r = SyncGroupResponse::default();
            r.error_code = code;
            responses::encode(ApiKey::SyncGroup, version, correlation_id, &r)
        }
        Request::Heartbeat(_) => {
            let mut r = HeartbeatResponse::default();
            r.error_code = code;
            responses::encode(ApiKey::Heartbeat, version, correlation_id, &r)
        }
        Request::LeaveGroup(_) => {
            let mut r = LeaveGroupResponse::default();
            r.error_code = code;
            responses::encode(ApiKey::LeaveGroup, version, correlation_id, &r)
        }
        Request::OffsetCommit(req) => {
            let mut r = OffsetCommitResponse::default();
            r.topics = req
                .topics
                .iter()
                .map(|t| {
                    let mut out = OffsetCommitResponseTopic::default();
                    out.name = topic_name(&t.name);
                    out.partitions = t
                        .partitions
                        .iter()
                        .map(|(p, ..)| {
                            let mut o = OffsetCommitResponsePartition::default();
                            o.partition_index = *p;
                            o.error_code = code;
                            o
                        })
                        .collect();
                    out
                })
                .collect();
            responses::encode(ApiKey::OffsetCommit, version, correlation_id, &r)
        }
        Request::TxnOffsetCommit(req) => {
            let mut r = TxnOffsetCommitResponse::default();
            r.topics = req
                .topics
                .iter()
                .map(|(name, partitions)| {
                    let mut out = TxnOffsetCommitResponseTopic::default();
                    out.name = topic_name(name);
                    out.partitions = partitions
                        .iter()
                        .map(|p| {
                            let mut o = TxnOffsetCommitResponsePartition::default();
                            o.partition_index = p.partition;
                            o.error_code = code;
                            o
                        })
                        .collect();
                    out
                })
                .collect();
            responses::encode(ApiKey::TxnOffsetCommit, version, correlation_id, &r)
        }
        Request::OffsetFetch(req) => {
            let mut r = OffsetFetchResponse::default();
            if version >= 8 {
                r.groups = req
                    .groups
                    .iter()
                    .map(|g| {
                        let mut out = OffsetFetchResponseGroup::default();
                        out.group_id = GroupId(sb(&g.group_id));
                        out.error_code = code;
                        out
                    })
                    .collect();
            } else {
                if version >= 2 {
                    r.error_code = code;
                }
                // Before v2 the error is per partition.
                r.topics = req
                    .groups
                    .first()
                    .and_then(|g| g.topics.as_ref())
                    .map(|topics| {
                        topics
                            .iter()
                            .map(|(name, partitions)| {
                                let mut out = OffsetFetchResponseTopic::default();
                                out.name = topic_name(name);
                                out.partitions = partitions
                                    .iter()
                                    .map(|p| {
                                        let mut o = OffsetFetchResponsePartition::default();
                                        o.partition_index = *p;
                                        o.committed_offset = -1;
                                        o.error_code = code;
                                        o
                                    })
                                    .collect();
                                out
                            })
                            .collect()
                    })
                    .unwrap_or_default();
            }
            responses::encode(ApiKey::OffsetFetch, version, correlation_id, &r)
        }
        Request::DescribeGroups(req) => {
            let mut r = DescribeGroupsResponse::default();
            r.groups = req
                .groups
                .iter()
                .map(|g| {
                    let mut out = DescribedGroup::default();
                    out.group_id = GroupId(sb(g));
                    out.error_code = code;
                    out
                })
                .collect();
            responses::encode(ApiKey::DescribeGroups, version, correlation_id, &r)
        }
        Request::DeleteGroups(req) => {
            let mut r = DeleteGroupsResponse::default();
            r.results = req
                .groups
                .iter()
                .map(|g| {
                    let mut out = DeletableGroupResult::default();
                    out.group_id = GroupId(sb(g));
                    out.error_code = code;
                    out
                })
                .collect();
            responses::encode(ApiKey::DeleteGroups, version, correlation_id, &r)
        }
        Request::OffsetDelete(_) => {
            let mut r = OffsetDeleteResponse::default();
            r.error_code = code;
            responses::encode(ApiKey::OffsetDelete, version, correlation_id, &r)
        }
        _ => return None,
    };
    Some(encoded)
}
