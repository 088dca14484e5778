//! AddPartitionsToTxn v0-5: a producer adds partitions to its transaction before it writes
//! to them (v0-3), answered once the coordinator's record of them is durable; a partition
//! leader in a cluster checks (or, for Produce v12, adds) its producers' partitions for them
//! (v4-5, KIP-890), several transactions at once.

use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnResponse, TransactionalId};
use laminar_protocol::requests::{AddPartitionsToTxnRequest, TxnPartitions, TxnProducer};
use laminar_protocol::{responses, ApiKey};

use super::refused::Refused;
use super::{sb, topic_name, Encoded};
use crate::context::RequestContext;
use crate::topics::Topics;
use laminar_cluster::TopicPartition;
use laminar_coordinators::txn::complete::add_partitions;
use laminar_coordinators::txn::offsets_partition;
use laminar_coordinators::txn::service::Txns;
use laminar_protocol::ErrorCode;

pub async fn handle(
    txns: &Arc<Txns>,
    topics: &Topics,
    ctx: &RequestContext,
    r: AddPartitionsToTxnRequest,
    refused: Refused,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = AddPartitionsToTxnResponse::default();
    if version < 4 {
        // A client's. WRITE on its transactional id and on each topic: if any was refused,
        // the authorization step took the transaction out (nothing is added).
        if let Some(txn) = r.transactions.first() {
            resp.results_by_topic_v3_and_below = handle_one(txns, topics, version, txn).await;
        }
    } else {
        // A partition leader's (CLUSTER_ACTION, checked whole), for its producers'
        // transactional batches (KIP-890).
        resp.error_code = txns.epoch().err().unwrap_or(ErrorCode::None).code();
        if resp.error_code == ErrorCode::None.code() {
            for txn in &r.transactions {
                let mut result = AddPartitionsToTxnResult::default();
                result.transactional_id = TransactionalId(sb(&txn.producer.transactional_id));
                result.topic_results = handle_one(txns, topics, version, txn).await;
                resp.results_by_transaction.push(result);
            }
        }
    }
    refused.answer(&mut resp);
    responses::encode(ApiKey::AddPartitionsToTxn, version, correlation_id, &resp)
}

/// Adds one transaction's partitions (or, `verify_only`, checks that they are in it).
async fn handle_one(
    txns: &Arc<Txns>,
    topics: &Topics,
    version: i16,
    txn: &TxnPartitions,
) -> Vec<AddPartitionsToTxnTopicResult> {
    // As Kafka answers: if any partition is unknown, it fails and the rest are not attempted.
    // A client adds no internal partition; a group coordinator adds the group log's (v4+:
    // TxnOffsetCommit v5, transaction version 2).
    let unknown = |topic: &str, p: i32| {
        (crate::topics::is_internal(topic)
            && !(version >= 4 && TopicPartition::new(topic, p) == offsets_partition()))
            || !topics
                .get(topic)
                .is_some_and(|t| p >= 0 && (p as u32) < t.partitions)
    };
    let any_unknown = txn.topics.iter().any(|(t, ps)| ps.iter().any(|p| unknown(t, *p)));
    let code_for = |topic: &str, p: i32, code: ErrorCode| -> ErrorCode {
        if !any_unknown {
            code
        } else if unknown(topic, p) {
            ErrorCode::UnknownTopicOrPartition
        } else {
            ErrorCode::OperationNotAttempted
        }
    };
    let code = if any_unknown {
        ErrorCode::None
    } else {
        let partitions: Vec<TopicPartition> = txn
            .topics
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| TopicPartition::new(t.clone(), *p)))
            .collect();
        let pr = &txn.producer;
        let done = if txn.verify_only {
            verify(txns, pr, &partitions)
        } else {
            add_partitions(
                txns,
                &pr.transactional_id,
                pr.producer_id,
                pr.producer_epoch,
                &partitions,
            )
            .await
        };
        done.err().unwrap_or(ErrorCode::None)
    };
    results_by(txn, |t, p| code_for(t, p, code))
}

/// Every partition of the transaction answered with its code.
fn results_by(
    txn: &TxnPartitions,
    code: impl Fn(&str, i32) -> ErrorCode,
) -> Vec<AddPartitionsToTxnTopicResult> {
    txn.topics
        .iter()
        .map(|(t, ps)| {
            let mut tr = AddPartitionsToTxnTopicResult::default();
            tr.name = topic_name(t);
            tr.results_by_partition = ps
                .iter()
                .map(|p| {
                    let mut pr = AddPartitionsToTxnPartitionResult::default();
                    pr.partition_index = *p;
                    pr.partition_error_code = code(t, *p).code();
                    pr
                })
                .collect();
            tr
        })
        .collect()
}

/// Are `partitions` in the transaction of this producer, in progress now? What a partition
/// leader asks before it appends a transactional batch (Produce below v12).
fn verify(txns: &Txns, pr: &TxnProducer, partitions: &[TopicPartition]) -> Result<(), ErrorCode> {
    let epoch = txns.epoch()?;
    for tp in partitions {
        txns.coordinator
            .check_produce(pr.producer_id, pr.producer_epoch, &tp.topic, tp.partition)
            .map_err(|code| {
                // Its state was dropped meanwhile: this broker stopped coordinating.
                if txns.epoch() != Ok(epoch) {
                    ErrorCode::NotCoordinator
                } else {
                    code
                }
            })?;
    }
    Ok(())
}
