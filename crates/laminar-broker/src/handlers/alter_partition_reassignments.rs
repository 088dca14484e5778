//! AlterPartitionReassignments v0-1 (`kafka-reassign-partitions --execute`, Admin's
//! `alterPartitionReassignments`): in a cluster, each partition's move goes to the controller
//! (KIP-455): the new replicas join as followers and catch up, and once all of the target is
//! in sync the old ones are removed (a removed leader hands over at a new epoch). A `null`
//! replica list cancels a move in progress. The answer comes once the controller has
//! accepted the move, not when it is done: ListPartitionReassignments shows the progress.
//! On one node no partition can move: only a move to that node itself is accepted. v1
//! (KIP-860) may forbid a move that changes the replica count.

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::AlterPartitionReassignmentsResponse;
use laminar_protocol::requests::AlterPartitionReassignmentsRequest;
use laminar_protocol::{responses, ApiKey, ErrorCode};

use super::{sb, topic_name, Encoded};
use crate::context::RequestContext;
use laminar_cluster::image::Command;
use laminar_cluster::Cluster;
use laminar_cluster::ClusterError;

pub async fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    r: AlterPartitionReassignmentsRequest,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = AlterPartitionReassignmentsResponse::default();
    resp.allow_replication_factor_change = r.allow_replication_factor_change;
    for (topic, partitions) in r.topics {
        let mut out = ReassignableTopicResponse::default();
        out.name = topic_name(&topic);
        for (partition, target) in partitions {
            let mut p = ReassignablePartitionResponse::default();
            p.partition_index = partition;
            let now = cluster
                .image()
                .partition(&topic, partition)
                .map(|p| p.replicas.len());
            match (&target, now) {
                // As Kafka's controller refuses it, in its words.
                (Some(target), Some(now)) if !r.allow_replication_factor_change && target.len() != now => {
                    p.error_code = ErrorCode::InvalidReplicationFactor.code();
                    p.error_message = Some(sb(&format!(
                        "The replication factor is changed from {now} to {}",
                        target.len()
                    )));
                }
                _ => {
                    if let Err(e) = reassign(cluster, &topic, partition, target).await {
                        p.error_code = e.code().code();
                        p.error_message = Some(sb(&e.to_string()));
                    }
                }
            }
            out.partitions.push(p);
        }
        resp.responses.push(out);
    }
    responses::encode(
        ApiKey::AlterPartitionReassignments,
        version,
        correlation_id,
        &resp,
    )
}

async fn reassign(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    target: Option<Vec<i32>>,
) -> Result<(), ClusterError> {
    let command = Command::ReassignPartition {
        topic: topic.to_string(),
        partition,
        target: target.map(|t| t.into_iter().map(laminar_cluster::BrokerId).collect()),
    };
    cluster.write(command).await?.into_result()
}
