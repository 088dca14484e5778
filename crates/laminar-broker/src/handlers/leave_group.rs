//! LeaveGroup v0-5, with batch leave (v3+) by member id or group.instance.id.

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::LeaveGroupResponse;
use laminar_protocol::requests::LeaveGroupRequest;
use laminar_protocol::{responses, ApiKey, ErrorCode};

use super::{sb, Encoded};
use crate::context::RequestContext;
use laminar_coordinators::groups::Coordinator;

pub fn handle(coordinator: &Coordinator, ctx: &RequestContext, r: LeaveGroupRequest) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = LeaveGroupResponse::default();
    match coordinator.leave(&r.group_id, &r.members) {
        Err(code) => resp.error_code = code.code(),
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
