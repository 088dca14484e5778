//! ElectLeaders v0-2 (`kafka-leader-election`).
//!
//! A preferred election makes each partition's first replica its leader again
//! (after restarts moved leaderships away), through the controller, at a new leader epoch:
//! ELECTION_NOT_NEEDED if it leads already, PREFERRED_LEADER_NOT_AVAILABLE if it is not live
//! and in sync. A request for every partition (no partitions named) elects where the
//! preferred replica does not lead, and reports only those, as Kafka's controller does.
//! Unclean elections are not offered (a leader from outside the ISR can lose acknowledged
//! records): ELIGIBLE_LEADERS_NOT_AVAILABLE, with a message saying so.

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::ElectLeadersResponse;
use laminar_protocol::requests::ElectLeadersRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, topic_name, Encoded};
use crate::context::RequestContext;
use laminar_cluster::image::Command;
use laminar_cluster::Cluster;
use laminar_protocol::ErrorCode;

pub async fn handle(c: &Cluster, ctx: &RequestContext, r: ElectLeadersRequest) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = ElectLeadersResponse::default();
    let requested = match r.topic_partitions {
        Some(named) => named,
        None => {
            let image = c.image();
            image
                .topics
                .values()
                .map(|t| {
                    let ps = (0..t.partitions.len() as i32)
                        .filter(|p| {
                            image
                                .partition(&t.name, *p)
                                .is_some_and(|info| info.replicas.first() != Some(&info.leader))
                        })
                        .collect::<Vec<i32>>();
                    (t.name.clone(), ps)
                })
                .filter(|(_, ps)| !ps.is_empty())
                .collect()
        }
    };
    for (topic, partitions) in requested {
        let mut out = ReplicaElectionResult::default();
        out.topic = topic_name(&topic);
        for p in partitions {
            let (code, message) = elect(c, r.election_type, &topic, p).await;
            let mut pr = PartitionResult::default();
            pr.partition_id = p;
            pr.error_code = code;
            pr.error_message = message.map(|m| sb(&m));
            out.partition_result.push(pr);
        }
        resp.replica_election_results.push(out);
    }
    responses::encode(ApiKey::ElectLeaders, version, correlation_id, &resp)
}

/// One partition's election: its error code and message.
async fn elect(c: &Cluster, election_type: i8, topic: &str, partition: i32) -> (i16, Option<String>) {
    if c.image().partition(topic, partition).is_none() {
        return (
            ErrorCode::UnknownTopicOrPartition.code(),
            Some(format!("no partition {topic}-{partition}")),
        );
    }
    if election_type != 0 {
        return (
            ErrorCode::EligibleLeadersNotAvailable.code(),
            Some("unclean leader election is not offered: a leader from outside the ISR can lose acknowledged records".into()),
        );
    }
    let command = Command::ElectPreferredLeader {
        topic: topic.to_string(),
        partition,
    };
    match c.write(command).await {
        Ok(r) if r.error_code == ErrorCode::None => {
            // Answered once this broker's image shows it, as a describe right after expects.
            c.wait_for(|i| {
                i.partition(topic, partition)
                    .is_some_and(|p| p.replicas.first() == Some(&p.leader))
            })
            .await;
            (ErrorCode::None.code(), None)
        }
        Ok(r) => (r.error_code.code(), Some(r.message)),
        Err(e) => (
            ErrorCode::RequestTimedOut.code(),
            Some(format!("the controller: {e}")),
        ),
    }
}
