//! One module per Kafka API. Each `handle` takes the request version and correlation id and
//! returns the encoded response. Version ranges are in `laminar_protocol::API_TABLE`.

pub mod acls;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod cluster_refused;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod not_coordinator;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod refused;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod write_txn_markers;

use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

pub type Encoded = Result<bytes::Bytes, laminar_protocol::ProtocolError>;

/// `request` refused as a whole by the authorization step ([`crate::security::step`]) with
/// `code`, in its own shape, nothing done: the cluster's admin APIs answer
/// CLUSTER_AUTHORIZATION_FAILED, the group APIs their group's (or transactional id's) code.
pub fn refused_whole(
    request: &laminar_protocol::requests::Request,
    version: i16,
    correlation_id: i32,
    code: laminar_protocol::ErrorCode,
) -> Encoded {
    if code == laminar_protocol::ErrorCode::ClusterAuthorizationFailed {
        return cluster_refused::refuse(request, version, correlation_id);
    }
    not_coordinator::refuse(request, version, correlation_id, code)
        .unwrap_or_else(|| unreachable!("{request:?}: the authorization step refuses it whole with {code:?}"))
}

pub fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

pub fn topic_name(s: &str) -> TopicName {
    TopicName(sb(s))
}

pub fn uuid(id: [u8; 16]) -> uuid::Uuid {
    uuid::Uuid::from_bytes(id)
}
