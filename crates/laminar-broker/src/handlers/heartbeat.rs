//! Heartbeat v0-4.

use kafka_protocol::messages::HeartbeatResponse;
use laminar_protocol::requests::HeartbeatRequest;
use laminar_protocol::{responses, ApiKey};

use super::Encoded;
use crate::broker::Broker;

pub fn handle(b: &Broker, version: i16, correlation_id: i32, r: HeartbeatRequest) -> Encoded {
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
