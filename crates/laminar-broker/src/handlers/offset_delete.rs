//! OffsetDelete v0: removes committed offsets of a group with no active members.

use std::sync::Arc;

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::OffsetDeleteResponse;
use laminar_protocol::requests::OffsetDeleteRequest;
use laminar_protocol::{responses, ApiKey};

use super::refused::Refused;
use super::{topic_name, Encoded};
use crate::context::RequestContext;
use laminar_coordinators::groups::store::GroupRecord;
use laminar_coordinators::groups::write::Groups;
use laminar_protocol::ErrorCode;

pub async fn handle(
    groups: &Arc<Groups>,
    ctx: &RequestContext,
    r: OffsetDeleteRequest,
    refused: Refused,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = OffsetDeleteResponse::default();
    let check = groups.coordinator.delete_group_check(&r.group_id);
    // Active members may still be consuming these partitions, as Kafka's
    // GROUP_SUBSCRIBED_TO_TOPIC says; Laminar refuses for any group with members.
    let group_error = match check {
        ErrorCode::NonEmptyGroup => ErrorCode::GroupSubscribedToTopic,
        other => other,
    };
    if group_error != ErrorCode::None {
        resp.error_code = group_error.code();
        refused.answer(&mut resp);
        return responses::encode(ApiKey::OffsetDelete, version, correlation_id, &resp);
    }
    // A topic the caller may not read keeps its offsets: the authorization step took it out.
    let mut records = Vec::new();
    for (t, ps) in &r.topics {
        for p in ps {
            records.push(GroupRecord::OffsetDeleted {
                group: r.group_id.clone(),
                topic: t.clone(),
                partition: *p,
            });
        }
    }
    let code = groups.persist_records(records).await;
    resp.topics = r
        .topics
        .iter()
        .map(|(t, ps)| {
            let mut tr = OffsetDeleteResponseTopic::default();
            tr.name = topic_name(t);
            tr.partitions = ps
                .iter()
                .map(|p| {
                    let mut pr = OffsetDeleteResponsePartition::default();
                    pr.partition_index = *p;
                    pr.error_code = code.code();
                    pr
                })
                .collect();
            tr
        })
        .collect();
    refused.answer(&mut resp);
    responses::encode(ApiKey::OffsetDelete, version, correlation_id, &resp)
}
