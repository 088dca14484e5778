//! WriteTxnMarkers v1-2: writes commit or abort markers into partitions, as a coordinator
//! does. Laminar's own coordinator appends its markers directly; this is what the Admin
//! client's `abortTransaction` (`kafka-transactions abort`) sends to end a hanging
//! transaction, one whose coordinator no longer knows it. Only abort markers are taken from
//! a client: Kafka requires ClusterAction for this API, which only brokers have, and the
//! Admin client only ever aborts; a commit marker from outside could make an unfinished
//! transaction's records visible (CLUSTER_AUTHORIZATION_FAILED).

use std::sync::Arc;

use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{ProducerId, WriteTxnMarkersResponse};
use laminar_protocol::requests::WriteTxnMarkersRequest;
use laminar_protocol::{responses, ApiKey};

use super::{topic_name, Encoded};
use crate::broker::Broker;
use crate::error_codes as ec;
use crate::txn::complete::write_marker;

pub async fn handle(
    b: &Arc<Broker>,
    version: i16,
    correlation_id: i32,
    r: WriteTxnMarkersRequest,
) -> Encoded {
    let mut resp = WriteTxnMarkersResponse::default();
    for m in &r.markers {
        let mut mr = WritableTxnMarkerResult::default();
        mr.producer_id = ProducerId(m.producer_id);
        for (topic, partitions) in &m.topics {
            let mut tr = WritableTxnMarkerTopicResult::default();
            tr.name = topic_name(topic);
            for &p in partitions {
                let mut pr = WritableTxnMarkerPartitionResult::default();
                pr.partition_index = p;
                pr.error_code = if m.committed {
                    ec::CLUSTER_AUTHORIZATION_FAILED
                } else {
                    match write_marker(b, topic, p, m.producer_id, m.producer_epoch, false).await {
                        Ok(Some(_)) => ec::NONE,
                        Ok(None) => ec::UNKNOWN_TOPIC_OR_PARTITION,
                        Err(code) => code,
                    }
                };
                tr.partitions.push(pr);
            }
            mr.topics.push(tr);
        }
        resp.markers.push(mr);
    }
    // v2 adds a request field only; its response is v1's.
    let _ = version;
    responses::encode(ApiKey::WriteTxnMarkers, 1, correlation_id, &resp)
}
