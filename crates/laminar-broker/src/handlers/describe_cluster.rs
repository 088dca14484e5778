//! DescribeCluster v0-2 (the Admin client's `describeCluster`): every registered broker and
//! the active controller (on a single node, this node). Asked for controller endpoints (KIP-919, v1+), it answers as a Kafka
//! broker listener does: UNSUPPORTED_ENDPOINT_TYPE.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterResponse};
use kafka_protocol::ResponseError;
use laminar_protocol::requests::DescribeClusterRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, Encoded};
use crate::context::RequestContext;
use laminar_auth::acl::ResourceType;
use laminar_cluster::Cluster;

/// Kafka's `endpointType` values.
const ENDPOINT_BROKERS: i8 = 1;

/// "Not requested".
const AUTHORIZED_OPERATIONS_UNKNOWN: i32 = i32::MIN;

/// `c`: the control plane; `default_cluster_id`: the id it answers before the cluster
/// metadata has one.
pub fn handle(
    c: &Cluster,
    default_cluster_id: &str,
    ctx: &RequestContext,
    r: DescribeClusterRequest,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = DescribeClusterResponse::default();
    resp.endpoint_type = r.endpoint_type;
    resp.cluster_authorized_operations = if r.include_cluster_authorized_operations {
        ctx.authorized_operations(ResourceType::Cluster, laminar_auth::acl::CLUSTER_NAME)
    } else {
        AUTHORIZED_OPERATIONS_UNKNOWN
    };
    if r.endpoint_type != ENDPOINT_BROKERS {
        resp.error_code = ResponseError::UnsupportedEndpointType.code();
        resp.error_message = Some(sb(&format!(
            "endpoint type {} is not served here; this listener serves brokers (1)",
            r.endpoint_type
        )));
        return responses::encode(ApiKey::DescribeCluster, version, correlation_id, &resp);
    }
    let image = c.image();
    resp.cluster_id = sb(if image.cluster_id.is_empty() {
        default_cluster_id
    } else {
        &image.cluster_id
    });
    resp.controller_id = BrokerId(c.controller_id().0);
    // Fenced brokers too, marked (KIP-1073's `is_fenced`), as `laminar cluster describe`
    // and kafka-cluster tools show them.
    resp.brokers = image
        .brokers
        .values()
        // Before v2 a broker cannot be marked fenced: it is left out.
        .filter(|x| version >= 2 || !x.fenced)
        // Where the client reaches each one: on the listener it came in on.
        .filter_map(|x| Some((x, x.endpoint(&ctx.listener.name)?)))
        .map(|(x, (host, port))| {
            let mut out = DescribeClusterBroker::default();
            out.broker_id = BrokerId(x.id.0);
            out.host = sb(host);
            out.port = port as i32;
            out.is_fenced = x.fenced && version >= 2;
            out
        })
        .collect();
    responses::encode(ApiKey::DescribeCluster, version, correlation_id, &resp)
}
