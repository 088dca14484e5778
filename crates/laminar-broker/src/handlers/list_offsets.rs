//! ListOffsets v1-7: earliest (-2), latest (-1: the last stable offset for `read_committed`),
//! max timestamp (-3), and by timestamp.

use std::sync::Arc;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::ListOffsetsResponse;
use laminar_protocol::requests::ListOffsetsRequest;
use laminar_protocol::{responses, ApiKey};

use super::{topic_name, Encoded};
use crate::context::RequestContext;
use laminar_auth::acl::{Operation, ResourceType};
use laminar_data::partition::Partitions;
use laminar_net::IoPool;
use laminar_protocol::ErrorCode;

pub const LATEST_TIMESTAMP: i64 = -1;
pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;

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
    if version >= 4 {
        p.leader_epoch = led.epoch.0;
    }
    // A consumer's end is the high watermark, and a read_committed consumer's the last
    // stable offset below it.
    let hw = led.high_watermark();
    let log = led.log;
    let result = match timestamp {
        LATEST_TIMESTAMP if read_committed => Ok(Some((log.last_stable_offset().min(hw), -1))),
        LATEST_TIMESTAMP => Ok(Some((hw, -1))),
        EARLIEST_TIMESTAMP => Ok(Some((log.log_start(), -1))),
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
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let hosted = hosted.clone();
    // DESCRIBE on each topic, as Kafka checks it.
    let allowed: Vec<bool> = r
        .topics
        .iter()
        .map(|t| ctx.may(Operation::Describe, ResourceType::Topic, &t.name))
        .collect();
    // Timestamp lookups read batch headers from disk: the I/O pool, not here.
    let topics = io
        .run(move || {
            r.topics
                .iter()
                .zip(allowed)
                .map(|(t, allowed)| {
                    let mut tr = ListOffsetsTopicResponse::default();
                    tr.name = topic_name(&t.name);
                    tr.partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            if !allowed {
                                let mut refused = ListOffsetsPartitionResponse::default();
                                refused.partition_index = p.partition_index;
                                refused.error_code = ErrorCode::TopicAuthorizationFailed.code();
                                refused.offset = -1;
                                refused.timestamp = -1;
                                return refused;
                            }
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
    responses::encode(ApiKey::ListOffsets, version, correlation_id, &resp)
}
