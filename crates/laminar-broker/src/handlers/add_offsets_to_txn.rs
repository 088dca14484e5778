//! AddOffsetsToTxn v0-4: a producer will commit a group's offsets in its transaction, which
//! therefore includes the group log's partition.

use std::sync::Arc;

use kafka_protocol::messages::AddOffsetsToTxnResponse;
use laminar_protocol::requests::AddOffsetsToTxnRequest;
use laminar_protocol::{responses, ApiKey};

use super::Encoded;
use crate::broker::Broker;
use crate::error_codes as ec;
use crate::txn::complete::run;
use crate::txn::{decide_add, offsets_partition};

pub async fn handle(
    b: &Arc<Broker>,
    version: i16,
    correlation_id: i32,
    r: AddOffsetsToTxnRequest,
) -> Encoded {
    let mut resp = AddOffsetsToTxnResponse::default();
    resp.error_code = if r.group_id.is_empty() {
        ec::INVALID_GROUP_ID
    } else {
        let pr = &r.producer;
        let now = laminar_storage::now_ms();
        let partitions = [offsets_partition()];
        let decision = crate::txn::complete::begin_when_free(b, &pr.transactional_id, |m| {
            decide_add(m, pr.producer_id, pr.producer_epoch, &partitions, now)
        })
        .await;
        match run(b, &pr.transactional_id, decision).await {
            Ok(_) => ec::NONE,
            Err(code) => code,
        }
    };
    responses::encode(ApiKey::AddOffsetsToTxn, version, correlation_id, &resp)
}
