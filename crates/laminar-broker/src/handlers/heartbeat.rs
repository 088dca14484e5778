//! Heartbeat v0-4.

use kafka_protocol::messages::HeartbeatResponse;
use laminar_protocol::requests::HeartbeatRequest;
use laminar_protocol::{responses, ApiKey};

use super::Encoded;
use crate::context::RequestContext;
use laminar_coordinators::groups::Coordinator;

pub fn handle(coordinator: &Coordinator, ctx: &RequestContext, r: HeartbeatRequest) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = HeartbeatResponse::default();
    resp.error_code = coordinator
        .heartbeat(
            &r.group_id,
            r.generation_id,
            &r.member_id,
            r.group_instance_id.as_deref(),
        )
        .code();
    responses::encode(ApiKey::Heartbeat, version, correlation_id, &resp)
}
