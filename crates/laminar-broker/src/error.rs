//! The broker's errors: what a request that changes the cluster (topics, partitions,
//! configs, quotas, placements) is refused with. Each is answered with one Kafka error code,
//! mapped here ([`BrokerError::code`]) and nowhere else; its text is the response's message.

use laminar_cluster::ClusterError;
use laminar_protocol::ErrorCode;

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// A topic name Kafka refuses, or an internal topic a client may not change.
    #[error("{0}")]
    InvalidTopic(String),
    #[error("{0}")]
    InvalidPartitions(String),
    #[error("{0}")]
    InvalidConfig(String),
    #[error("{0}")]
    InvalidReplicationFactor(String),
    /// A request this broker does not take as asked (an entity it has no quotas for, a
    /// resource it cannot alter, an assignment it does not support).
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    UnknownTopicOrPartition(String),
    /// The principal may not do it (TOPIC_ or CLUSTER_AUTHORIZATION_FAILED).
    #[error("{} ({})", .0.name(), "not authorized")]
    Authorization(ErrorCode),
    /// The control plane: the controller refused it or did not answer.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
}

impl BrokerError {
    pub fn code(&self) -> ErrorCode {
        match self {
            BrokerError::InvalidTopic(_) => ErrorCode::InvalidTopicException,
            BrokerError::InvalidPartitions(_) => ErrorCode::InvalidPartitions,
            BrokerError::InvalidConfig(_) => ErrorCode::InvalidConfig,
            BrokerError::InvalidReplicationFactor(_) => ErrorCode::InvalidReplicationFactor,
            BrokerError::InvalidRequest(_) => ErrorCode::InvalidRequest,
            BrokerError::UnknownTopicOrPartition(_) => ErrorCode::UnknownTopicOrPartition,
            BrokerError::Authorization(code) => *code,
            BrokerError::Cluster(e) => e.code(),
        }
    }
}

/// A check made before a change goes to the controller, refused as the controller would
/// refuse it (the closures that `Cluster::alter_configs_here` runs answer in its errors).
impl From<BrokerError> for ClusterError {
    fn from(e: BrokerError) -> ClusterError {
        match e {
            BrokerError::Cluster(e) => e,
            other => ClusterError::refused(other.code(), other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_keeps_its_code_and_message_through_the_control_plane() {
        let e = BrokerError::InvalidConfig("retention.ms: \"x\" is not an integer".into());
        let through: BrokerError = ClusterError::from(e).into();
        assert_eq!(through.code(), ErrorCode::InvalidConfig);
        assert_eq!(through.to_string(), "retention.ms: \"x\" is not an integer");
        let timeout = BrokerError::from(ClusterError::NoController(
            std::time::Duration::from_secs(15),
            "no answer".into(),
        ));
        assert_eq!(timeout.code(), ErrorCode::RequestTimedOut);
    }
}
