//! ListOffsets v1-11: earliest (-2), latest (-1: the last stable offset for `read_committed`),
//! max timestamp (-3, v7+), earliest local (-4, v8+: the earliest, as nothing is tiered),
//! latest tiered (-5, v9+) and earliest pending upload (-6, v11+): none, offset -1, as Kafka
//! answers without tiered storage; and by timestamp.

use std::sync::Arc;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::ListOffsetsResponse;
use laminar_protocol::requests::ListOffsetsRequest;
use laminar_protocol::{responses, ApiKey};

use super::refused::Refused;
use super::{topic_name, Encoded};
use crate::context::RequestContext;
use laminar_data::partition::Partitions;
use laminar_net::IoPool;
use laminar_protocol::ErrorCode;

pub const LATEST_TIMESTAMP: i64 = -1;
pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;
/// KIP-405's local log start; without tiered storage, the log start.
pub const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;
/// KIP-1005's last offset in remote storage: with none, offset -1 (Kafka's answer when
/// `remote.storage.enable` is off).
pub const LATEST_TIERED_TIMESTAMP: i64 = -5;
/// KIP-1023's first offset not yet uploaded to remote storage: with none, offset -1.
pub const EARLIEST_PENDING_UPLOAD_TIMESTAMP: i64 = -6;

fn lookup(
    hosted: &Partitions,
    version: i16,
    topic: &str,
    partition: i32,
    timestamp: i64,
    read_committed: bool,
) -> ListOffsetsPartitionResponse {
    let mut p = ListOffsetsPartitionResponse::default();
    p.partition_index = partition;
    p.timestamp = -1;
    p.offset = -1;
    let led = match hosted.led(topic, partition) {
        Ok(led) => led,
        Err(code) => {
            p.error_code = code.code();
            return p;
        }
    };
    let tiered = (version >= 9 && timestamp == LATEST_TIERED_TIMESTAMP)
        || (version >= 11 && timestamp == EARLIEST_PENDING_UPLOAD_TIMESTAMP);
    if version >= 4 && !tiered {
        p.leader_epoch = led.epoch.0;
    }
    // A consumer's end is the high watermark, and a read_committed consumer's the last
    // stable offset below it. With `log.read.after.fsync`, asking for it asks for the fsync
    // that makes appends nobody has read yet visible (not waited for: behind a slow disk
    // this answer would wait with it).
    let hw = if timestamp == LATEST_TIMESTAMP {
        led.high_watermark_for_reader()
    } else {
        led.high_watermark()
    };
    let log = led.log;
    let result = match timestamp {
        LATEST_TIMESTAMP if read_committed => Ok(Some((log.last_stable_offset().min(hw), -1))),
        LATEST_TIMESTAMP => Ok(Some((hw, -1))),
        EARLIEST_TIMESTAMP => Ok(Some((log.log_start(), -1))),
        EARLIEST_LOCAL_TIMESTAMP if version >= 8 => Ok(Some((log.log_start(), -1))),
        LATEST_TIERED_TIMESTAMP if version >= 9 => Ok(None),
        EARLIEST_PENDING_UPLOAD_TIMESTAMP if version >= 11 => Ok(None),
        // The first record carrying the largest timestamp (ListOffsets v7+, KIP-734).
        MAX_TIMESTAMP => match log.max_timestamp_ms() {
            Some(ts) => log.offset_for_timestamp(ts),
            None => Ok(None),
        },
        ts => log.offset_for_timestamp(ts),
    };
    match result {
        Ok(Some((offset, ts))) => {
            p.offset = offset.0;
            p.timestamp = ts;
        }
        Ok(None) => {}
        Err(e) => {
            crate::warn!("list offsets of {topic}-{partition}: {e}");
            p.error_code = ErrorCode::KafkaStorageError.code();
        }
    }
    p
}

pub async fn handle(
    io: &IoPool,
    hosted: &Arc<Partitions>,
    ctx: &RequestContext,
    r: ListOffsetsRequest,
    refused: Refused,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let hosted = hosted.clone();
    // Timestamp lookups read batch headers from disk: the I/O pool, not here.
    let topics = io
        .run(move || {
            r.topics
                .iter()
                .map(|t| {
                    let mut tr = ListOffsetsTopicResponse::default();
                    tr.name = topic_name(&t.name);
                    tr.partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            let committed = r.isolation_level == crate::handlers::fetch::READ_COMMITTED;
                            lookup(
                                &hosted,
                                version,
                                &t.name,
                                p.partition_index,
                                p.timestamp,
                                committed,
                            )
                        })
                        .collect();
                    tr
                })
                .collect::<Vec<_>>()
        })
        .await;
    let mut resp = ListOffsetsResponse::default();
    resp.topics = topics;
    refused.answer(&mut resp);
    // v11's answer is v10's, field for field (KIP-1023 adds only a timestamp value): the
    // codec (generated from Kafka 4.1) knows up to v10.
    responses::encode(ApiKey::ListOffsets, version.min(10), correlation_id, &resp)
}
