//! The cluster's admin APIs refused CLUSTER_AUTHORIZATION_FAILED in their own shape, nothing
//! done: the authorization step ([`crate::security::step`]) states which operation on the
//! cluster each needs.

use kafka_protocol::messages::alter_client_quotas_response::EntryData;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterClientQuotasResponse, AlterPartitionReassignmentsResponse, AlterUserScramCredentialsResponse,
    DescribeClientQuotasResponse, DescribeLogDirsResponse, DescribeUserScramCredentialsResponse,
    ElectLeadersResponse, ListPartitionReassignmentsResponse,
};
use laminar_protocol::requests::Request;
use laminar_protocol::{responses, ApiKey, ErrorCode};

use super::{sb, Encoded};

/// `request` refused CLUSTER_AUTHORIZATION_FAILED.
pub fn refuse(request: &Request, version: i16, correlation_id: i32) -> Encoded {
    let code = ErrorCode::ClusterAuthorizationFailed.code();
    let message = Some(sb("Cluster authorization failed."));
    match request {
        Request::ElectLeaders(req) => {
            // As Kafka: each partition asked for answers the refusal (v0 has no top-level
            // error code to carry it).
            use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
            let mut r = ElectLeadersResponse::default();
            if version >= 1 {
                r.error_code = code;
            }
            r.replica_election_results = req
                .topic_partitions
                .iter()
                .flatten()
                .map(|(topic, partitions)| {
                    let mut t = ReplicaElectionResult::default();
                    t.topic = super::topic_name(topic);
                    t.partition_result = partitions
                        .iter()
                        .map(|p| {
                            let mut pr = PartitionResult::default();
                            pr.partition_id = *p;
                            pr.error_code = code;
                            pr.error_message = message.clone();
                            pr
                        })
                        .collect();
                    t
                })
                .collect();
            responses::encode(ApiKey::ElectLeaders, version, correlation_id, &r)
        }
        Request::AlterPartitionReassignments(_) => {
            let mut r = AlterPartitionReassignmentsResponse::default();
            r.error_code = code;
            r.error_message = message;
            responses::encode(ApiKey::AlterPartitionReassignments, version, correlation_id, &r)
        }
        Request::ListPartitionReassignments(_) => {
            let mut r = ListPartitionReassignmentsResponse::default();
            r.error_code = code;
            r.error_message = message;
            responses::encode(ApiKey::ListPartitionReassignments, version, correlation_id, &r)
        }
        Request::DescribeLogDirs(_) => {
            // Before v3 there is no error code: nothing is described.
            let mut r = DescribeLogDirsResponse::default();
            r.error_code = code;
            responses::encode(ApiKey::DescribeLogDirs, version, correlation_id, &r)
        }
        Request::DescribeClientQuotas(_) => {
            let mut r = DescribeClientQuotasResponse::default();
            r.error_code = code;
            r.error_message = message;
            responses::encode(ApiKey::DescribeClientQuotas, version, correlation_id, &r)
        }
        Request::AlterClientQuotas(req) => {
            let mut r = AlterClientQuotasResponse::default();
            r.entries = req
                .entries
                .iter()
                .map(|_| {
                    let mut e = EntryData::default();
                    e.error_code = code;
                    e.error_message = message.clone();
                    e
                })
                .collect();
            responses::encode(ApiKey::AlterClientQuotas, version, correlation_id, &r)
        }
        Request::DescribeUserScramCredentials(_) => {
            let mut r = DescribeUserScramCredentialsResponse::default();
            r.error_code = code;
            r.error_message = message;
            responses::encode(ApiKey::DescribeUserScramCredentials, version, correlation_id, &r)
        }
        Request::AlterUserScramCredentials(req) => {
            let mut r = AlterUserScramCredentialsResponse::default();
            let mut users: Vec<&str> = req
                .deletions
                .iter()
                .map(|(u, _)| u.as_str())
                .chain(req.upsertions.iter().map(|u| u.user.as_str()))
                .collect();
            users.sort_unstable();
            users.dedup();
            r.results = users
                .into_iter()
                .map(|u| {
                    let mut x = AlterUserScramCredentialsResult::default();
                    x.user = sb(u);
                    x.error_code = code;
                    x.error_message = message.clone();
                    x
                })
                .collect();
            responses::encode(ApiKey::AlterUserScramCredentials, version, correlation_id, &r)
        }
        // A follower's fetch: every partition asked for, and (v7+) the response, refused.
        Request::Fetch(req) => {
            use laminar_protocol::responses::{encode_fetch, FetchResponse, FetchTopicResponse};
            let resp: FetchResponse<crate::response::RecordsFile> = FetchResponse {
                throttle_time_ms: 0,
                error_code: code,
                session_id: 0,
                topics: req
                    .topics
                    .iter()
                    .map(|t| FetchTopicResponse {
                        name: t.name.clone().unwrap_or_default(),
                        topic_id: t.topic_id.unwrap_or_default(),
                        partitions: t
                            .partitions
                            .iter()
                            .map(|p| {
                                laminar_data::read::unread(p.partition, ErrorCode::ClusterAuthorizationFailed)
                            })
                            .collect(),
                    })
                    .collect(),
                node_endpoints: Vec::new(),
            };
            let mut bytes = bytes::BytesMut::new();
            for chunk in encode_fetch(version, correlation_id, resp).chunks {
                match chunk {
                    laminar_protocol::responses::Chunk::Bytes(b) => bytes.extend_from_slice(&b),
                    laminar_protocol::responses::Chunk::File(_) => unreachable!("a refusal reads no records"),
                }
            }
            Ok(bytes.freeze())
        }
        // A partition leader's check of its producers' transactions (v4+): brokers only.
        Request::AddPartitionsToTxn(_) => {
            let mut r = kafka_protocol::messages::AddPartitionsToTxnResponse::default();
            r.error_code = code;
            responses::encode(ApiKey::AddPartitionsToTxn, version, correlation_id, &r)
        }
        other => unreachable!("{other:?} needs no operation on the cluster"),
    }
}
