//! OffsetForLeaderEpoch v2-4 (KIP-101, KIP-320): clients ask for the end offset of the leader
//! epoch of the position they hold, to detect that the log was truncated under them.
//!
//! On one node the leader epoch is 0 from a partition's creation on, and every batch is
//! written with it, so the leader epoch cache has one entry: epoch 0 starts at offset 0 and
//! ends at the log end. The answers follow Kafka's `LeaderEpochFileCache::endOffsetFor`:
//! epoch 0 ends at the log end (the high watermark, which is the log end on one node); any
//! other epoch is unknown here (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET), which tells a
//! client it cannot validate its position. A `current_leader_epoch` newer than 0 is
//! UNKNOWN_LEADER_EPOCH, as Kafka answers a client ahead of the broker.

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::OffsetForLeaderEpochResponse;
use laminar_protocol::requests::OffsetForLeaderEpochRequest;
use laminar_protocol::{responses, ApiKey};

use super::{topic_name, Encoded};
use crate::broker::Broker;
use crate::error_codes as ec;

/// The only leader epoch a partition has on one node.
const LEADER_EPOCH: i32 = 0;
const UNDEFINED_EPOCH: i32 = -1;
const UNDEFINED_EPOCH_OFFSET: i64 = -1;

pub fn handle(b: &Broker, version: i16, correlation_id: i32, r: OffsetForLeaderEpochRequest) -> Encoded {
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
                    let Some(log) = b.topics.log(&t.name, p.partition) else {
                        e.error_code = ec::UNKNOWN_TOPIC_OR_PARTITION;
                        return e;
                    };
                    if p.current_leader_epoch > LEADER_EPOCH {
                        e.error_code = ec::UNKNOWN_LEADER_EPOCH;
                        return e;
                    }
                    if p.leader_epoch == LEADER_EPOCH {
                        e.leader_epoch = LEADER_EPOCH;
                        e.end_offset = log.log_end().0;
                    }
                    e
                })
                .collect();
            out
        })
        .collect();
    responses::encode(ApiKey::OffsetForLeaderEpoch, version, correlation_id, &resp)
}
