//! Kafka's names and limits for topics that the control plane and every broker share.

/// The group log: Kafka's name, so that tools that read it find it.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// The transaction log: Kafka's name for it.
pub const TRANSACTION_TOPIC: &str = "__transaction_state";
/// The most partitions a topic may have.
pub const PARTITIONS_MAX: u32 = 10_000;

/// Kafka's internal topics: listed in Metadata with `is_internal`, read by anyone, written
/// only by the broker itself.
pub fn is_internal(name: &str) -> bool {
    name == OFFSETS_TOPIC || name == TRANSACTION_TOPIC
}
