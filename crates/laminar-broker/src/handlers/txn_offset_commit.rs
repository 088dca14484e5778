//! TxnOffsetCommit v0-5: a group's offsets, committed with the producer's transaction (v5,
//! transaction.version 2: the group log's partition joins it implicitly). They
//! are kept (durably) with the transaction and reach the group when it commits; until then a
//! consumer that asks for stable offsets is told to wait.

use std::sync::Arc;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::TxnOffsetCommitResponse;
use laminar_protocol::requests::TxnOffsetCommitRequest;
use laminar_protocol::{responses, ApiKey};

use super::offset_commit::OFFSET_METADATA_BYTES_MAX;
use super::{topic_name, Encoded};
use crate::broker::Broker;
use crate::error_codes as ec;
use crate::txn::complete::run;
use crate::txn::{decide_offsets, PendingOffset};

const OFFSET_METADATA_TOO_LARGE: i16 = 12;

pub async fn handle(
    b: &Arc<Broker>,
    version: i16,
    correlation_id: i32,
    r: TxnOffsetCommitRequest,
) -> Encoded {
    // The consumer's generation and member, when it names them (v3+, KIP-447): a zombie
    // consumer of an older generation is refused.
    let group_error = if r.generation_id >= 0 || !r.member_id.is_empty() {
        b.groups.check_commit(
            &r.group_id,
            r.generation_id,
            &r.member_id,
            r.group_instance_id.as_deref(),
        )
    } else {
        ec::NONE
    };
    let now = laminar_storage::now_ms();
    let mut codes: Vec<Vec<i16>> = Vec::new();
    let mut offsets = Vec::new();
    for (topic, partitions) in &r.topics {
        let known = b.topics.get(topic);
        codes.push(
            partitions
                .iter()
                .map(|p| {
                    if group_error != ec::NONE {
                        return group_error;
                    }
                    if !known
                        .as_ref()
                        .is_some_and(|k| p.partition >= 0 && (p.partition as u32) < k.partitions)
                    {
                        return ec::UNKNOWN_TOPIC_OR_PARTITION;
                    }
                    if p.metadata
                        .as_ref()
                        .is_some_and(|m| m.len() > OFFSET_METADATA_BYTES_MAX)
                    {
                        return OFFSET_METADATA_TOO_LARGE;
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
                    ec::NONE
                })
                .collect(),
        );
    }
    if !offsets.is_empty() {
        let pr = &r.producer;
        let decision = crate::txn::complete::begin_when_free(b, &pr.transactional_id, |m| {
            decide_offsets(
                m,
                pr.producer_id,
                pr.producer_epoch,
                &r.group_id,
                offsets.clone(),
                version >= 5,
                now,
            )
        })
        .await;
        if let Err(code) = run(b, &pr.transactional_id, decision).await {
            for c in codes.iter_mut().flatten() {
                if *c == ec::NONE {
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
                    pr.error_code = code;
                    pr
                })
                .collect();
            tr
        })
        .collect();
    responses::encode(ApiKey::TxnOffsetCommit, version, correlation_id, &resp)
}
