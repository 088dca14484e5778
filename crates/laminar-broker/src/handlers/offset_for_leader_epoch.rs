//! OffsetForLeaderEpoch v2-4 (KIP-101, KIP-320): followers and clients ask for the end offset
//! of a leader epoch, to find where their log or position diverged from the leader's.
//!
//! Answered from the log's leader epoch cache, as Kafka's `LeaderEpochFileCache.endOffsetFor`
//! answers: the largest epoch at or below the one asked for, and where the next begins (the
//! log end for the latest), to followers and clients alike. Not bounded by the high
//! watermark: a new leader's lags its log until its followers fetch again, and a consumer
//! whose valid position lay above it took it for a truncation and read a record twice (the
//! clock round of issue 29; a consumer's position is never above an honest epoch end). A
//! `current_leader_epoch` older than this leader's is FENCED_LEADER_EPOCH, a newer one
//! UNKNOWN_LEADER_EPOCH. On a single node every batch is in epoch 0.

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::OffsetForLeaderEpochResponse;
use laminar_protocol::requests::OffsetForLeaderEpochRequest;
use laminar_protocol::{responses, ApiKey};

use super::refused::Refused;
use super::{topic_name, Encoded};
use crate::context::RequestContext;
use laminar_data::partition::Partitions;
use laminar_protocol::ErrorCode;

const UNDEFINED_EPOCH: i32 = -1;
const UNDEFINED_EPOCH_OFFSET: i64 = -1;

pub fn handle(
    hosted: &Partitions,
    ctx: &RequestContext,
    r: OffsetForLeaderEpochRequest,
    refused: Refused,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = OffsetForLeaderEpochResponse::default();
    resp.topics = r
        .topics
        .into_iter()
        .map(|t| {
            let mut out = OffsetForLeaderTopicResult::default();
            out.topic = topic_name(&t.name);
            out.partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let mut e = EpochEndOffset::default();
                    e.partition = p.partition;
                    e.leader_epoch = UNDEFINED_EPOCH;
                    e.end_offset = UNDEFINED_EPOCH_OFFSET;
                    let led = match hosted.led(&t.name, p.partition) {
                        Ok(led) => led,
                        Err(code) => {
                            e.error_code = code.code();
                            return e;
                        }
                    };
                    let epoch = led.epoch;
                    if p.current_leader_epoch > epoch.0 {
                        e.error_code = ErrorCode::UnknownLeaderEpoch.code();
                        return e;
                    }
                    if p.current_leader_epoch >= 0 && p.current_leader_epoch < epoch.0 {
                        e.error_code = ErrorCode::FencedLeaderEpoch.code();
                        return e;
                    }
                    let (found, end) = led.log.end_offset_for_epoch(p.leader_epoch);
                    e.leader_epoch = found;
                    e.end_offset = end;
                    e
                })
                .collect();
            out
        })
        .collect();
    refused.answer(&mut resp);
    responses::encode(ApiKey::OffsetForLeaderEpoch, version, correlation_id, &resp)
}
