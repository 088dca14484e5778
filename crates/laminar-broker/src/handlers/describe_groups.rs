//! DescribeGroups v0-6: state, protocol and members with their assignments. A group that does
//! not exist is Dead, and from v6 also GROUP_ID_NOT_FOUND (KIP-1043), as Kafka answers.

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsResponse, GroupId};
use laminar_protocol::requests::DescribeGroupsRequest;
use laminar_protocol::{responses, ApiKey};

use super::refused::Refused;
use super::{sb, Encoded};
use crate::context::RequestContext;
use laminar_auth::acl::ResourceType;
use laminar_coordinators::groups::Coordinator;
use laminar_coordinators::groups::GroupState;

pub fn handle(
    coordinator: &Coordinator,
    ctx: &RequestContext,
    r: DescribeGroupsRequest,
    refused: Refused,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = DescribeGroupsResponse::default();
    let groups = coordinator.groups.lock().unwrap();
    for id in r.groups {
        let mut d = DescribedGroup::default();
        d.group_id = GroupId(sb(&id));
        if version >= 3 && r.include_authorized_operations {
            d.authorized_operations = ctx.authorized_operations(ResourceType::Group, &id);
        }
        match groups.get(&id) {
            None => {
                d.group_state = sb(GroupState::Dead.name());
                if version >= 6 {
                    d.error_code = laminar_protocol::ErrorCode::GroupIdNotFound.code();
                    d.error_message = Some(sb(&format!("Group {id} not found.")));
                }
            }
            Some(g) => {
                d.group_state = sb(g.state.name());
                d.protocol_type = sb(g.protocol_type.as_deref().unwrap_or(""));
                d.protocol_data = sb(g.protocol_name.as_deref().unwrap_or(""));
                let stable = g.state == GroupState::Stable;
                d.members = g
                    .members
                    .values()
                    .map(|m| {
                        let mut dm = DescribedGroupMember::default();
                        dm.member_id = sb(&m.id);
                        if version >= 4 {
                            dm.group_instance_id = m.instance_id.as_deref().map(sb);
                        }
                        dm.client_id = sb(&m.client_id);
                        dm.client_host = sb(&m.client_host);
                        if stable {
                            dm.member_metadata = g
                                .protocol_name
                                .as_deref()
                                .map(|p| {
                                    m.protocols
                                        .iter()
                                        .find(|(n, _)| n == p)
                                        .map(|(_, md)| md.clone())
                                        .unwrap_or_default()
                                })
                                .unwrap_or_default();
                            dm.member_assignment = m.assignment.clone();
                        }
                        dm
                    })
                    .collect();
            }
        }
        resp.groups.push(d);
    }
    drop(groups);
    refused.answer(&mut resp);
    responses::encode(ApiKey::DescribeGroups, version, correlation_id, &resp)
}
