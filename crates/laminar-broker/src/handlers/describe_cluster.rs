//! DescribeCluster v0-2 (the Admin client's `describeCluster`): this one node, which is also
//! the controller. Asked for controller endpoints (KIP-919, v1+), it answers as a Kafka
//! broker listener does: UNSUPPORTED_ENDPOINT_TYPE.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterResponse};
use kafka_protocol::ResponseError;
use laminar_protocol::requests::DescribeClusterRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, Encoded};
use crate::broker::Broker;

/// Kafka's `endpointType` values.
const ENDPOINT_BROKERS: i8 = 1;

/// "Not requested or not known": Laminar has no ACLs to report operations from.
const AUTHORIZED_OPERATIONS_UNKNOWN: i32 = i32::MIN;

pub fn handle(b: &Broker, version: i16, correlation_id: i32, r: DescribeClusterRequest) -> Encoded {
    let mut resp = DescribeClusterResponse::default();
    resp.endpoint_type = r.endpoint_type;
    resp.cluster_authorized_operations = AUTHORIZED_OPERATIONS_UNKNOWN;
    if r.endpoint_type != ENDPOINT_BROKERS {
        resp.error_code = ResponseError::UnsupportedEndpointType.code();
        resp.error_message = Some(sb(&format!(
            "endpoint type {} is not served here; this listener serves brokers (1)",
            r.endpoint_type
        )));
        return responses::encode(ApiKey::DescribeCluster, version, correlation_id, &resp);
    }
    resp.cluster_id = sb(&b.cluster_id);
    resp.controller_id = BrokerId(b.config.node_id);
    let mut broker = DescribeClusterBroker::default();
    broker.broker_id = BrokerId(b.config.node_id);
    broker.host = sb(&b.advertised_host);
    broker.port = b.advertised_port as i32;
    broker.rack = None;
    broker.is_fenced = false;
    resp.brokers = vec![broker];
    responses::encode(ApiKey::DescribeCluster, version, correlation_id, &resp)
}
