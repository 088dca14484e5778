//! The requests Laminar serves, decoded into plain structs (see `decode`).

use bytes::Bytes;

pub type Uuid = [u8; 16];

/// Topics and their partitions, as group requests name them.
pub type TopicPartitions = Vec<(String, Vec<i32>)>;

#[derive(Debug, Clone, PartialEq)]
pub struct RequestHeader {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    ApiVersions(ApiVersionsRequest),
    Metadata(MetadataRequest),
    Produce(ProduceRequest),
    Fetch(FetchRequest),
    ListOffsets(ListOffsetsRequest),
    CreateTopics(CreateTopicsRequest),
    DeleteTopics(DeleteTopicsRequest),
    InitProducerId(InitProducerIdRequest),
    DescribeConfigs(DescribeConfigsRequest),
    CreatePartitions(CreatePartitionsRequest),
    FindCoordinator(FindCoordinatorRequest),
    JoinGroup(JoinGroupRequest),
    SyncGroup(SyncGroupRequest),
    Heartbeat(HeartbeatRequest),
    LeaveGroup(LeaveGroupRequest),
    OffsetCommit(OffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    ListGroups(ListGroupsRequest),
    DescribeGroups(DescribeGroupsRequest),
    DeleteGroups(DeleteGroupsRequest),
    OffsetDelete(OffsetDeleteRequest),
    DescribeClientQuotas(DescribeClientQuotasRequest),
    AlterClientQuotas(AlterClientQuotasRequest),
    DescribeLogDirs(DescribeLogDirsRequest),
    DescribeCluster(DescribeClusterRequest),
    OffsetForLeaderEpoch(OffsetForLeaderEpochRequest),
    AlterConfigs(AlterConfigsRequest),
    ElectLeaders(ElectLeadersRequest),
    AlterPartitionReassignments(AlterPartitionReassignmentsRequest),
    ListPartitionReassignments(ListPartitionReassignmentsRequest),
    DescribeProducers(DescribeProducersRequest),
    DeleteRecords(DeleteRecordsRequest),
    AddPartitionsToTxn(AddPartitionsToTxnRequest),
    AddOffsetsToTxn(AddOffsetsToTxnRequest),
    EndTxn(EndTxnRequest),
    TxnOffsetCommit(TxnOffsetCommitRequest),
    WriteTxnMarkers(WriteTxnMarkersRequest),
    DescribeTransactions(DescribeTransactionsRequest),
    ListTransactions(ListTransactionsRequest),
    SaslHandshake(SaslHandshakeRequest),
    SaslAuthenticate(SaslAuthenticateRequest),
    DescribeUserScramCredentials(DescribeUserScramCredentialsRequest),
    AlterUserScramCredentials(AlterUserScramCredentialsRequest),
    DescribeAcls(AclFilterSpec),
    CreateAcls(CreateAclsRequest),
    DeleteAcls(DeleteAclsRequest),
}

/// An ACL binding or filter as the wire carries it: Kafka's numbers for the resource type,
/// pattern type, operation and permission; `None` names match anything (filters only).
#[derive(Debug, Clone, PartialEq)]
pub struct AclFilterSpec {
    pub resource_type: i8,
    pub name: Option<String>,
    pub pattern_type: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: i8,
    pub permission: i8,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateAclsRequest {
    pub creations: Vec<AclFilterSpec>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeleteAclsRequest {
    pub filters: Vec<AclFilterSpec>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SaslHandshakeRequest {
    pub mechanism: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SaslAuthenticateRequest {
    pub auth_bytes: Bytes,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DescribeUserScramCredentialsRequest {
    /// `None`: every user.
    pub users: Option<Vec<String>>,
}

/// One SCRAM credential to set: the client salts and hashes the password itself
/// (`salted_password` is PBKDF2 of it), so the password never reaches the broker.
#[derive(Debug, Clone, PartialEq)]
pub struct ScramUpsertion {
    pub user: String,
    /// 1: SCRAM-SHA-256, 2: SCRAM-SHA-512.
    pub mechanism: i8,
    pub iterations: i32,
    pub salt: Bytes,
    pub salted_password: Bytes,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AlterUserScramCredentialsRequest {
    /// (user, mechanism).
    pub deletions: Vec<(String, i8)>,
    pub upsertions: Vec<ScramUpsertion>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WriteTxnMarkersRequest {
    pub markers: Vec<TxnMarker>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TxnMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// true: commit, false: abort.
    pub committed: bool,
    pub topics: TopicPartitions,
    pub coordinator_epoch: i32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DescribeTransactionsRequest {
    pub transactional_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ListTransactionsRequest {
    pub state_filters: Vec<String>,
    pub producer_id_filters: Vec<i64>,
    /// v1+: only transactions running longer than this (ms); -1: all.
    pub duration_filter_ms: i64,
    /// v2+: a regular expression the transactional id must match.
    pub transactional_id_pattern: Option<String>,
}

/// The producer a transactional request speaks for.
#[derive(Debug, Clone, PartialEq)]
pub struct TxnProducer {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// AddPartitionsToTxn: v0-3 a client's, one transaction; v4+ a broker's, several, each
/// maybe only asking whether its partitions are in the transaction (KIP-890).
#[derive(Debug, Clone, PartialEq)]
pub struct AddPartitionsToTxnRequest {
    pub transactions: Vec<TxnPartitions>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TxnPartitions {
    pub producer: TxnProducer,
    /// v4+: check, add nothing.
    pub verify_only: bool,
    pub topics: TopicPartitions,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AddOffsetsToTxnRequest {
    pub producer: TxnProducer,
    pub group_id: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EndTxnRequest {
    pub producer: TxnProducer,
    pub committed: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TxnOffsetCommitRequest {
    pub producer: TxnProducer,
    pub group_id: String,
    /// From v3 (KIP-447): the consumer's generation and member, checked by the group.
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub topics: Vec<(String, Vec<TxnOffsetCommitPartition>)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TxnOffsetCommitPartition {
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FindCoordinatorRequest {
    /// 0: group, 1: transaction.
    pub key_type: i8,
    pub keys: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JoinGroupRequest {
    pub group_id: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SyncGroupRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LeaveGroupRequest {
    pub group_id: String,
    /// `(member_id, group_instance_id)`; one entry built from `member_id` before v3.
    pub members: Vec<(String, Option<String>)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OffsetCommitRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub topics: Vec<OffsetCommitTopic>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OffsetCommitTopic {
    pub name: String,
    /// `(partition, offset, leader_epoch, metadata)`.
    pub partitions: Vec<(i32, i64, i32, Option<String>)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OffsetFetchGroup {
    pub group_id: String,
    /// `None`: every partition the group has committed.
    pub topics: Option<TopicPartitions>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OffsetFetchRequest {
    /// One group before v8; one or more from v8.
    pub groups: Vec<OffsetFetchGroup>,
    pub require_stable: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DescribeLogDirsRequest {
    /// `None`: every topic.
    pub topics: Option<TopicPartitions>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ElectLeadersRequest {
    /// v1+: 0 preferred, 1 unclean (v0 is preferred).
    pub election_type: i8,
    /// `None`: every partition.
    pub topic_partitions: Option<TopicPartitions>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DescribeProducersRequest {
    pub topics: TopicPartitions,
}

/// DeleteRecords: per topic, (partition, offset) pairs; every record below the offset goes
/// away. Offset -1 means the high watermark.
#[derive(Debug, Clone, PartialEq)]
pub struct DeleteRecordsRequest {
    pub topics: Vec<(String, Vec<(i32, i64)>)>,
    pub timeout_ms: i32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AlterPartitionReassignmentsRequest {
    pub timeout_ms: i32,
    /// v1+ (KIP-860): `false` refuses a move that changes a partition's replica count.
    pub allow_replication_factor_change: bool,
    /// Per topic, per partition: the target replicas, or `None` to cancel a move.
    pub topics: Vec<(String, Vec<PartitionMove>)>,
}

/// A partition and the replicas it should move to (`None`: cancel its move).
pub type PartitionMove = (i32, Option<Vec<i32>>);

#[derive(Debug, Clone, PartialEq)]
pub struct ListPartitionReassignmentsRequest {
    /// `None`: every partition.
    pub topics: Option<TopicPartitions>,
}

/// AlterConfigs and IncrementalAlterConfigs: one request type, told apart by `incremental`.
#[derive(Debug, Clone, PartialEq)]
pub struct AlterConfigsRequest {
    /// IncrementalAlterConfigs: each entry is an operation on one config. AlterConfigs: the
    /// entries replace the resource's whole set of configs.
    pub incremental: bool,
    pub resources: Vec<AlterConfigsResource>,
    pub validate_only: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AlterConfigsResource {
    /// Kafka's resource types: 2 topic, 4 broker, 8 broker logger.
    pub resource_type: i8,
    pub resource_name: String,
    pub configs: Vec<AlterableConfig>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AlterableConfig {
    pub name: String,
    /// IncrementalAlterConfigs' operation: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT; always 0 (SET)
    /// for AlterConfigs.
    pub operation: i8,
    pub value: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OffsetForLeaderEpochRequest {
    /// -1 for a consumer, a broker id for a follower (v3+; -2 before, "not given").
    pub replica_id: i32,
    pub topics: Vec<OffsetForLeaderEpochTopic>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OffsetForLeaderEpochTopic {
    pub name: String,
    pub partitions: Vec<OffsetForLeaderEpochPartition>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OffsetForLeaderEpochPartition {
    pub partition: i32,
    /// The epoch the client believes the leader has; -1 skips the check.
    pub current_leader_epoch: i32,
    /// The epoch whose end offset is asked for.
    pub leader_epoch: i32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DescribeClusterRequest {
    pub include_cluster_authorized_operations: bool,
    /// v1+: 1 for brokers, 2 for controllers (KIP-919).
    pub endpoint_type: i8,
    /// v2+: list fenced brokers too.
    pub include_fenced_brokers: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ListGroupsRequest {
    pub states_filter: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DescribeGroupsRequest {
    pub groups: Vec<String>,
    /// v3+: report what the principal may do with each group.
    pub include_authorized_operations: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeleteGroupsRequest {
    pub groups: Vec<String>,
}

/// A quota entity: (entity type, entity name), where a `None` name is the type's default.
pub type QuotaEntity = Vec<(String, Option<String>)>;

#[derive(Debug, Clone, PartialEq)]
pub struct QuotaFilter {
    pub entity_type: String,
    /// 0: exactly `name`; 1: the default entity; 2: any named entity.
    pub match_type: i8,
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DescribeClientQuotasRequest {
    pub components: Vec<QuotaFilter>,
    pub strict: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct QuotaOp {
    pub key: String,
    pub value: f64,
    pub remove: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AlterClientQuotasRequest {
    pub entries: Vec<(QuotaEntity, Vec<QuotaOp>)>,
    pub validate_only: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OffsetDeleteRequest {
    pub group_id: String,
    pub topics: TopicPartitions,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ApiVersionsRequest {
    pub client_software_name: Option<String>,
    pub client_software_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct MetadataRequest {
    /// `None`: every topic.
    pub topics: Option<Vec<MetadataTopic>>,
    pub allow_auto_topic_creation: bool,
    /// v8-10: report what the principal may do with the cluster.
    pub include_cluster_authorized_operations: bool,
    /// v8+: report what the principal may do with each topic.
    pub include_topic_authorized_operations: bool,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct MetadataTopic {
    pub topic_id: Option<Uuid>,
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProduceRequest {
    pub transactional_id: Option<String>,
    pub acks: i16,
    pub timeout_ms: i32,
    pub topics: Vec<ProduceTopic>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProduceTopic {
    /// Empty in v13 until the broker resolves `topic_id`.
    pub name: String,
    /// v13+: the topic's id, which names it instead of its name.
    pub topic_id: Option<[u8; 16]>,
    pub partitions: Vec<ProducePartition>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProducePartition {
    pub index: i32,
    pub records: Option<Bytes>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FetchRequest {
    /// A follower's broker id (-1 from a consumer): up to v14 in the request's body, from v15
    /// in its ReplicaState tagged field.
    pub replica_id: i32,
    /// A follower's broker epoch (v15+, KIP-903): the metadata offset at which it last
    /// registered; -1 when not given.
    pub replica_epoch: i64,
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub isolation_level: i8,
    pub session_id: i32,
    pub session_epoch: i32,
    pub topics: Vec<FetchTopic>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FetchTopic {
    /// Set up to v12.
    pub name: Option<String>,
    /// Set from v13.
    pub topic_id: Option<Uuid>,
    pub partitions: Vec<FetchPartition>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FetchPartition {
    pub partition: i32,
    pub current_leader_epoch: i32,
    pub fetch_offset: i64,
    /// v12+: the epoch of the last batch the fetcher has (a follower's), -1 if not given.
    pub last_fetched_epoch: i32,
    pub log_start_offset: i64,
    pub partition_max_bytes: i32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ListOffsetsRequest {
    pub replica_id: i32,
    pub isolation_level: i8,
    pub topics: Vec<ListOffsetsTopic>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ListOffsetsTopic {
    pub name: String,
    pub partitions: Vec<ListOffsetsPartition>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ListOffsetsPartition {
    pub partition_index: i32,
    pub current_leader_epoch: i32,
    pub timestamp: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateTopicsRequest {
    pub topics: Vec<CreatableTopic>,
    pub timeout_ms: i32,
    pub validate_only: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreatableTopic {
    pub name: String,
    pub num_partitions: i32,
    pub replication_factor: i16,
    pub assignments: usize,
    pub configs: Vec<(String, Option<String>)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeleteTopicsRequest {
    pub topics: Vec<MetadataTopic>,
    pub timeout_ms: i32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct InitProducerIdRequest {
    pub transactional_id: Option<String>,
    pub transaction_timeout_ms: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DescribeConfigsRequest {
    pub resources: Vec<DescribeConfigsResource>,
    pub include_synonyms: bool,
    pub include_documentation: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DescribeConfigsResource {
    pub resource_type: i8,
    pub resource_name: String,
    pub configuration_keys: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreatePartitionsRequest {
    pub topics: Vec<(String, i32)>,
    pub timeout_ms: i32,
    pub validate_only: bool,
}
