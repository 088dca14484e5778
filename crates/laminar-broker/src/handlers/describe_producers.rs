//! DescribeProducers v0 (`kafka-transactions describe-producers`, the Admin client's
//! `describeProducers`): the idempotent producers each partition remembers for
//! de-duplication, with their epoch, last sequence and last batch's timestamp. Laminar has no
//! transactions yet, so there is no coordinator epoch and no open transaction (-1).

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersResponse, ProducerId};
use laminar_protocol::requests::DescribeProducersRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, topic_name, Encoded};
use crate::broker::Broker;
use crate::error_codes as ec;

pub fn handle(b: &Broker, version: i16, correlation_id: i32, r: DescribeProducersRequest) -> Encoded {
    let mut resp = DescribeProducersResponse::default();
    resp.topics = r
        .topics
        .into_iter()
        .map(|(topic, partitions)| {
            let mut out = TopicResponse::default();
            out.name = topic_name(&topic);
            out.partitions = partitions
                .into_iter()
                .map(|p| {
                    let mut pr = PartitionResponse::default();
                    pr.partition_index = p;
                    if b.topics.log(&topic, p).is_none() {
                        pr.error_code = ec::UNKNOWN_TOPIC_OR_PARTITION;
                        pr.error_message = Some(sb(&format!("no partition {topic}-{p}")));
                        return pr;
                    }
                    pr.active_producers = b
                        .producers
                        .describe(&topic, p)
                        .into_iter()
                        .map(|i| {
                            let mut s = ProducerState::default();
                            s.producer_id = ProducerId(i.producer_id);
                            s.producer_epoch = i.epoch as i32;
                            s.last_sequence = i.last_seq;
                            s.last_timestamp = i.last_timestamp_ms;
                            s.coordinator_epoch = -1;
                            s.current_txn_start_offset = -1;
                            s
                        })
                        .collect();
                    pr
                })
                .collect();
            out
        })
        .collect();
    responses::encode(ApiKey::DescribeProducers, version, correlation_id, &resp)
}
