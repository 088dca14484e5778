//! CreateTopics v2-7.

use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::CreateTopicsResponse;
use laminar_protocol::requests::CreateTopicsRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, topic_name, uuid, Encoded};
use std::collections::BTreeMap;

use super::refused::Refused;
use crate::changes::MetadataChanges;
use crate::context::RequestContext;
use crate::error::BrokerError;
use laminar_cluster::image::TopicInfo;
use laminar_cluster::rpc::TopicRequest;

pub async fn handle(
    changes: &MetadataChanges<'_>,
    ctx: &RequestContext,
    r: CreateTopicsRequest,
    refused: Refused,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = CreateTopicsResponse::default();
    for t in r.topics {
        let mut out = CreatableTopicResult::default();
        out.name = topic_name(&t.name);
        let configs = t
            .configs
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
        let created = create_in_cluster(
            changes,
            &t.name,
            t.num_partitions,
            t.replication_factor,
            t.assignments,
            configs,
            r.validate_only,
        )
        .await;
        match created {
            Ok(info) => {
                if let Some(info) = info {
                    if version >= 7 {
                        out.topic_id = uuid(crate::topics::parse_id(&info.id));
                    }
                    if version >= 5 {
                        out.num_partitions = info.partitions.len() as i32;
                        out.replication_factor =
                            info.partitions.first().map_or(0, |p| p.replicas.len() as i16);
                    }
                }
            }
            Err(e) => {
                out.error_code = e.code().code();
                out.error_message = Some(sb(&e.to_string()));
                if version >= 5 {
                    out.num_partitions = -1;
                    out.replication_factor = -1;
                }
            }
        }
        resp.topics.push(out);
    }
    refused.answer(&mut resp);
    responses::encode(ApiKey::CreateTopics, version, correlation_id, &resp)
}

/// A topic created through the controller: checked here, placed there.
#[allow(clippy::too_many_arguments)]
pub async fn create_in_cluster(
    changes: &MetadataChanges<'_>,
    name: &str,
    partitions: i32,
    replication_factor: i16,
    assignments: usize,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<Option<TopicInfo>, BrokerError> {
    if assignments > 0 {
        return Err(BrokerError::InvalidRequest(
            "manual replica assignment is not supported yet".into(),
        ));
    }
    let partitions = changes.topics.check_new(name, partitions, &configs)?;
    let replication_factor = match replication_factor {
        -1 => changes.config.default_replication_factor,
        rf if rf > 0 => rf as u16,
        rf => {
            return Err(BrokerError::InvalidReplicationFactor(format!(
                "replication factor {rf}: must be positive, or -1 for default.replication.factor"
            )))
        }
    };
    let created = changes
        .cluster
        .create_topic_here(TopicRequest {
            name: name.to_string(),
            partitions,
            replication_factor,
            configs,
            validate_only,
        })
        .await?;
    // Answered once in effect here: the partitions placed here are led, so that the
    // client's first produce finds them.
    changes.applied_here().await;
    Ok(created)
}
