//! Metadata v0-12, with topic ids and auto-creation.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataResponse};
use laminar_protocol::requests::MetadataRequest;
use laminar_protocol::{responses, ApiKey};

use super::refused::{metadata_topic, Refused};
use super::{sb, topic_name, uuid, Encoded};
use crate::changes::MetadataChanges;
use crate::context::RequestContext;
use crate::topics::TopicMeta;
use laminar_auth::acl::{Operation, ResourceType};
use laminar_cluster::image::{ClusterImage, TopicInfo, NO_LEADER};
use laminar_protocol::ErrorCode;

/// A topic this broker knows, as the cluster metadata places it; while the image does not
/// hold it yet (an internal topic before the controller created it), LEADER_NOT_AVAILABLE.
fn topic_entry(image: &ClusterImage, version: i16, t: &TopicMeta) -> MetadataResponseTopic {
    match image.topics.get(&t.name) {
        Some(info) => cluster_topic_entry(version, info, image),
        None => metadata_topic(version, Some(t.name.clone()), None, ErrorCode::LeaderNotAvailable),
    }
}

/// A topic as the cluster metadata places it: leaders, epochs, replicas, ISRs, and the
/// replicas on fenced brokers as offline.
fn cluster_topic_entry(version: i16, t: &TopicInfo, image: &ClusterImage) -> MetadataResponseTopic {
    let mut out = MetadataResponseTopic::default();
    out.name = Some(topic_name(&t.name));
    out.is_internal = crate::topics::is_internal(&t.name);
    if version >= 10 {
        out.topic_id = uuid(crate::topics::parse_id(&t.id));
    }
    let live = |id: &laminar_cluster::BrokerId| image.brokers.get(id).is_some_and(|b| !b.fenced);
    out.partitions = t
        .partitions
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut part = MetadataResponsePartition::default();
            part.partition_index = i as i32;
            part.leader_id = BrokerId(p.leader.0);
            if p.leader == NO_LEADER {
                part.error_code = ErrorCode::LeaderNotAvailable.code();
            }
            if version >= 7 {
                part.leader_epoch = p.leader_epoch.0;
            }
            part.replica_nodes = p.replicas.iter().map(|r| BrokerId(r.0)).collect();
            part.isr_nodes = p.isr.iter().map(|r| BrokerId(r.0)).collect();
            if version >= 5 {
                part.offline_replicas = p
                    .replicas
                    .iter()
                    .filter(|r| !live(r))
                    .map(|r| BrokerId(r.0))
                    .collect();
            }
            part
        })
        .collect();
    out
}

/// `cluster_id`: the one it names before the metadata holds one.
pub async fn handle(
    changes: &MetadataChanges<'_>,
    cluster_id: &str,
    ctx: &RequestContext,
    r: MetadataRequest,
    refused: Refused,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let (include_topic_operations, include_cluster_operations) = (
        r.include_topic_authorized_operations,
        r.include_cluster_authorized_operations,
    );
    let mut resp = MetadataResponse::default();
    let (c, topics) = (changes.cluster, changes.topics);
    let image = c.image();
    // Fenced brokers are left out, as Kafka leaves them out: clients should not connect to
    // them. Before this broker is registered, this broker alone.
    resp.brokers = image
        .brokers
        .values()
        .filter(|x| !x.fenced)
        // Where the client reaches each one: on the listener it came in on (a broker without
        // that listener is left out, as Kafka leaves it out).
        .filter_map(|x| Some((x.id, x.endpoint(&ctx.listener.name)?)))
        .map(|(id, (host, port))| {
            let mut out = MetadataResponseBroker::default();
            out.node_id = BrokerId(id.0);
            out.host = sb(host);
            out.port = port as i32;
            out
        })
        .collect();
    if resp.brokers.is_empty() {
        let mut alone = MetadataResponseBroker::default();
        alone.node_id = BrokerId(c.node_id.0);
        alone.host = sb(&ctx.listener.host);
        alone.port = ctx.listener.port as i32;
        resp.brokers = vec![alone];
    }
    if version >= 2 {
        resp.cluster_id = Some(sb(if image.cluster_id.is_empty() {
            cluster_id
        } else {
            &image.cluster_id
        }));
    }
    if version >= 1 {
        // As a KRaft broker answers: a live broker, not the controller itself, which clients
        // do not reach. Admin requests sent here are forwarded to the active controller, so
        // this broker names itself while it is live (or before it is registered).
        let me = image.brokers.get(&c.node_id).is_none_or(|x| !x.fenced);
        resp.controller_id = BrokerId(if me {
            c.node_id.0
        } else {
            image
                .live_brokers()
                .first()
                .copied()
                .unwrap_or(laminar_cluster::BrokerId(-1))
                .0
        });
    }
    match r.topics {
        None => {
            // Only the topics the client may describe, as Kafka lists them.
            resp.topics = topics
                .list()
                .iter()
                .filter(|t| ctx.may(Operation::Describe, ResourceType::Topic, &t.name))
                .map(|t| topic_entry(&image, version, t))
                .collect()
        }
        Some(wanted) => {
            // As Kafka does, a topic asked for twice is answered once (and created once).
            let mut asked = std::collections::HashSet::new();
            for w in wanted {
                if !asked.insert((w.name.clone(), w.topic_id)) {
                    continue;
                }
                let found = match (&w.name, w.topic_id) {
                    (Some(name), _) => topics.get(name),
                    (None, Some(id)) => topics.by_id(&id),
                    (None, None) => None,
                };
                if let Some(t) = found {
                    resp.topics.push(topic_entry(&c.image(), version, &t));
                    continue;
                }
                let Some(name) = w.name.clone() else {
                    resp.topics.push(metadata_topic(
                        version,
                        None,
                        w.topic_id,
                        ErrorCode::UnknownTopicId,
                    ));
                    continue;
                };
                // Creating it takes CREATE on the cluster or the topic, as Kafka checks it.
                let may_create = ctx.may_on_cluster(Operation::Create)
                    || ctx.may(Operation::Create, ResourceType::Topic, &name);
                if r.allow_auto_topic_creation && changes.config.auto_create_topics_enable && may_create {
                    let created = crate::handlers::create_topics::create_in_cluster(
                        changes,
                        &name,
                        -1,
                        -1,
                        0,
                        Default::default(),
                        false,
                    )
                    .await;
                    match (created, c.image().topics.get(&name)) {
                        (_, Some(info)) => resp.topics.push(cluster_topic_entry(version, info, &c.image())),
                        (Err(e), None) => {
                            resp.topics
                                .push(metadata_topic(version, Some(name), None, e.code()))
                        }
                        (Ok(_), None) => resp.topics.push(metadata_topic(
                            version,
                            Some(name),
                            None,
                            ErrorCode::LeaderNotAvailable,
                        )),
                    }
                } else {
                    resp.topics.push(metadata_topic(
                        version,
                        Some(name),
                        None,
                        ErrorCode::UnknownTopicOrPartition,
                    ));
                }
            }
        }
    }
    refused.answer(&mut resp);
    // What the principal may do with each topic it was told about (v8+), and, before v11,
    // with the cluster: only when asked, as Kafka answers.
    if version >= 8 && include_topic_operations {
        for t in resp.topics.iter_mut().filter(|t| t.error_code == 0) {
            if let Some(name) = &t.name {
                t.topic_authorized_operations = ctx.authorized_operations(ResourceType::Topic, name);
            }
        }
    }
    if (8..=10).contains(&version) && include_cluster_operations {
        resp.cluster_authorized_operations =
            ctx.authorized_operations(ResourceType::Cluster, laminar_auth::acl::CLUSTER_NAME);
    }
    responses::encode(ApiKey::Metadata, version, correlation_id, &resp)
}
