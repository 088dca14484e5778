//! The refusal parts of per-resource answers, built here and nowhere else.
//!
//! The authorization step ([`crate::security::split`]) takes out of a request every topic,
//! partition, group, config resource or key its principal may not touch (and every topic id
//! no topic has), each with the code Kafka answers it with; the handler sees only the rest.
//! Before it encodes its response, the handler hands it to [`Refused::answer`], which adds
//! each refused resource in the response's own shape, after the handler's answers, as
//! Kafka's `KafkaApis` adds its unauthorized ones. A refused resource's answer carries its
//! name and code only: nothing of its data.

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::describe_producers_response::{PartitionResponse, TopicResponse};
use kafka_protocol::messages::describe_transactions_response::TransactionState;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AddPartitionsToTxnResponse,
    AlterConfigsResponse, BrokerId, CreatePartitionsResponse, CreateTopicsResponse, DeleteGroupsResponse,
    DeleteRecordsResponse, DeleteTopicsResponse, DescribeConfigsResponse, DescribeGroupsResponse,
    DescribeProducersResponse, DescribeTransactionsResponse, FindCoordinatorResponse, GroupId,
    IncrementalAlterConfigsResponse, ListOffsetsResponse, MetadataResponse, OffsetCommitResponse,
    OffsetDeleteResponse, OffsetFetchResponse, OffsetForLeaderEpochResponse, ProduceResponse, ProducerId,
    TransactionalId, TxnOffsetCommitResponse,
};
use laminar_protocol::requests::Uuid;
use laminar_protocol::responses::FetchTopicResponse;
use laminar_protocol::ErrorCode;

use super::{sb, topic_name, uuid};
use crate::response::RecordsFile;

/// One resource the step took out of a request, with the code it is answered with.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// Partitions of a topic, each answered `code`; `topic_id` where it was asked by id.
    Partitions {
        topic: String,
        topic_id: Option<Uuid>,
        partitions: Vec<i32>,
        code: ErrorCode,
    },
    /// A topic answered as a whole (CreateTopics, DeleteTopics, CreatePartitions, Metadata);
    /// no `name` when it was asked by id and its name may not be told.
    Topic {
        name: Option<String>,
        topic_id: Option<Uuid>,
        code: ErrorCode,
    },
    /// A group (DescribeGroups, DeleteGroups, OffsetFetch from v8).
    Group { id: String, code: ErrorCode },
    /// Partitions of a topic asked of one group (OffsetFetch).
    GroupPartitions {
        group: String,
        topic: String,
        partitions: Vec<i32>,
        code: ErrorCode,
    },
    /// A config resource (DescribeConfigs, AlterConfigs): Kafka's resource type and name.
    Config {
        resource_type: i8,
        name: String,
        code: ErrorCode,
    },
    /// A coordinator key (FindCoordinator) or a transactional id (DescribeTransactions).
    Key { key: String, code: ErrorCode },
}

/// What the step refused of one request, to be added to its response by
/// [`Refused::answer`]. Dropping it unanswered while it holds something is a bug (a refused
/// resource would go unanswered): a debug build panics, a release build logs.
#[derive(Debug, Default)]
pub struct Refused {
    pub(crate) version: i16,
    pub(crate) items: Vec<Refusal>,
}

impl Refused {
    pub fn new(version: i16) -> Refused {
        Refused {
            version,
            items: Vec::new(),
        }
    }

    pub fn push(&mut self, refusal: Refusal) {
        self.items.push(refusal);
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn items(&self) -> &[Refusal] {
        &self.items
    }

    /// Adds every refused resource to `response`, in its shape.
    pub fn answer<R: Answer>(mut self, response: &mut R) {
        for refusal in std::mem::take(&mut self.items) {
            response.add(refusal, self.version);
        }
    }
}

impl Drop for Refused {
    fn drop(&mut self) {
        if !self.items.is_empty() && !std::thread::panicking() {
            crate::warn!("refused resources left unanswered: {:?}", self.items);
            debug_assert!(
                self.items.is_empty(),
                "refused resources left unanswered: {:?}",
                self.items
            );
        }
    }
}

/// A response that carries refused resources in its own shape.
pub trait Answer {
    /// Adds `refusal`. A kind of refusal the API never makes is a bug in the step.
    fn add(&mut self, refusal: Refusal, version: i16);
}

fn not_made(api: &str, refusal: &Refusal) -> ! {
    unreachable!("{api}: the authorization step makes no {refusal:?}")
}

/// The message Kafka's answers carry with a refusal, where the response has a field for it.
fn message(code: ErrorCode) -> Option<kafka_protocol::protocol::StrBytes> {
    Some(sb(match code {
        ErrorCode::TopicAuthorizationFailed => "Topic authorization failed.",
        ErrorCode::ClusterAuthorizationFailed => "Cluster authorization failed.",
        other => other.name(),
    }))
}

impl Answer for MetadataResponse {
    fn add(&mut self, refusal: Refusal, version: i16) {
        match refusal {
            Refusal::Topic { name, topic_id, code } => {
                self.topics.push(metadata_topic(version, name, topic_id, code))
            }
            other => not_made("Metadata", &other),
        }
    }
}

impl Answer for ProduceResponse {
    fn add(&mut self, refusal: Refusal, _version: i16) {
        let Refusal::Partitions {
            topic,
            topic_id,
            partitions,
            code,
        } = refusal
        else {
            not_made("Produce", &refusal)
        };
        let mut tr = TopicProduceResponse::default();
        tr.name = topic_name(&topic);
        tr.topic_id = uuid(topic_id.unwrap_or_default());
        tr.partition_responses = partitions
            .into_iter()
            .map(|p| {
                let mut pr = PartitionProduceResponse::default();
                pr.index = p;
                pr.error_code = code.code();
                pr.base_offset = -1;
                pr
            })
            .collect();
        self.responses.push(tr);
    }
}

impl Answer for Vec<FetchTopicResponse<RecordsFile>> {
    fn add(&mut self, refusal: Refusal, _version: i16) {
        let Refusal::Partitions {
            topic,
            topic_id,
            partitions,
            code,
        } = refusal
        else {
            not_made("Fetch", &refusal)
        };
        self.push(FetchTopicResponse {
            name: topic,
            topic_id: topic_id.unwrap_or_default(),
            partitions: partitions
                .into_iter()
                .map(|p| laminar_data::read::unread(p, code))
                .collect(),
        });
    }
}

impl Answer for CreateTopicsResponse {
    fn add(&mut self, refusal: Refusal, version: i16) {
        let Refusal::Topic { name, code, .. } = refusal else {
            not_made("CreateTopics", &refusal)
        };
        let mut out = CreatableTopicResult::default();
        out.name = topic_name(name.as_deref().unwrap_or_default());
        out.error_code = code.code();
        out.error_message = message(code);
        if version >= 5 {
            out.num_partitions = -1;
            out.replication_factor = -1;
        }
        self.topics.push(out);
    }
}

impl Answer for DeleteTopicsResponse {
    fn add(&mut self, refusal: Refusal, version: i16) {
        let Refusal::Topic { name, topic_id, code } = refusal else {
            not_made("DeleteTopics", &refusal)
        };
        let mut out = DeletableTopicResult::default();
        out.name = name.as_deref().map(topic_name);
        if let Some(id) = topic_id.filter(|_| version >= 6) {
            out.topic_id = uuid(id);
        }
        out.error_code = code.code();
        self.responses.push(out);
    }
}

impl Answer for CreatePartitionsResponse {
    fn add(&mut self, refusal: Refusal, _version: i16) {
        let Refusal::Topic { name, code, .. } = refusal else {
            not_made("CreatePartitions", &refusal)
        };
        let mut out = CreatePartitionsTopicResult::default();
        out.name = topic_name(name.as_deref().unwrap_or_default());
        out.error_code = code.code();
        out.error_message = message(code);
        self.results.push(out);
    }
}

/// `Answer` for a configs response: each refused resource a `$Item` in `$list`.
macro_rules! config_answer {
    ($api:literal, $Resp:ty, $list:ident: $Item:ty) => {
        impl Answer for $Resp {
            fn add(&mut self, refusal: Refusal, _version: i16) {
                let Refusal::Config {
                    resource_type,
                    name,
                    code,
                } = refusal
                else {
                    not_made($api, &refusal)
                };
                let mut out = <$Item>::default();
                out.resource_type = resource_type;
                out.resource_name = sb(&name);
                out.error_code = code.code();
                out.error_message = message(code);
                self.$list.push(out);
            }
        }
    };
}

config_answer!("DescribeConfigs", DescribeConfigsResponse, results: DescribeConfigsResult);
config_answer!("AlterConfigs", AlterConfigsResponse, responses: alter_configs_response::AlterConfigsResourceResponse);
config_answer!(
    "IncrementalAlterConfigs",
    IncrementalAlterConfigsResponse,
    responses: incremental_alter_configs_response::AlterConfigsResourceResponse
);

impl Answer for FindCoordinatorResponse {
    fn add(&mut self, refusal: Refusal, version: i16) {
        let Refusal::Key { key, code } = refusal else {
            not_made("FindCoordinator", &refusal)
        };
        if version >= 4 {
            let mut c = Coordinator::default();
            c.key = sb(&key);
            c.error_code = code.code();
            c.node_id = BrokerId(-1);
            c.port = -1;
            self.coordinators.push(c);
        } else {
            // One key before v4: the answer is its refusal.
            self.error_code = code.code();
            self.node_id = BrokerId(-1);
            self.host = sb("");
            self.port = -1;
        }
    }
}

/// `Answer` for a response that lists groups: each refused group a `$Item` in `$list`.
macro_rules! group_answer {
    ($api:literal, $Resp:ty, $list:ident: $Item:ty) => {
        impl Answer for $Resp {
            fn add(&mut self, refusal: Refusal, _version: i16) {
                let Refusal::Group { id, code } = refusal else {
                    not_made($api, &refusal)
                };
                let mut out = <$Item>::default();
                out.group_id = GroupId(sb(&id));
                out.error_code = code.code();
                self.$list.push(out);
            }
        }
    };
}

group_answer!("DescribeGroups", DescribeGroupsResponse, groups: DescribedGroup);
group_answer!("DeleteGroups", DeleteGroupsResponse, results: DeletableGroupResult);

impl Answer for OffsetFetchResponse {
    fn add(&mut self, refusal: Refusal, version: i16) {
        match refusal {
            Refusal::Group { id, code } => {
                let mut out = OffsetFetchResponseGroup::default();
                out.group_id = GroupId(sb(&id));
                out.error_code = code.code();
                self.groups.push(out);
            }
            // Nothing of the commit: its metadata is the committer's, not the caller's.
            Refusal::GroupPartitions {
                group,
                topic,
                partitions,
                code,
            } if version >= 8 => {
                let mut tr = OffsetFetchResponseTopics::default();
                tr.name = topic_name(&topic);
                tr.partitions = partitions
                    .into_iter()
                    .map(|p| {
                        let mut pr = OffsetFetchResponsePartitions::default();
                        pr.partition_index = p;
                        pr.error_code = code.code();
                        pr.committed_offset = -1;
                        pr.committed_leader_epoch = -1;
                        pr.metadata = Some(sb(""));
                        pr
                    })
                    .collect();
                let at = self
                    .groups
                    .iter()
                    .position(|g| g.group_id.as_str() == group)
                    .unwrap_or_else(|| {
                        let mut out = OffsetFetchResponseGroup::default();
                        out.group_id = GroupId(sb(&group));
                        self.groups.push(out);
                        self.groups.len() - 1
                    });
                self.groups[at].topics.push(tr);
            }
            Refusal::GroupPartitions {
                topic,
                partitions,
                code,
                ..
            } => {
                let mut tr = OffsetFetchResponseTopic::default();
                tr.name = topic_name(&topic);
                tr.partitions = partitions
                    .into_iter()
                    .map(|p| {
                        let mut pr = OffsetFetchResponsePartition::default();
                        pr.partition_index = p;
                        pr.error_code = code.code();
                        pr.committed_offset = -1;
                        pr.committed_leader_epoch = -1;
                        pr.metadata = Some(sb(""));
                        pr
                    })
                    .collect();
                self.topics.push(tr);
            }
            other => not_made("OffsetFetch", &other),
        }
    }
}

/// `Answer` for a response whose refused topics go in `$topics`, each a `$Topic` named by its
/// `$name` with its `$partitions`, each a `$Partition` carrying its `$index`, the code in
/// `$code`, and the fields given after them (offsets and such as Kafka answers them: -1).
macro_rules! partitions_answer {
    ($api:literal, $Resp:ty, $topics:ident: $Topic:ty { $name:ident, $partitions:ident: $Partition:ty { $index:ident, $code:ident $(, $field:ident = $value:expr)* } }) => {
        impl Answer for $Resp {
            fn add(&mut self, refusal: Refusal, _version: i16) {
                let Refusal::Partitions { topic, partitions, code, .. } = refusal else {
                    not_made($api, &refusal)
                };
                let mut tr = <$Topic>::default();
                tr.$name = topic_name(&topic);
                tr.$partitions = partitions
                    .into_iter()
                    .map(|p| {
                        let mut pr = <$Partition>::default();
                        pr.$index = p;
                        pr.$code = code.code();
                        $(pr.$field = $value;)*
                        pr
                    })
                    .collect();
                self.$topics.push(tr);
            }
        }
    };
}

partitions_answer!("ListOffsets", ListOffsetsResponse, topics: ListOffsetsTopicResponse {
    name, partitions: ListOffsetsPartitionResponse { partition_index, error_code, offset = -1, timestamp = -1 }
});
partitions_answer!("OffsetCommit", OffsetCommitResponse, topics: OffsetCommitResponseTopic {
    name, partitions: OffsetCommitResponsePartition { partition_index, error_code }
});
partitions_answer!("TxnOffsetCommit", TxnOffsetCommitResponse, topics: TxnOffsetCommitResponseTopic {
    name, partitions: TxnOffsetCommitResponsePartition { partition_index, error_code }
});
partitions_answer!("OffsetDelete", OffsetDeleteResponse, topics: OffsetDeleteResponseTopic {
    name, partitions: OffsetDeleteResponsePartition { partition_index, error_code }
});
partitions_answer!("DeleteRecords", DeleteRecordsResponse, topics: DeleteRecordsTopicResult {
    name, partitions: DeleteRecordsPartitionResult { partition_index, error_code, low_watermark = -1 }
});
partitions_answer!("OffsetForLeaderEpoch", OffsetForLeaderEpochResponse, topics: OffsetForLeaderTopicResult {
    topic, partitions: EpochEndOffset { partition, error_code, leader_epoch = -1, end_offset = -1 }
});
partitions_answer!("DescribeProducers", DescribeProducersResponse, topics: TopicResponse {
    name, partitions: PartitionResponse { partition_index, error_code }
});
// A client's (v0-3); a broker's (v4+) is refused whole.
partitions_answer!("AddPartitionsToTxn", AddPartitionsToTxnResponse, results_by_topic_v3_and_below: AddPartitionsToTxnTopicResult {
    name, results_by_partition: AddPartitionsToTxnPartitionResult { partition_index, partition_error_code }
});

impl Answer for DescribeTransactionsResponse {
    fn add(&mut self, refusal: Refusal, _version: i16) {
        let Refusal::Key { key, code } = refusal else {
            not_made("DescribeTransactions", &refusal)
        };
        let mut s = TransactionState::default();
        s.transactional_id = TransactionalId(sb(&key));
        s.error_code = code.code();
        s.producer_id = ProducerId(-1);
        s.producer_epoch = -1;
        s.transaction_start_time_ms = -1;
        self.transaction_states.push(s);
    }
}

/// A Metadata topic answered with `code` alone: its name where it may be told, its id from
/// v10.
pub fn metadata_topic(
    version: i16,
    name: Option<String>,
    id: Option<[u8; 16]>,
    code: ErrorCode,
) -> MetadataResponseTopic {
    let mut out = MetadataResponseTopic::default();
    out.error_code = code.code();
    out.name = name.map(|n| topic_name(&n));
    if let Some(id) = id.filter(|_| version >= 10) {
        out.topic_id = uuid(id);
    }
    out
}
