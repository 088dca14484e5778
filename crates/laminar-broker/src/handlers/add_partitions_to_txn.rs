//! AddPartitionsToTxn v0-3: a producer adds partitions to its transaction before it writes
//! to them. Answered once the coordinator's record of them is durable.

use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::AddPartitionsToTxnResponse;
use laminar_protocol::requests::AddPartitionsToTxnRequest;
use laminar_protocol::{responses, ApiKey};

use super::{topic_name, Encoded};
use crate::broker::Broker;
use crate::error_codes as ec;
use crate::txn::complete::add_partitions;

pub async fn handle(
    b: &Arc<Broker>,
    version: i16,
    correlation_id: i32,
    r: AddPartitionsToTxnRequest,
) -> Encoded {
    // As Kafka answers: if any partition is unknown, it fails and the rest are not attempted.
    let unknown = |topic: &str, p: i32| {
        crate::topics::is_internal(topic)
            || !b
                .topics
                .get(topic)
                .is_some_and(|t| p >= 0 && (p as u32) < t.partitions)
    };
    let any_unknown = r.topics.iter().any(|(t, ps)| ps.iter().any(|p| unknown(t, *p)));
    let code_for = |topic: &str, p: i32, code: i16| -> i16 {
        if !any_unknown {
            code
        } else if unknown(topic, p) {
            ec::UNKNOWN_TOPIC_OR_PARTITION
        } else {
            ec::OPERATION_NOT_ATTEMPTED
        }
    };
    let code = if any_unknown {
        ec::NONE
    } else {
        let partitions: Vec<(String, i32)> = r
            .topics
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
            .collect();
        let pr = &r.producer;
        add_partitions(
            b,
            &pr.transactional_id,
            pr.producer_id,
            pr.producer_epoch,
            &partitions,
        )
        .await
        .err()
        .unwrap_or(ec::NONE)
    };
    let mut resp = AddPartitionsToTxnResponse::default();
    resp.results_by_topic_v3_and_below = r
        .topics
        .iter()
        .map(|(t, ps)| {
            let mut tr = AddPartitionsToTxnTopicResult::default();
            tr.name = topic_name(t);
            tr.results_by_partition = ps
                .iter()
                .map(|p| {
                    let mut pr = AddPartitionsToTxnPartitionResult::default();
                    pr.partition_index = *p;
                    pr.partition_error_code = code_for(t, *p, code);
                    pr
                })
                .collect();
            tr
        })
        .collect();
    responses::encode(ApiKey::AddPartitionsToTxn, version, correlation_id, &resp)
}
