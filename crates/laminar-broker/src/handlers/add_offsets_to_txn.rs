//! AddOffsetsToTxn v0-4: a producer will commit a group's offsets in its transaction, which
//! therefore includes the group log's partition.

use std::sync::Arc;

use kafka_protocol::messages::AddOffsetsToTxnResponse;
use laminar_protocol::requests::AddOffsetsToTxnRequest;
use laminar_protocol::{responses, ApiKey};

use super::Encoded;
use crate::context::RequestContext;
use laminar_auth::acl::{Operation, ResourceType};
use laminar_coordinators::txn::complete::add_partitions;
use laminar_coordinators::txn::offsets_partition;
use laminar_coordinators::txn::service::Txns;
use laminar_protocol::ErrorCode;

pub async fn handle(txns: &Arc<Txns>, ctx: &RequestContext, r: AddOffsetsToTxnRequest) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = AddOffsetsToTxnResponse::default();
    resp.error_code = if !ctx.may(
        Operation::Write,
        ResourceType::TransactionalId,
        &r.producer.transactional_id,
    ) {
        ErrorCode::TransactionalIdAuthorizationFailed.code()
    } else if !ctx.may(Operation::Read, ResourceType::Group, &r.group_id) {
        ErrorCode::GroupAuthorizationFailed.code()
    } else if r.group_id.is_empty() {
        ErrorCode::InvalidGroupId.code()
    } else {
        let pr = &r.producer;
        let partitions = [offsets_partition()];
        add_partitions(
            txns,
            &pr.transactional_id,
            pr.producer_id,
            pr.producer_epoch,
            &partitions,
        )
        .await
        .err()
        .unwrap_or(ErrorCode::None)
        .code()
    };
    responses::encode(ApiKey::AddOffsetsToTxn, version, correlation_id, &resp)
}
