//! CreatePartitions v0-3: on one node the broker adds the logs; in a cluster the controller
//! places the new partitions and every broker creates the logs placed on it.

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
    if let Some(cluster) = &b.cluster {
        // Through the controller, which places the new partitions.
        let mut resp = CreatePartitionsResponse::default();
        for (name, count) in r.topics {
            let mut out = CreatePartitionsTopicResult::default();
            out.name = topic_name(&name);
            if let Err((code, message)) = cluster.add_partitions_here(&name, count, r.validate_only).await {
                out.error_code = code.code();
                out.error_message = Some(sb(&message));
            }
            resp.results.push(out);
        }
        return responses::encode(ApiKey::CreatePartitions, version, correlation_id, &resp);
    }
    let topics = b.topics.clone();
    let results =
        b.io.run(move || {
            r.topics
                .into_iter()
                .map(|(name, count)| {
                    let mut out = CreatePartitionsTopicResult::default();
                    out.name = topic_name(&name);
                    if let Err((code, message)) = topics.add_partitions(&name, count, r.validate_only) {
                        out.error_code = code.code();
                        out.error_message = Some(sb(&message));
                    }
                    out
                })
                .collect::<Vec<_>>()
        })
        .await;
    let mut resp = CreatePartitionsResponse::default();
    resp.results = results;
    responses::encode(ApiKey::CreatePartitions, version, correlation_id, &resp)
}
