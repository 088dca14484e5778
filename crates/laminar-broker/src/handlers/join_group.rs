//! JoinGroup v2-9, with the v4+ two-step join (MEMBER_ID_REQUIRED) and static membership.

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::JoinGroupResponse;
use laminar_protocol::requests::JoinGroupRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, Encoded};
use crate::context::RequestContext;
use laminar_coordinators::groups::Coordinator;
use laminar_coordinators::groups::{JoinArgs, JoinOutcome, Reply};
use laminar_protocol::ErrorCode;

pub async fn handle(coordinator: &Coordinator, ctx: &RequestContext, r: JoinGroupRequest) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let client_id = ctx.client_id.as_str();
    let client_host = ctx.client_host();
    let reply = coordinator.join(JoinArgs {
        group_id: r.group_id,
        member_id: r.member_id.clone(),
        instance_id: r.group_instance_id,
        client_id: client_id.to_string(),
        client_host: client_host.to_string(),
        session_timeout_ms: r.session_timeout_ms,
        rebalance_timeout_ms: r.rebalance_timeout_ms,
        protocol_type: r.protocol_type,
        protocols: r.protocols,
        require_known_member_id: version >= 4,
    });
    let outcome = match reply {
        Reply::Now(o) => o,
        Reply::Later(rx) => laminar_net::waiting(rx).await.unwrap_or_else(|_| JoinOutcome {
            error: ErrorCode::UnknownMemberId,
            generation: -1,
            member_id: r.member_id,
            ..Default::default()
        }),
    };
    let mut resp = JoinGroupResponse::default();
    resp.error_code = outcome.error.code();
    resp.generation_id = outcome.generation;
    if version >= 7 {
        resp.protocol_type = outcome.protocol_type.as_deref().map(sb);
        resp.protocol_name = outcome.protocol_name.as_deref().map(sb);
    } else {
        resp.protocol_name = Some(sb(outcome.protocol_name.as_deref().unwrap_or("")));
    }
    resp.leader = sb(&outcome.leader);
    if version >= 9 {
        resp.skip_assignment = outcome.skip_assignment;
    }
    resp.member_id = sb(&outcome.member_id);
    resp.members = outcome
        .members
        .into_iter()
        .map(|(id, instance, metadata)| {
            let mut m = JoinGroupResponseMember::default();
            m.member_id = sb(&id);
            if version >= 5 {
                m.group_instance_id = instance.as_deref().map(sb);
            }
            m.metadata = metadata;
            m
        })
        .collect();
    responses::encode(ApiKey::JoinGroup, version, correlation_id, &resp)
}
