//! DescribeProducers v0 (`kafka-transactions describe-producers`, the Admin client's
//! `describeProducers`): the idempotent producers each partition remembers for
//! de-duplication, with their epoch, last sequence and last batch's timestamp, and the first
//! offset of the transaction each has open there (-1: none). The coordinator epoch is 0 for a
//! producer with a transaction open (there is one coordinator, which never moves), -1 otherwise.

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersResponse, ProducerId};
use laminar_protocol::requests::DescribeProducersRequest;
use laminar_protocol::{responses, ApiKey};

use super::refused::Refused;
use super::{sb, topic_name, Encoded};
use crate::context::RequestContext;
use laminar_data::partition::Partitions;

pub fn handle(
    hosted: &Partitions,
    ctx: &RequestContext,
    r: DescribeProducersRequest,
    refused: Refused,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
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
                    // As Kafka answers it: by the partition's leader.
                    let led = match hosted.led(&topic, p) {
                        Ok(led) => led,
                        Err(code) => {
                            pr.error_code = code.code();
                            pr.error_message = Some(sb(&format!("{topic}-{p}: {code}")));
                            return pr;
                        }
                    };
                    let open: std::collections::HashMap<i64, i64> = led
                        .log
                        .open_txns()
                        .into_iter()
                        .map(|(pid, o)| (pid, o.0))
                        .collect();
                    pr.active_producers = led
                        .partition
                        .producers
                        .describe()
                        .into_iter()
                        .map(|i| {
                            let mut s = ProducerState::default();
                            s.producer_id = ProducerId(i.producer_id);
                            s.producer_epoch = i.epoch as i32;
                            s.last_sequence = i.last_seq;
                            s.last_timestamp = i.last_timestamp_ms;
                            let open = open.get(&i.producer_id).copied();
                            // Of its last marker here (-1: none): `kafka-transactions abort`
                            // sends it back with its abort marker.
                            s.coordinator_epoch = i.coordinator_epoch;
                            s.current_txn_start_offset = open.unwrap_or(-1);
                            s
                        })
                        .collect();
                    pr
                })
                .collect();
            out
        })
        .collect();
    refused.answer(&mut resp);
    responses::encode(ApiKey::DescribeProducers, version, correlation_id, &resp)
}
