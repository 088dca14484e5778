//! DeleteTopics v1-6 (by name, and by id from v6).

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::DeleteTopicsResponse;
use laminar_protocol::requests::DeleteTopicsRequest;
use laminar_protocol::{responses, ApiKey};

use super::refused::Refused;
use super::{sb, topic_name, uuid, Encoded};
use crate::changes::MetadataChanges;
use crate::context::RequestContext;
use crate::error::BrokerError;
use laminar_protocol::ErrorCode;

pub async fn handle(
    changes: &MetadataChanges<'_>,
    ctx: &RequestContext,
    r: DeleteTopicsRequest,
    refused: Refused,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let cluster = changes.cluster;
    let mut resp = DeleteTopicsResponse::default();
    for t in r.topics {
        let mut out = DeletableTopicResult::default();
        let meta = match (&t.name, t.topic_id) {
            (Some(n), _) if !n.is_empty() => changes.topics.get(n),
            (_, Some(id)) => changes.topics.by_id(&id),
            _ => None,
        };
        out.name = t
            .name
            .as_deref()
            .or(meta.as_ref().map(|m| m.name.as_str()))
            .map(topic_name);
        if let Some(id) = t.topic_id.filter(|_| version >= 6) {
            out.topic_id = uuid(id);
        }
        let Some(meta) = meta else {
            out.error_code = if t.name.as_deref().is_some_and(|n| !n.is_empty()) {
                ErrorCode::UnknownTopicOrPartition.code()
            } else {
                ErrorCode::UnknownTopicId.code()
            };
            resp.responses.push(out);
            continue;
        };
        let deleted = if crate::topics::is_internal(&meta.name) {
            Err(BrokerError::InvalidTopic(format!(
                "{} is an internal topic",
                meta.name
            )))
        } else {
            cluster
                .delete_topic_here(&meta.name)
                .await
                .map_err(BrokerError::from)
        };
        match deleted {
            Ok(()) if version >= 6 => out.topic_id = uuid(meta.uuid()),
            Ok(()) => {}
            Err(e) => {
                out.error_code = e.code().code();
                if version >= 5 {
                    out.error_message = Some(sb(&e.to_string()));
                }
            }
        }
        resp.responses.push(out);
    }
    // Answered once in effect here: the client's next request finds it.
    changes.applied_here().await;
    refused.answer(&mut resp);
    responses::encode(ApiKey::DeleteTopics, version, correlation_id, &resp)
}
