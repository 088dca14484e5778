//! DeleteRecords v0-2 (`kafka-delete-records`, the Admin client's `deleteRecords`): moves
//! each partition's log start offset up to the offset asked for (-1: the high watermark), so
//! that consumers can no longer read below it, and answers with the new low watermark.
//!
//! The new log start is written to disk and fsynced before the answer (it must survive a
//! crash, or deleted records would come back), and whole segments below it are unlinked, so
//! the work runs on the I/O pool, never on a socket thread.

use std::sync::Arc;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::DeleteRecordsResponse;
use laminar_protocol::requests::DeleteRecordsRequest;
use laminar_protocol::{responses, ApiKey};

use super::refused::Refused;
use super::{topic_name, Encoded};
use crate::context::RequestContext;
use laminar_data::partition::Partitions;
use laminar_net::IoPool;
use laminar_protocol::ErrorCode;

pub async fn handle(
    io: &IoPool,
    hosted: &Arc<Partitions>,
    ctx: &RequestContext,
    r: DeleteRecordsRequest,
    refused: Refused,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let hosted = hosted.clone();
    let mut resp = io.run(move || delete(&hosted, r)).await;
    refused.answer(&mut resp);
    responses::encode(ApiKey::DeleteRecords, version, correlation_id, &resp)
}

fn delete(hosted: &Partitions, r: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let mut resp = DeleteRecordsResponse::default();
    resp.topics = r
        .topics
        .into_iter()
        .map(|(topic, partitions)| {
            let mut t = DeleteRecordsTopicResult::default();
            t.name = topic_name(&topic);
            t.partitions = partitions
                .into_iter()
                .map(|(partition, offset)| {
                    let mut p = DeleteRecordsPartitionResult::default();
                    p.partition_index = partition;
                    p.low_watermark = -1;
                    // An internal topic's records are its coordinator's state.
                    let deleted = if crate::topics::is_internal(&topic) {
                        Err(ErrorCode::InvalidTopicException)
                    } else {
                        hosted.delete_records(&topic, partition, offset)
                    };
                    match deleted {
                        Ok(low_watermark) => p.low_watermark = low_watermark,
                        Err(code) => p.error_code = code.code(),
                    }
                    p
                })
                .collect();
            t
        })
        .collect();
    resp
}
