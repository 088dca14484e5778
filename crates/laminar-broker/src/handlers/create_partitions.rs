//! CreatePartitions v0-3: the controller places the new partitions and every broker creates
//! the logs placed on it.

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::CreatePartitionsResponse;
use laminar_protocol::requests::CreatePartitionsRequest;
use laminar_protocol::{responses, ApiKey};

use super::refused::Refused;
use super::{sb, topic_name, Encoded};
use crate::applied::AppliedImages;
use crate::context::RequestContext;
use laminar_cluster::Cluster;

pub async fn handle(
    cluster: &Cluster,
    applied: &AppliedImages,
    ctx: &RequestContext,
    r: CreatePartitionsRequest,
    refused: Refused,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    // Through the controller, which places the new partitions.
    let mut resp = CreatePartitionsResponse::default();
    for (name, count) in r.topics {
        let mut out = CreatePartitionsTopicResult::default();
        out.name = topic_name(&name);
        if let Err(e) = cluster.add_partitions_here(&name, count, r.validate_only).await {
            out.error_code = e.code().code();
            out.error_message = Some(sb(&e.to_string()));
        }
        resp.results.push(out);
    }
    // Answered once in effect here: the client's next request finds it.
    applied.wait(cluster).await;
    refused.answer(&mut resp);
    responses::encode(ApiKey::CreatePartitions, version, correlation_id, &resp)
}
