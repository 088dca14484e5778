//! FindCoordinator v0-6: this node coordinates every group and every transactional id
//! (batched keys from v4).

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorResponse};
use laminar_protocol::requests::FindCoordinatorRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, Encoded};
use crate::broker::Broker;
use crate::error_codes as ec;

pub fn handle(b: &Broker, version: i16, correlation_id: i32, r: FindCoordinatorRequest) -> Encoded {
    let mut resp = FindCoordinatorResponse::default();
    // 0: a group, 1: a transactional id; Kafka refuses other kinds (share groups) so.
    let error = if r.key_type == 0 || r.key_type == 1 {
        ec::NONE
    } else {
        ec::INVALID_REQUEST
    };
    // Where the coordinator is, or the "none" Kafka answers with an error.
    let (node_id, host, port) = if error == ec::NONE {
        (
            b.config.node_id,
            b.advertised_host.as_str(),
            b.advertised_port as i32,
        )
    } else {
        (-1, "", -1)
    };
    if version >= 4 {
        resp.coordinators = r
            .keys
            .iter()
            .map(|k| {
                let mut c = Coordinator::default();
                c.key = sb(k);
                c.error_code = error;
                c.node_id = BrokerId(node_id);
                c.host = sb(host);
                c.port = port;
                c
            })
            .collect();
    } else {
        resp.error_code = error;
        resp.node_id = BrokerId(node_id);
        resp.host = sb(host);
        resp.port = port;
    }
    responses::encode(ApiKey::FindCoordinator, version, correlation_id, &resp)
}
