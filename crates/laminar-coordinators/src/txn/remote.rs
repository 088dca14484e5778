//! A partition leader's questions to the transaction coordinator when that is another
//! broker (in a cluster): before the first transactional batch of a transaction is appended
//! here, AddPartitionsToTxn v4 asks the coordinator to add the partition (Produce v12,
//! transaction version 2), or whether it is in the transaction (older versions, KIP-890's
//! verification), as Kafka's partition leaders do.

use std::sync::atomic::{AtomicI64, Ordering};

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ProducerId, TopicName, TransactionalId,
};

use super::log::TRANSACTION_TOPIC;
use crate::sb;
use laminar_cluster::Cluster;
use laminar_protocol::ErrorCode;

const ADD_PARTITIONS_TO_TXN_VERSION: i16 = 4;
/// When a failed call to the coordinator was last logged.
static LAST_WARNED_MS: AtomicI64 = AtomicI64::new(0);

/// Asks the coordinator to add `topic`-`partition` to the transaction of `transactional_id`
/// (or, `verify_only`, whether it is in it). Returns the coordinator's error code.
pub async fn add_or_verify(
    c: &Cluster,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    topic: &str,
    partition: i32,
    verify_only: bool,
) -> Result<(), ErrorCode> {
    let image = c.image();
    let coordinator = image
        .partition(TRANSACTION_TOPIC, 0)
        .map(|p| p.leader)
        .filter(|l| *l >= laminar_cluster::BrokerId(0))
        .ok_or(ErrorCode::CoordinatorNotAvailable)?;
    let mut t = AddPartitionsToTxnTopic::default();
    t.name = TopicName(sb(topic));
    t.partitions = vec![partition];
    let mut txn = AddPartitionsToTxnTransaction::default();
    txn.transactional_id = TransactionalId(sb(transactional_id));
    txn.producer_id = ProducerId(producer_id);
    txn.producer_epoch = producer_epoch;
    txn.verify_only = verify_only;
    txn.topics = vec![t];
    let mut req = AddPartitionsToTxnRequest::default();
    req.transactions = vec![txn];
    let resp: AddPartitionsToTxnResponse = c
        .clients
        .call(
            &image,
            coordinator,
            ApiKey::AddPartitionsToTxn,
            ADD_PARTITIONS_TO_TXN_VERSION,
            &req,
        )
        .await
        .map_err(|e| {
            // Every transactional produce asks while the coordinator's broker is down and
            // not yet fenced: once a second is enough to say so.
            let now = laminar_storage::now_ms();
            if now - LAST_WARNED_MS.swap(now, Ordering::Relaxed) >= 1_000 {
                crate::warn!("AddPartitionsToTxn to broker {coordinator} (the transaction coordinator): {e}");
            }
            ErrorCode::NetworkException
        })?;
    if resp.error_code != ErrorCode::None.code() {
        return Err(ErrorCode::from_wire(resp.error_code));
    }
    let code = resp
        .results_by_transaction
        .iter()
        .flat_map(|r| r.topic_results.iter())
        .flat_map(|t| t.results_by_partition.iter())
        .find(|p| p.partition_index == partition)
        .map_or(ErrorCode::UnknownServerError, |p| {
            ErrorCode::from_wire(p.partition_error_code)
        });
    if code == ErrorCode::None {
        Ok(())
    } else {
        Err(code)
    }
}
