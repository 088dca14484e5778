//! FindCoordinator v0-6: this node coordinates every group (batched keys from v4).

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorResponse};
use laminar_protocol::requests::FindCoordinatorRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, Encoded};
use crate::broker::Broker;
use crate::error_codes as ec;

pub fn handle(b: &Broker, version: i16, correlation_id: i32, r: FindCoordinatorRequest) -> Encoded {
    let mut resp = FindCoordinatorResponse::default();
    // Transactions do not exist yet: their coordinator is not available.
    let error = if r.key_type == 0 {
        ec::NONE
    } else {
        ec::COORDINATOR_NOT_AVAILABLE
    };
    if version >= 4 {
        resp.coordinators = r
            .keys
            .iter()
            .map(|k| {
                let mut c = Coordinator::default();
                c.key = sb(k);
                c.error_code = error;
                if error == ec::NONE {
                    c.node_id = BrokerId(b.config.node_id);
                    c.host = sb(&b.advertised_host);
                    c.port = b.advertised_port as i32;
                } else {
                    c.node_id = BrokerId(-1);
                    c.port = -1;
                }
                c
            })
            .collect();
    } else {
        resp.error_code = error;
        if error == ec::NONE {
            resp.node_id = BrokerId(b.config.node_id);
            resp.host = sb(&b.advertised_host);
            resp.port = b.advertised_port as i32;
        } else {
            resp.node_id = BrokerId(-1);
            resp.port = -1;
        }
    }
    responses::encode(ApiKey::FindCoordinator, version, correlation_id, &resp)
}
