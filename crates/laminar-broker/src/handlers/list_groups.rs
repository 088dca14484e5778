//! ListGroups v0-5, with the state filter from v4.

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsResponse};
use laminar_protocol::requests::ListGroupsRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, Encoded};
use crate::context::RequestContext;
use laminar_auth::acl::{Operation, ResourceType};
use laminar_coordinators::groups::Coordinator;

pub fn handle(coordinator: &Coordinator, ctx: &RequestContext, r: ListGroupsRequest) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = ListGroupsResponse::default();
    let groups = coordinator.groups.lock().unwrap();
    let mut listed: Vec<ListedGroup> = groups
        .values()
        // Kafka lists the groups the principal may describe (all of them with DESCRIBE on
        // the cluster).
        .filter(|g| {
            ctx.may_on_cluster(Operation::Describe)
                || ctx.may(Operation::Describe, ResourceType::Group, &g.id)
        })
        .filter(|g| {
            r.states_filter.is_empty()
                || r.states_filter
                    .iter()
                    .any(|s| s.eq_ignore_ascii_case(g.state.name()))
        })
        .map(|g| {
            let mut l = ListedGroup::default();
            l.group_id = GroupId(sb(&g.id));
            l.protocol_type = sb(g.protocol_type.as_deref().unwrap_or("consumer"));
            if version >= 4 {
                l.group_state = sb(g.state.name());
            }
            if version >= 5 {
                l.group_type = sb("classic");
            }
            l
        })
        .collect();
    listed.sort_by(|a, b| a.group_id.0.as_str().cmp(b.group_id.0.as_str()));
    resp.groups = listed;
    responses::encode(ApiKey::ListGroups, version, correlation_id, &resp)
}
