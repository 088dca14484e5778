//! OffsetCommit v2-9. A commit is acknowledged only once it is fsynced in the internal
//! groups log.

use std::sync::Arc;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::OffsetCommitResponse;
use laminar_protocol::requests::OffsetCommitRequest;
use laminar_protocol::{responses, ApiKey};

use super::refused::Refused;
use super::{topic_name, Encoded};
use crate::context::RequestContext;
use crate::topics::Topics;
use laminar_coordinators::groups::store::GroupRecord;
use laminar_coordinators::groups::write::Groups;
use laminar_protocol::ErrorCode;

/// Commit metadata strings longer than this are refused (offset.metadata.max.bytes).
pub const OFFSET_METADATA_BYTES_MAX: usize = 4096;

pub async fn handle(
    groups: &Arc<Groups>,
    topics: &Topics,
    ctx: &RequestContext,
    r: OffsetCommitRequest,
    refused: Refused,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let group_error = groups.coordinator.check_commit(
        &r.group_id,
        r.generation_id,
        &r.member_id,
        r.group_instance_id.as_deref(),
    );
    let now = laminar_data::now_ms();
    let mut records = Vec::new();
    let mut codes: Vec<Vec<ErrorCode>> = Vec::new();
    for t in &r.topics {
        let known = topics.get(&t.name);
        codes.push(
            t.partitions
                .iter()
                .map(|(p, offset, epoch, metadata)| {
                    if group_error != ErrorCode::None {
                        return group_error;
                    }
                    if !known
                        .as_ref()
                        .is_some_and(|k| *p >= 0 && (*p as u32) < k.partitions)
                    {
                        return ErrorCode::UnknownTopicOrPartition;
                    }
                    if metadata
                        .as_ref()
                        .is_some_and(|m| m.len() > OFFSET_METADATA_BYTES_MAX)
                    {
                        return ErrorCode::OffsetMetadataTooLarge;
                    }
                    records.push(GroupRecord::Offset {
                        group: r.group_id.clone(),
                        topic: t.name.clone(),
                        partition: *p,
                        offset: *offset,
                        leader_epoch: *epoch,
                        // As Kafka: a commit without metadata stores "" (and
                        // OffsetFetch answers "", before a restart and after).
                        metadata: Some(metadata.clone().unwrap_or_default()),
                        commit_ms: now,
                    });
                    ErrorCode::None
                })
                .collect(),
        );
    }
    let code = groups.persist_records(records).await;
    if code != ErrorCode::None {
        for c in codes.iter_mut().flatten() {
            if *c == ErrorCode::None {
                *c = code;
            }
        }
    }
    let mut resp = OffsetCommitResponse::default();
    resp.topics = r
        .topics
        .iter()
        .zip(codes)
        .map(|(t, codes)| {
            let mut tr = OffsetCommitResponseTopic::default();
            tr.name = topic_name(&t.name);
            tr.partitions = t
                .partitions
                .iter()
                .zip(codes)
                .map(|((p, ..), code)| {
                    let mut pr = OffsetCommitResponsePartition::default();
                    pr.partition_index = *p;
                    pr.error_code = code.code();
                    pr
                })
                .collect();
            tr
        })
        .collect();
    refused.answer(&mut resp);
    responses::encode(ApiKey::OffsetCommit, version, correlation_id, &resp)
}
