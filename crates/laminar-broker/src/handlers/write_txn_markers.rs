//! WriteTxnMarkers v1-2: writes commit or abort markers into partitions led here. In a
//! cluster, the transaction coordinator sends it to the leaders of its transaction's
//! partitions (its own it writes directly). It is also what the Admin client's
//! `abortTransaction` (`kafka-transactions abort`) sends to end a hanging transaction, one
//! whose coordinator no longer knows it.
//!
//! Kafka requires ClusterAction for this API, which only brokers have. Laminar has no
//! authentication yet, so it takes commit markers only as a coordinator sends them: in a
//! cluster of several, carrying the current epoch of the transaction log's leader (an older
//! one is a fenced coordinator's: TRANSACTION_COORDINATOR_FENCED); on a single node (a
//! cluster of one), never (the only coordinator is this broker's own;
//! CLUSTER_AUTHORIZATION_FAILED). A commit marker from anywhere else could make an
//! unfinished transaction's records visible. The Admin client only ever aborts.
//!
//! On a single node no abort from the wire ends a transaction behind its coordinator
//! either: an abort of a transaction the coordinator runs there becomes the coordinator's
//! own abort, which fences its producer (so that its commit fails, instead of being answered
//! for records a marker aborted); only a hanging transaction, which no coordinator will end,
//! is ended by the marker itself; a producer with no transaction open there gets nothing
//! written. In a cluster a leader cannot tell a coordinator's abort from a client's until
//! brokers authenticate to each other (CLUSTER_ACTION).
//!
//! No marker may carry a coordinator epoch above the transaction log's leader epoch
//! (INVALID_REQUEST): the partition keeps the largest epoch it has seen per producer and
//! refuses older ones, so one such marker would fence every real coordinator's later
//! markers, and the producer's next transaction would stay open for good.

use std::sync::Arc;

use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{ProducerId, WriteTxnMarkersResponse};
use laminar_protocol::requests::WriteTxnMarkersRequest;
use laminar_protocol::{responses, ApiKey};

use super::{topic_name, Encoded};
use crate::context::RequestContext;
use laminar_auth::acl::Operation;
use laminar_coordinators::txn::complete::{abort_from_client, write_marker};
use laminar_coordinators::txn::service::Txns;
use laminar_protocol::ErrorCode;

pub async fn handle(txns: &Arc<Txns>, ctx: &RequestContext, r: WriteTxnMarkersRequest) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
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
                // With an authorizer, only brokers (CLUSTER_ACTION) send markers.
                let refused = if ctx.may_on_cluster(Operation::ClusterAction) {
                    refused(txns, m.committed, m.coordinator_epoch)
                } else {
                    Some(ErrorCode::ClusterAuthorizationFailed.code())
                };
                pr.error_code = match refused {
                    Some(code) => code,
                    // Alone, this broker writes its own markers: an abort from the wire is
                    // a client's, and may not end a transaction behind its coordinator.
                    None if txns.cluster.alone() => {
                        debug_assert!(!m.committed, "a commit marker from a client is refused");
                        match abort_from_client(
                            txns,
                            topic,
                            p,
                            m.producer_id,
                            m.producer_epoch,
                            m.coordinator_epoch,
                        )
                        .await
                        {
                            Ok(()) => ErrorCode::None.code(),
                            Err(code) => code.code(),
                        }
                    }
                    None => {
                        match write_marker(
                            txns,
                            topic,
                            p,
                            m.producer_id,
                            m.producer_epoch,
                            m.coordinator_epoch,
                            m.committed,
                        )
                        .await
                        {
                            Ok(Some(_)) => ErrorCode::None.code(),
                            Ok(None) => ErrorCode::UnknownTopicOrPartition.code(),
                            Err(code) => code.code(),
                        }
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

/// Why a marker is refused, if it is: one from a coordinator epoch that does not exist yet,
/// or a commit marker that is not a current coordinator's.
fn refused(txns: &Txns, committed: bool, coordinator_epoch: i32) -> Option<i16> {
    let image = txns.cluster.image();
    let log = image.partition(laminar_coordinators::txn::log::TRANSACTION_TOPIC, 0);
    // A coordinator whose image is ahead of this broker's retries the marker (its epoch is
    // in this broker's image a moment later).
    if coordinator_epoch > log.map_or(-1, |p| p.leader_epoch.0) {
        return Some(ErrorCode::InvalidRequest.code());
    }
    if !committed {
        return None;
    }
    // Alone, this broker is the only transaction coordinator, and it writes its markers
    // itself: a commit marker from the wire is a client's.
    if txns.cluster.alone() {
        return Some(ErrorCode::ClusterAuthorizationFailed.code());
    }
    match log {
        Some(p) if coordinator_epoch >= p.leader_epoch.0 => None,
        Some(_) => Some(ErrorCode::TransactionCoordinatorFenced.code()),
        None => Some(ErrorCode::ClusterAuthorizationFailed.code()),
    }
}
