//! ElectLeaders v0-2 (`kafka-leader-election`), answered truthfully for one node: every
//! partition's only replica is its leader, preferred or not, so no election is ever needed.
//! Partitions named in the request get ELECTION_NOT_NEEDED (or UNKNOWN_TOPIC_OR_PARTITION);
//! a request for every partition gets an empty result, as Kafka's controller leaves out the
//! partitions that needed no election.

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::ElectLeadersResponse;
use laminar_protocol::requests::ElectLeadersRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, topic_name, Encoded};
use crate::broker::Broker;
use crate::error_codes as ec;

pub fn handle(b: &Broker, version: i16, correlation_id: i32, r: ElectLeadersRequest) -> Encoded {
    let mut resp = ElectLeadersResponse::default();
    resp.replica_election_results = r
        .topic_partitions
        .unwrap_or_default()
        .into_iter()
        .map(|(topic, partitions)| {
            let mut out = ReplicaElectionResult::default();
            out.topic = topic_name(&topic);
            out.partition_result = partitions
                .into_iter()
                .map(|p| {
                    let mut pr = PartitionResult::default();
                    pr.partition_id = p;
                    if b.topics.log(&topic, p).is_some() {
                        pr.error_code = ec::ELECTION_NOT_NEEDED;
                        pr.error_message = Some(sb("the partition's only replica is its leader"));
                    } else {
                        pr.error_code = ec::UNKNOWN_TOPIC_OR_PARTITION;
                        pr.error_message = Some(sb(&format!("no partition {topic}-{p}")));
                    }
                    pr
                })
                .collect();
            out
        })
        .collect();
    responses::encode(ApiKey::ElectLeaders, version, correlation_id, &resp)
}
