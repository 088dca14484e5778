//! SyncGroup v0-5: the leader's assignment goes to every member.

use kafka_protocol::messages::SyncGroupResponse;
use laminar_protocol::requests::SyncGroupRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, Encoded};
use crate::context::RequestContext;
use laminar_coordinators::groups::Coordinator;
use laminar_coordinators::groups::{Reply, SyncOutcome};
use laminar_protocol::ErrorCode;

pub async fn handle(coordinator: &Coordinator, ctx: &RequestContext, r: SyncGroupRequest) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let reply = coordinator.sync(
        &r.group_id,
        r.generation_id,
        &r.member_id,
        r.group_instance_id.as_deref(),
        r.assignments,
    );
    let outcome = match reply {
        Reply::Now(o) => o,
        Reply::Later(rx) => laminar_net::waiting(rx).await.unwrap_or(SyncOutcome {
            error: ErrorCode::RebalanceInProgress,
            ..Default::default()
        }),
    };
    let mut resp = SyncGroupResponse::default();
    resp.error_code = outcome.error.code();
    if version >= 5 {
        resp.protocol_type = outcome.protocol_type.as_deref().map(sb);
        resp.protocol_name = outcome.protocol_name.as_deref().map(sb);
    }
    resp.assignment = outcome.assignment;
    responses::encode(ApiKey::SyncGroup, version, correlation_id, &resp)
}
