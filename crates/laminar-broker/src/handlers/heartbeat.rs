//! Heartbeat v0-4.

use kafka_protocol::messages::HeartbeatResponse;
use laminar_protocol::requests::HeartbeatRequest;
use laminar_protocol::{responses, ApiKey};

use super::Encoded;
use crate::broker::Broker;
use crate::context::RequestContext;

pub fn handle(b: &Broker, ctx: &RequestContext, r: HeartbeatRequest) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = HeartbeatResponse::default();
    resp.error_code = b
        .groups
        .heartbeat(
            &r.group_id,
            r.generation_id,
            &r.member_id,
            r.group_instance_id.as_deref(),
        )
        .code();
    responses::encode(ApiKey::Heartbeat, version, correlation_id, &resp)
}
