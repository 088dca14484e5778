//! ListPartitionReassignments v0 (`kafka-reassign-partitions --list`, `--verify`): the moves
//! in progress in the cluster metadata, each with its replicas, those being added and those
//! being removed. A partition that is not moving is left out, as Kafka's controller does. On
//! one node nothing ever moves.

use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{BrokerId, ListPartitionReassignmentsResponse};
use laminar_protocol::requests::ListPartitionReassignmentsRequest;
use laminar_protocol::{responses, ApiKey};

use super::{topic_name, Encoded};
use crate::context::RequestContext;
use laminar_cluster::Cluster;

pub fn handle(cluster: &Cluster, ctx: &RequestContext, r: ListPartitionReassignmentsRequest) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = ListPartitionReassignmentsResponse::default();
    let image = cluster.image();
    let ids = |v: &[laminar_cluster::BrokerId]| v.iter().map(|x| BrokerId(x.0)).collect::<Vec<_>>();
    let wanted: Vec<(String, Option<Vec<i32>>)> = match r.topics {
        Some(topics) => topics.into_iter().map(|(t, ps)| (t, Some(ps))).collect(),
        None => image.topics.keys().map(|t| (t.clone(), None)).collect(),
    };
    for (topic, partitions) in wanted {
        let Some(t) = image.topics.get(&topic) else {
            continue;
        };
        let mut out = OngoingTopicReassignment::default();
        out.name = topic_name(&topic);
        for (i, p) in t.partitions.iter().enumerate() {
            let index = i as i32;
            if !p.reassigning() || partitions.as_ref().is_some_and(|ps| !ps.contains(&index)) {
                continue;
            }
            let mut o = OngoingPartitionReassignment::default();
            o.partition_index = index;
            o.replicas = ids(&p.replicas);
            o.adding_replicas = ids(&p.adding);
            o.removing_replicas = ids(&p.removing);
            out.partitions.push(o);
        }
        if !out.partitions.is_empty() {
            resp.topics.push(out);
        }
    }
    responses::encode(ApiKey::ListPartitionReassignments, version, correlation_id, &resp)
}
