//! ListPartitionReassignments v0 (`kafka-reassign-partitions --list`), answered truthfully for
//! one node: a partition cannot move to another broker, so none is ever being reassigned.

use kafka_protocol::messages::ListPartitionReassignmentsResponse;
use laminar_protocol::requests::ListPartitionReassignmentsRequest;
use laminar_protocol::{responses, ApiKey};

use super::Encoded;

pub fn handle(version: i16, correlation_id: i32, _r: ListPartitionReassignmentsRequest) -> Encoded {
    let resp = ListPartitionReassignmentsResponse::default();
    responses::encode(ApiKey::ListPartitionReassignments, version, correlation_id, &resp)
}
