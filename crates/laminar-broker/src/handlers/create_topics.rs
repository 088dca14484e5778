//! CreateTopics v2-7.

use std::sync::Arc;

use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::CreateTopicsResponse;
use laminar_protocol::requests::CreateTopicsRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, topic_name, uuid, Encoded};
use crate::broker::Broker;
use crate::error_codes as ec;

pub async fn handle(b: &Arc<Broker>, version: i16, correlation_id: i32, r: CreateTopicsRequest) -> Encoded {
    let topics = b.topics.clone();
    let results =
        b.io.run(move || {
            r.topics
                .into_iter()
                .map(|t| {
                    let mut out = CreatableTopicResult::default();
                    out.name = topic_name(&t.name);
                    if t.assignments > 0 {
                        out.error_code = ec::INVALID_REQUEST;
                        out.error_message =
                            Some(sb("manual replica assignment is not supported on a single node"));
                        return out;
                    }
                    let configs = t
                        .configs
                        .into_iter()
                        .filter_map(|(k, v)| v.map(|v| (k, v)))
                        .collect();
                    match topics.create(
                        &t.name,
                        t.num_partitions,
                        t.replication_factor,
                        configs,
                        r.validate_only,
                    ) {
                        Ok(meta) => {
                            if version >= 7 {
                                out.topic_id = uuid(meta.uuid());
                            }
                            if version >= 5 {
                                out.num_partitions = meta.partitions as i32;
                                out.replication_factor = 1;
                            }
                        }
                        Err((code, message)) => {
                            out.error_code = code;
                            out.error_message = Some(sb(&message));
                            if version >= 5 {
                                out.num_partitions = -1;
                                out.replication_factor = -1;
                            }
                        }
                    }
                    out
                })
                .collect::<Vec<_>>()
        })
        .await;
    let mut resp = CreateTopicsResponse::default();
    resp.topics = results;
    responses::encode(ApiKey::CreateTopics, version, correlation_id, &resp)
}
