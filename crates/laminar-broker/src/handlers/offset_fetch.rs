//! OffsetFetch v1-9, with several groups per request from v8. A consumer that asks for stable
//! offsets (`require_stable`, KIP-447: read_committed consumers) gets UNSTABLE_OFFSET_COMMIT
//! for a partition whose offset waits in a transaction, and asks again.

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{GroupId, OffsetFetchResponse};
use laminar_cluster::TopicPartition;
use laminar_protocol::requests::{OffsetFetchGroup, OffsetFetchRequest};
use laminar_protocol::ErrorCode;
use laminar_protocol::{responses, ApiKey};

use super::refused::Refused;
use super::{sb, topic_name, Encoded};
use crate::context::RequestContext;
use laminar_auth::acl::{Operation, ResourceType};
use laminar_coordinators::groups::store::GroupStore;
use laminar_coordinators::groups::Coordinator;

/// `(topic, [(partition, offset, leader_epoch, metadata, error)])` for one group.
type Fetched = Vec<(String, Vec<(i32, i64, i32, Option<String>, i16)>)>;

fn fetch(
    groups: &Coordinator,
    store: &GroupStore,
    ctx: &RequestContext,
    g: &OffsetFetchGroup,
    require_stable: bool,
) -> Fetched {
    // Which offsets are pending first, then the offsets (see `txn_offsets_pending`).
    let pending = require_stable.then(|| store.txn_offsets_pending(&g.group_id));
    let mut out = fetch_committed(groups, g);
    // Topics the principal may not describe are left out of "all" (when named, the
    // authorization step took them out of the request).
    if g.topics.is_none() {
        out.retain(|(t, _)| ctx.may(Operation::Describe, ResourceType::Topic, t));
    }
    if let Some(pending) = pending {
        for (topic, ps) in out.iter_mut() {
            for (p, offset, epoch, _, error) in ps.iter_mut() {
                if pending.contains(&(topic.clone(), *p)) {
                    (*offset, *epoch, *error) = (-1, -1, ErrorCode::UnstableOffsetCommit.code());
                }
            }
        }
    }
    out
}

fn fetch_committed(groups: &Coordinator, g: &OffsetFetchGroup) -> Fetched {
    let committed = groups.committed(&g.group_id);
    match &g.topics {
        None => {
            let mut out: Fetched = Vec::new();
            for (TopicPartition { topic, partition: p }, c) in committed {
                if out.last().is_none_or(|(t, _)| *t != topic) {
                    out.push((topic.clone(), Vec::new()));
                }
                out.last_mut()
                    .unwrap()
                    .1
                    .push((p, c.offset, c.leader_epoch, c.metadata.clone(), 0));
            }
            out
        }
        Some(topics) => topics
            .iter()
            .map(|(topic, parts)| {
                let ps = parts
                    .iter()
                    .map(|p| match committed.get(&TopicPartition::new(topic.clone(), *p)) {
                        Some(c) => (*p, c.offset, c.leader_epoch, c.metadata.clone(), 0),
                        None => (*p, -1, -1, Some(String::new()), 0),
                    })
                    .collect();
                (topic.clone(), ps)
            })
            .collect(),
    }
}

pub fn handle(
    groups: &Coordinator,
    store: &GroupStore,
    ctx: &RequestContext,
    r: OffsetFetchRequest,
    refused: Refused,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = OffsetFetchResponse::default();
    let epoch = |e: i32| if version >= 5 { e } else { -1 };
    if version >= 8 {
        resp.groups = r
            .groups
            .iter()
            .map(|g| {
                let mut out = OffsetFetchResponseGroup::default();
                out.group_id = GroupId(sb(&g.group_id));
                out.topics = fetch(groups, store, ctx, g, r.require_stable)
                    .into_iter()
                    .map(|(t, ps)| {
                        let mut tr = OffsetFetchResponseTopics::default();
                        tr.name = topic_name(&t);
                        tr.partitions = ps
                            .into_iter()
                            .map(|(p, o, e, m, error)| {
                                let mut pr = OffsetFetchResponsePartitions::default();
                                pr.partition_index = p;
                                pr.error_code = error;
                                pr.committed_offset = o;
                                pr.committed_leader_epoch = e;
                                pr.metadata = m.as_deref().map(sb);
                                pr
                            })
                            .collect();
                        tr
                    })
                    .collect();
                out
            })
            .collect();
    } else if let Some(g) = r.groups.first() {
        resp.topics = fetch(groups, store, ctx, g, r.require_stable)
            .into_iter()
            .map(|(t, ps)| {
                let mut tr = OffsetFetchResponseTopic::default();
                tr.name = topic_name(&t);
                tr.partitions = ps
                    .into_iter()
                    .map(|(p, o, e, m, error)| {
                        let mut pr = OffsetFetchResponsePartition::default();
                        pr.partition_index = p;
                        pr.error_code = error;
                        pr.committed_offset = o;
                        pr.committed_leader_epoch = epoch(e);
                        pr.metadata = m.as_deref().map(sb);
                        pr
                    })
                    .collect();
                tr
            })
            .collect();
    }
    refused.answer(&mut resp);
    responses::encode(ApiKey::OffsetFetch, version, correlation_id, &resp)
}
