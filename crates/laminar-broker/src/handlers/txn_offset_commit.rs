//! TxnOffsetCommit v0-5, at the group coordinator: a group's offsets, committed with the
//! producer's transaction. As Kafka does it: the transaction coordinator (this broker or
//! another) is asked whether the group log's partition is in the transaction (v0-4, added
//! by AddOffsetsToTxn), or to add it (v5, transaction version 2); the offsets are then
//! written to the group log in the producer's transactional batch, and applied when the
//! transaction's commit marker is written there. Until then a consumer that asks for stable
//! offsets is told to wait.

use laminar_cluster::TopicPartition;
use std::sync::Arc;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::TxnOffsetCommitResponse;
use laminar_protocol::requests::{TxnOffsetCommitRequest, TxnProducer};
use laminar_protocol::{responses, ApiKey};

use super::offset_commit::OFFSET_METADATA_BYTES_MAX;
use super::refused::Refused;
use super::{topic_name, Encoded};
use crate::context::RequestContext;
use crate::topics::Topics;
use laminar_coordinators::groups::store::GroupRecord;
use laminar_coordinators::txn::service::Txns;
use laminar_coordinators::txn::{offsets_partition, PendingOffset};
use laminar_protocol::ErrorCode;

pub async fn handle(
    txns: &Arc<Txns>,
    topics: &Topics,
    ctx: &RequestContext,
    r: TxnOffsetCommitRequest,
    refused: Refused,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    // The consumer's generation and member, when it names them (v3+, KIP-447): a zombie
    // consumer of an older generation is refused.
    let group_error = if r.generation_id >= 0 || !r.member_id.is_empty() {
        txns.groups.coordinator.check_commit(
            &r.group_id,
            r.generation_id,
            &r.member_id,
            r.group_instance_id.as_deref(),
        )
    } else {
        ErrorCode::None
    };
    let now = laminar_data::now_ms();
    let mut codes: Vec<Vec<ErrorCode>> = Vec::new();
    let mut offsets = Vec::new();
    for (topic, partitions) in &r.topics {
        let known = topics.get(topic);
        codes.push(
            partitions
                .iter()
                .map(|p| {
                    if group_error != ErrorCode::None {
                        return group_error;
                    }
                    if !known
                        .as_ref()
                        .is_some_and(|k| p.partition >= 0 && (p.partition as u32) < k.partitions)
                    {
                        return ErrorCode::UnknownTopicOrPartition;
                    }
                    if p.metadata
                        .as_ref()
                        .is_some_and(|m| m.len() > OFFSET_METADATA_BYTES_MAX)
                    {
                        return ErrorCode::OffsetMetadataTooLarge;
                    }
                    offsets.push((
                        (topic.clone(), p.partition),
                        PendingOffset {
                            offset: p.offset,
                            leader_epoch: p.leader_epoch,
                            metadata: p.metadata.clone(),
                            commit_ms: now,
                        },
                    ));
                    ErrorCode::None
                })
                .collect(),
        );
    }
    if !offsets.is_empty() {
        let pr = &r.producer;
        let in_txn = in_transaction(txns, pr, version >= 5).await;
        let code = match in_txn {
            Err(code) => code,
            Ok(guard) => {
                let records = offsets
                    .into_iter()
                    .map(|((topic, partition), o)| GroupRecord::Offset {
                        group: r.group_id.clone(),
                        topic,
                        partition,
                        offset: o.offset,
                        leader_epoch: o.leader_epoch,
                        metadata: Some(o.metadata.unwrap_or_default()),
                        commit_ms: o.commit_ms,
                    })
                    .collect();
                txns.groups
                    .persist_txn_offsets(pr.producer_id, pr.producer_epoch, guard, records)
                    .await
            }
        };
        if code != ErrorCode::None {
            for c in codes.iter_mut().flatten() {
                if *c == ErrorCode::None.code() {
                    *c = code;
                }
            }
        }
    }
    let mut resp = TxnOffsetCommitResponse::default();
    resp.topics = r
        .topics
        .iter()
        .zip(codes)
        .map(|((t, ps), codes)| {
            let mut tr = TxnOffsetCommitResponseTopic::default();
            tr.name = topic_name(t);
            tr.partitions = ps
                .iter()
                .zip(codes)
                .map(|(p, code)| {
                    let mut pr = TxnOffsetCommitResponsePartition::default();
                    pr.partition_index = p.partition;
                    pr.error_code = code.code();
                    pr
                })
                .collect();
            tr
        })
        .collect();
    refused.answer(&mut resp);
    responses::encode(ApiKey::TxnOffsetCommit, version, correlation_id, &resp)
}

/// Is the group log's partition in this producer's transaction (or, `add`, added to it
/// now)? Asks the transaction coordinator: this broker's own, or another broker with
/// AddPartitionsToTxn v4. When it is only asked, a verification guard is set first, and
/// returned: the append requires it (a marker of the producer removes it), so that offsets
/// whose transaction ended meanwhile are refused, as a transactional produce is.
async fn in_transaction(txns: &Arc<Txns>, pr: &TxnProducer, add: bool) -> Result<Option<u64>, ErrorCode> {
    let TopicPartition { topic, partition } = offsets_partition();
    let guard = match add {
        true => None,
        false => {
            let hosted = txns
                .runtime
                .partitions
                .get(&topic, partition)
                .ok_or(ErrorCode::NotCoordinator)?;
            Some(hosted.producers.guard(pr.producer_id, pr.producer_epoch))
        }
    };
    if let Ok(epoch) = txns.epoch() {
        let partitions = [TopicPartition::new(topic.clone(), partition)];
        let checked = if add {
            laminar_coordinators::txn::complete::add_partitions(
                txns,
                &pr.transactional_id,
                pr.producer_id,
                pr.producer_epoch,
                &partitions,
            )
            .await
        } else {
            txns.coordinator
                .check_produce(pr.producer_id, pr.producer_epoch, &topic, partition)
        };
        return match checked {
            // Its state was dropped meanwhile: this broker stopped coordinating.
            Err(_) if txns.epoch() != Ok(epoch) => Err(ErrorCode::CoordinatorLoadInProgress),
            other => other.map(|()| guard),
        };
    }
    laminar_coordinators::txn::remote::add_or_verify(
        &txns.cluster,
        &pr.transactional_id,
        pr.producer_id,
        pr.producer_epoch,
        &topic,
        partition,
        !add,
    )
    .await
    .map(|()| guard)
    .map_err(|code| match code {
        // The transaction coordinator's errors: the client would look for the group
        // coordinator again, which is this one; it retries on this instead.
        ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable | ErrorCode::NetworkException => {
            ErrorCode::CoordinatorLoadInProgress
        }
        other => other,
    })
}
