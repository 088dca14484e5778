//! DeleteGroups v0-2: only empty groups; the deletion is durable before it is answered.

use std::sync::Arc;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsResponse, GroupId};
use laminar_protocol::requests::DeleteGroupsRequest;
use laminar_protocol::{responses, ApiKey};

use super::refused::Refused;
use super::{sb, Encoded};
use crate::context::RequestContext;
use laminar_coordinators::groups::store::GroupRecord;
use laminar_coordinators::groups::write::Groups;
use laminar_protocol::ErrorCode;

pub async fn handle(
    groups: &Arc<Groups>,
    ctx: &RequestContext,
    r: DeleteGroupsRequest,
    refused: Refused,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = DeleteGroupsResponse::default();
    for g in r.groups {
        let mut code = groups.coordinator.delete_group_check(&g);
        if code == ErrorCode::None {
            code = groups
                .persist_records(vec![GroupRecord::GroupDeleted { group: g.clone() }])
                .await;
        }
        let mut d = DeletableGroupResult::default();
        d.group_id = GroupId(sb(&g));
        d.error_code = code.code();
        resp.results.push(d);
    }
    refused.answer(&mut resp);
    responses::encode(ApiKey::DeleteGroups, version, correlation_id, &resp)
}
