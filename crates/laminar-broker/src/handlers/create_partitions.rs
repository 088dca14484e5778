//! CreatePartitions v0-3: the controller places the new partitions and every broker creates
//! the logs placed on it.

use std::sync::Arc;

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::CreatePartitionsResponse;
use laminar_protocol::requests::CreatePartitionsRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, topic_name, Encoded};
use crate::broker::Broker;
use crate::context::RequestContext;

pub async fn handle(b: &Arc<Broker>, ctx: &RequestContext, r: CreatePartitionsRequest) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let cluster = &b.cluster;
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
    b.wait_applied().await;
    responses::encode(ApiKey::CreatePartitions, version, correlation_id, &resp)
}
