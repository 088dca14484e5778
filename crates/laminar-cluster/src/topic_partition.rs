//! A partition of a topic, by the topic's name and the partition's index: how the broker
//! and the control plane name one (the storage engine's is `LogId`, whose index is unsigned).

use serde::{Deserialize, Serialize};

/// Ordered by topic, then partition, as Kafka lists them (a transaction's markers go out
/// grouped by topic).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

/// `orders-3`, as Kafka prints a partition.
impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_sort_by_topic_then_index_and_print_as_kafka_does() {
        let mut ps = [
            TopicPartition::new("b", 0),
            TopicPartition::new("a", 10),
            TopicPartition::new("a", 2),
        ];
        ps.sort();
        let printed: Vec<String> = ps.iter().map(|p| p.to_string()).collect();
        assert_eq!(printed, ["a-2", "a-10", "b-0"]);
    }
}
