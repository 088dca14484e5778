//! FindCoordinator v0-6 (batched keys from v4): the leader of the coordinator's log
//! coordinates every group and every transactional id (on a single node, this node).

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorResponse};
use laminar_protocol::requests::FindCoordinatorRequest;
use laminar_protocol::{responses, ApiKey};

use super::refused::Refused;
use super::{sb, Encoded};
use crate::context::RequestContext;
use laminar_cluster::Cluster;
use laminar_protocol::ErrorCode;

pub fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    r: FindCoordinatorRequest,
    refused: Refused,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = FindCoordinatorResponse::default();
    // 0: a group, 1: a transactional id; Kafka refuses other kinds (share groups) so.
    let error = if r.key_type == 0 || r.key_type == 1 {
        ErrorCode::None
    } else {
        ErrorCode::InvalidRequest
    };
    // Where the coordinator is, or the "none" Kafka answers with an error.
    // The leader of the coordinator's log (partition 0 of
    // `__consumer_offsets` or `__transaction_state`); none while it has no leader.
    let log = if r.key_type == 0 {
        laminar_coordinators::groups::store::OFFSETS_TOPIC
    } else {
        laminar_coordinators::txn::log::TRANSACTION_TOPIC
    };
    // The coordinators' logs are partition 0 of their topics.
    let log_leader = cluster.image().leader_endpoint(log, 0, &ctx.listener.name);
    let (error, (node_id, host, port)) = match (error, log_leader) {
        (ErrorCode::None, Some((id, host, port))) => (ErrorCode::None, (id.0, host, port as i32)),
        (ErrorCode::None, None) => (ErrorCode::CoordinatorNotAvailable, (-1, String::new(), -1)),
        (e, _) => (e, (-1, String::new(), -1)),
    };
    let host = host.as_str();
    if version >= 4 {
        resp.coordinators = r
            .keys
            .iter()
            .map(|k| {
                let mut c = Coordinator::default();
                c.key = sb(k);
                c.error_code = error.code();
                c.node_id = BrokerId(node_id);
                c.host = sb(host);
                c.port = port;
                c
            })
            .collect();
    } else {
        resp.error_code = error.code();
        resp.node_id = BrokerId(node_id);
        resp.host = sb(host);
        resp.port = port;
    }
    refused.answer(&mut resp);
    responses::encode(ApiKey::FindCoordinator, version, correlation_id, &resp)
}
