//! LeaveGroup v0-5, with batch leave (v3+) by member id or group.instance.id. Answered once
//! what the leave changed is durable (the group's new generation; Empty when its last member
//! left), as Kafka answers once its records are committed: a broker killed right after a
//! consumer group has left comes back with the group empty, not with members that left.

use std::sync::Arc;

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::LeaveGroupResponse;
use laminar_protocol::requests::LeaveGroupRequest;
use laminar_protocol::{responses, ApiKey, ErrorCode};

use super::{sb, Encoded};
use crate::context::RequestContext;
use laminar_coordinators::groups::write::Groups;

pub async fn handle(groups: &Arc<Groups>, ctx: &RequestContext, r: LeaveGroupRequest) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = LeaveGroupResponse::default();
    let left = groups.coordinator.leave(&r.group_id, &r.members);
    // The members are gone from memory whatever the write does; a failed write is the
    // whole request's error, as in Kafka (the client may retry, or the group's new
    // coordinator loads it).
    let written = match left {
        Ok(_) => groups.persist_changes().await,
        Err(_) => ErrorCode::None,
    };
    match left {
        Err(code) => resp.error_code = code.code(),
        Ok(_) if written != ErrorCode::None => resp.error_code = written.code(),
        Ok(codes) => {
            if version >= 3 {
                resp.members = r
                    .members
                    .iter()
                    .zip(codes)
                    .map(|((id, instance), code)| {
                        let mut m = MemberResponse::default();
                        m.member_id = sb(id);
                        m.group_instance_id = instance.as_deref().map(sb);
                        m.error_code = code.code();
                        m
                    })
                    .collect();
            } else {
                resp.error_code = codes.first().copied().unwrap_or(ErrorCode::None).code();
            }
        }
    }
    responses::encode(ApiKey::LeaveGroup, version, correlation_id, &resp)
}
