//! Kafka's error codes, as the wire carries them: one enum, so that a code is a type and not a
//! number, and a name is spelled once. Only the codes Laminar answers with are here.

/// A Kafka error code (Kafka's `org.apache.kafka.common.protocol.Errors`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(i16)]
pub enum ErrorCode {
    /// An unexpected failure on the broker (a bug), as Kafka answers an unexpected exception.
    UnknownServerError = -1,
    #[default]
    None = 0,
    OffsetOutOfRange = 1,
    CorruptMessage = 2,
    UnknownTopicOrPartition = 3,
    LeaderNotAvailable = 5,
    NotLeaderOrFollower = 6,
    RequestTimedOut = 7,
    BrokerNotAvailable = 8,
    MessageTooLarge = 10,
    OffsetMetadataTooLarge = 12,
    NetworkException = 13,
    CoordinatorLoadInProgress = 14,
    CoordinatorNotAvailable = 15,
    NotCoordinator = 16,
    InvalidTopicException = 17,
    RecordListTooLarge = 18,
    NotEnoughReplicas = 19,
    NotEnoughReplicasAfterAppend = 20,
    InvalidRequiredAcks = 21,
    IllegalGeneration = 22,
    InconsistentGroupProtocol = 23,
    InvalidGroupId = 24,
    UnknownMemberId = 25,
    InvalidSessionTimeout = 26,
    RebalanceInProgress = 27,
    ClusterAuthorizationFailed = 31,
    UnsupportedVersion = 35,
    TopicAlreadyExists = 36,
    InvalidPartitions = 37,
    InvalidReplicationFactor = 38,
    InvalidReplicaAssignment = 39,
    InvalidConfig = 40,
    NotController = 41,
    InvalidRequest = 42,
    OutOfOrderSequenceNumber = 45,
    DuplicateSequenceNumber = 46,
    InvalidProducerEpoch = 47,
    InvalidTxnState = 48,
    InvalidProducerIdMapping = 49,
    InvalidTransactionTimeout = 50,
    ConcurrentTransactions = 51,
    /// A marker from a transaction coordinator whose epoch is older than the current one.
    TransactionCoordinatorFenced = 52,
    OperationNotAttempted = 55,
    KafkaStorageError = 56,
    UnknownProducerId = 59,
    NonEmptyGroup = 68,
    GroupIdNotFound = 69,
    FencedLeaderEpoch = 74,
    /// 75, not 74 (FENCED_LEADER_EPOCH): Kafka's `Errors` numbers them in that order.
    UnknownLeaderEpoch = 75,
    UnsupportedCompressionType = 76,
    StaleBrokerEpoch = 77,
    MemberIdRequired = 79,
    PreferredLeaderNotAvailable = 80,
    GroupMaxSizeReached = 81,
    FencedInstanceId = 82,
    EligibleLeadersNotAvailable = 83,
    ElectionNotNeeded = 84,
    NoReassignmentInProgress = 85,
    GroupSubscribedToTopic = 86,
    InvalidRecord = 87,
    UnstableOffsetCommit = 88,
    ProducerFenced = 90,
    InvalidUpdateVersion = 95,
    UnknownTopicId = 100,
    TransactionalIdNotFound = 105,
    IneligibleReplica = 107,
    UnsupportedSaslMechanism = 33,
    IllegalSaslState = 34,
    SaslAuthenticationFailed = 58,
    ResourceNotFound = 91,
    DuplicateResource = 92,
    UnacceptableCredential = 93,
    TopicAuthorizationFailed = 29,
    GroupAuthorizationFailed = 30,
    TransactionalIdAuthorizationFailed = 53,
    SecurityDisabled = 54,
}

impl ErrorCode {
    /// The number on the wire.
    pub const fn code(self) -> i16 {
        self as i16
    }

    /// The code a number stands for, if Laminar knows it.
    pub fn from_code(code: i16) -> Option<ErrorCode> {
        ALL.iter().copied().find(|e| e.code() == code)
    }

    /// The code in a response from another broker; a number Laminar does not know (only
    /// Laminar brokers answer these) is taken as UNKNOWN_SERVER_ERROR.
    pub fn from_wire(code: i16) -> ErrorCode {
        ErrorCode::from_code(code).unwrap_or(ErrorCode::UnknownServerError)
    }

    pub fn is_none(self) -> bool {
        self == ErrorCode::None
    }

    /// Kafka's name for it, as its clients print it (`NOT_LEADER_OR_FOLLOWER`).
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::UnknownServerError => "UNKNOWN_SERVER_ERROR",
            ErrorCode::None => "NONE",
            ErrorCode::OffsetOutOfRange => "OFFSET_OUT_OF_RANGE",
            ErrorCode::CorruptMessage => "CORRUPT_MESSAGE",
            ErrorCode::UnknownTopicOrPartition => "UNKNOWN_TOPIC_OR_PARTITION",
            ErrorCode::LeaderNotAvailable => "LEADER_NOT_AVAILABLE",
            ErrorCode::NotLeaderOrFollower => "NOT_LEADER_OR_FOLLOWER",
            ErrorCode::RequestTimedOut => "REQUEST_TIMED_OUT",
            ErrorCode::BrokerNotAvailable => "BROKER_NOT_AVAILABLE",
            ErrorCode::MessageTooLarge => "MESSAGE_TOO_LARGE",
            ErrorCode::OffsetMetadataTooLarge => "OFFSET_METADATA_TOO_LARGE",
            ErrorCode::NetworkException => "NETWORK_EXCEPTION",
            ErrorCode::CoordinatorLoadInProgress => "COORDINATOR_LOAD_IN_PROGRESS",
            ErrorCode::CoordinatorNotAvailable => "COORDINATOR_NOT_AVAILABLE",
            ErrorCode::NotCoordinator => "NOT_COORDINATOR",
            ErrorCode::InvalidTopicException => "INVALID_TOPIC_EXCEPTION",
            ErrorCode::RecordListTooLarge => "RECORD_LIST_TOO_LARGE",
            ErrorCode::NotEnoughReplicas => "NOT_ENOUGH_REPLICAS",
            ErrorCode::NotEnoughReplicasAfterAppend => "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
            ErrorCode::InvalidRequiredAcks => "INVALID_REQUIRED_ACKS",
            ErrorCode::IllegalGeneration => "ILLEGAL_GENERATION",
            ErrorCode::InconsistentGroupProtocol => "INCONSISTENT_GROUP_PROTOCOL",
            ErrorCode::InvalidGroupId => "INVALID_GROUP_ID",
            ErrorCode::UnknownMemberId => "UNKNOWN_MEMBER_ID",
            ErrorCode::InvalidSessionTimeout => "INVALID_SESSION_TIMEOUT",
            ErrorCode::RebalanceInProgress => "REBALANCE_IN_PROGRESS",
            ErrorCode::ClusterAuthorizationFailed => "CLUSTER_AUTHORIZATION_FAILED",
            ErrorCode::UnsupportedVersion => "UNSUPPORTED_VERSION",
            ErrorCode::TopicAlreadyExists => "TOPIC_ALREADY_EXISTS",
            ErrorCode::InvalidPartitions => "INVALID_PARTITIONS",
            ErrorCode::InvalidReplicationFactor => "INVALID_REPLICATION_FACTOR",
            ErrorCode::InvalidReplicaAssignment => "INVALID_REPLICA_ASSIGNMENT",
            ErrorCode::InvalidConfig => "INVALID_CONFIG",
            ErrorCode::NotController => "NOT_CONTROLLER",
            ErrorCode::InvalidRequest => "INVALID_REQUEST",
            ErrorCode::OutOfOrderSequenceNumber => "OUT_OF_ORDER_SEQUENCE_NUMBER",
            ErrorCode::DuplicateSequenceNumber => "DUPLICATE_SEQUENCE_NUMBER",
            ErrorCode::InvalidProducerEpoch => "INVALID_PRODUCER_EPOCH",
            ErrorCode::InvalidTxnState => "INVALID_TXN_STATE",
            ErrorCode::InvalidProducerIdMapping => "INVALID_PRODUCER_ID_MAPPING",
            ErrorCode::InvalidTransactionTimeout => "INVALID_TRANSACTION_TIMEOUT",
            ErrorCode::ConcurrentTransactions => "CONCURRENT_TRANSACTIONS",
            ErrorCode::TransactionCoordinatorFenced => "TRANSACTION_COORDINATOR_FENCED",
            ErrorCode::OperationNotAttempted => "OPERATION_NOT_ATTEMPTED",
            ErrorCode::KafkaStorageError => "KAFKA_STORAGE_ERROR",
            ErrorCode::UnknownProducerId => "UNKNOWN_PRODUCER_ID",
            ErrorCode::NonEmptyGroup => "NON_EMPTY_GROUP",
            ErrorCode::GroupIdNotFound => "GROUP_ID_NOT_FOUND",
            ErrorCode::FencedLeaderEpoch => "FENCED_LEADER_EPOCH",
            ErrorCode::UnknownLeaderEpoch => "UNKNOWN_LEADER_EPOCH",
            ErrorCode::UnsupportedCompressionType => "UNSUPPORTED_COMPRESSION_TYPE",
            ErrorCode::StaleBrokerEpoch => "STALE_BROKER_EPOCH",
            ErrorCode::MemberIdRequired => "MEMBER_ID_REQUIRED",
            ErrorCode::PreferredLeaderNotAvailable => "PREFERRED_LEADER_NOT_AVAILABLE",
            ErrorCode::GroupMaxSizeReached => "GROUP_MAX_SIZE_REACHED",
            ErrorCode::FencedInstanceId => "FENCED_INSTANCE_ID",
            ErrorCode::EligibleLeadersNotAvailable => "ELIGIBLE_LEADERS_NOT_AVAILABLE",
            ErrorCode::ElectionNotNeeded => "ELECTION_NOT_NEEDED",
            ErrorCode::NoReassignmentInProgress => "NO_REASSIGNMENT_IN_PROGRESS",
            ErrorCode::GroupSubscribedToTopic => "GROUP_SUBSCRIBED_TO_TOPIC",
            ErrorCode::InvalidRecord => "INVALID_RECORD",
            ErrorCode::UnstableOffsetCommit => "UNSTABLE_OFFSET_COMMIT",
            ErrorCode::ProducerFenced => "PRODUCER_FENCED",
            ErrorCode::InvalidUpdateVersion => "INVALID_UPDATE_VERSION",
            ErrorCode::UnknownTopicId => "UNKNOWN_TOPIC_ID",
            ErrorCode::TransactionalIdNotFound => "TRANSACTIONAL_ID_NOT_FOUND",
            ErrorCode::IneligibleReplica => "INELIGIBLE_REPLICA",
            ErrorCode::UnsupportedSaslMechanism => "UNSUPPORTED_SASL_MECHANISM",
            ErrorCode::IllegalSaslState => "ILLEGAL_SASL_STATE",
            ErrorCode::SaslAuthenticationFailed => "SASL_AUTHENTICATION_FAILED",
            ErrorCode::ResourceNotFound => "RESOURCE_NOT_FOUND",
            ErrorCode::DuplicateResource => "DUPLICATE_RESOURCE",
            ErrorCode::UnacceptableCredential => "UNACCEPTABLE_CREDENTIAL",
            ErrorCode::TopicAuthorizationFailed => "TOPIC_AUTHORIZATION_FAILED",
            ErrorCode::GroupAuthorizationFailed => "GROUP_AUTHORIZATION_FAILED",
            ErrorCode::TransactionalIdAuthorizationFailed => "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
            ErrorCode::SecurityDisabled => "SECURITY_DISABLED",
        }
    }
}

impl From<ErrorCode> for i16 {
    fn from(e: ErrorCode) -> i16 {
        e.code()
    }
}

/// A code read off the wire compared with a known one.
impl PartialEq<ErrorCode> for i16 {
    fn eq(&self, other: &ErrorCode) -> bool {
        *self == other.code()
    }
}

impl PartialEq<i16> for ErrorCode {
    fn eq(&self, other: &i16) -> bool {
        self.code() == *other
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

/// Every code, for [`ErrorCode::from_code`].
const ALL: &[ErrorCode] = &[
    ErrorCode::UnknownServerError,
    ErrorCode::None,
    ErrorCode::OffsetOutOfRange,
    ErrorCode::CorruptMessage,
    ErrorCode::UnknownTopicOrPartition,
    ErrorCode::LeaderNotAvailable,
    ErrorCode::NotLeaderOrFollower,
    ErrorCode::RequestTimedOut,
    ErrorCode::BrokerNotAvailable,
    ErrorCode::MessageTooLarge,
    ErrorCode::OffsetMetadataTooLarge,
    ErrorCode::NetworkException,
    ErrorCode::CoordinatorLoadInProgress,
    ErrorCode::CoordinatorNotAvailable,
    ErrorCode::NotCoordinator,
    ErrorCode::InvalidTopicException,
    ErrorCode::RecordListTooLarge,
    ErrorCode::NotEnoughReplicas,
    ErrorCode::NotEnoughReplicasAfterAppend,
    ErrorCode::InvalidRequiredAcks,
    ErrorCode::IllegalGeneration,
    ErrorCode::InconsistentGroupProtocol,
    ErrorCode::InvalidGroupId,
    ErrorCode::UnknownMemberId,
    ErrorCode::InvalidSessionTimeout,
    ErrorCode::RebalanceInProgress,
    ErrorCode::ClusterAuthorizationFailed,
    ErrorCode::UnsupportedVersion,
    ErrorCode::TopicAlreadyExists,
    ErrorCode::InvalidPartitions,
    ErrorCode::InvalidReplicationFactor,
    ErrorCode::InvalidReplicaAssignment,
    ErrorCode::InvalidConfig,
    ErrorCode::NotController,
    ErrorCode::InvalidRequest,
    ErrorCode::OutOfOrderSequenceNumber,
    ErrorCode::DuplicateSequenceNumber,
    ErrorCode::InvalidProducerEpoch,
    ErrorCode::InvalidTxnState,
    ErrorCode::InvalidProducerIdMapping,
    ErrorCode::InvalidTransactionTimeout,
    ErrorCode::ConcurrentTransactions,
    ErrorCode::TransactionCoordinatorFenced,
    ErrorCode::OperationNotAttempted,
    ErrorCode::KafkaStorageError,
    ErrorCode::UnknownProducerId,
    ErrorCode::NonEmptyGroup,
    ErrorCode::GroupIdNotFound,
    ErrorCode::FencedLeaderEpoch,
    ErrorCode::UnknownLeaderEpoch,
    ErrorCode::UnsupportedCompressionType,
    ErrorCode::StaleBrokerEpoch,
    ErrorCode::MemberIdRequired,
    ErrorCode::PreferredLeaderNotAvailable,
    ErrorCode::GroupMaxSizeReached,
    ErrorCode::FencedInstanceId,
    ErrorCode::EligibleLeadersNotAvailable,
    ErrorCode::ElectionNotNeeded,
    ErrorCode::NoReassignmentInProgress,
    ErrorCode::GroupSubscribedToTopic,
    ErrorCode::InvalidRecord,
    ErrorCode::UnstableOffsetCommit,
    ErrorCode::ProducerFenced,
    ErrorCode::InvalidUpdateVersion,
    ErrorCode::UnknownTopicId,
    ErrorCode::TransactionalIdNotFound,
    ErrorCode::IneligibleReplica,
    ErrorCode::UnsupportedSaslMechanism,
    ErrorCode::IllegalSaslState,
    ErrorCode::SaslAuthenticationFailed,
    ErrorCode::ResourceNotFound,
    ErrorCode::DuplicateResource,
    ErrorCode::UnacceptableCredential,
    ErrorCode::TopicAuthorizationFailed,
    ErrorCode::GroupAuthorizationFailed,
    ErrorCode::TransactionalIdAuthorizationFailed,
    ErrorCode::SecurityDisabled,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_maps_back_to_itself_and_codes_are_distinct() {
        for e in ALL {
            assert_eq!(ErrorCode::from_code(e.code()), Some(*e), "{e}");
        }
        let mut codes: Vec<i16> = ALL.iter().map(|e| e.code()).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), ALL.len());
        assert_eq!(ErrorCode::NotLeaderOrFollower.code(), 6);
        assert_eq!(ErrorCode::NotLeaderOrFollower.name(), "NOT_LEADER_OR_FOLLOWER");
    }
}
