//! The group log's writes: group records appended to `__consumer_offsets-0` on its storage
//! thread, made durable (and, in a cluster, replicated), then applied to the coordinator.

use laminar_protocol::ErrorCode;
use std::sync::Arc;
use std::time::Duration;

use crate::broker::Broker;
use crate::groups::store::{GroupRecord, GroupStore};
use laminar_data::replicate::ReplicateError;
use laminar_data::storage_pool::partition_key;

impl Broker {
    /// Appends group records to the internal log, waits for their fsync, then applies them.
    /// Returns a Kafka error code.
    pub async fn persist_group_records(self: &Arc<Self>, records: Vec<GroupRecord>) -> ErrorCode {
        if records.is_empty() {
            return ErrorCode::None;
        }
        self.append_group_log(GroupWrite::Records(records)).await
    }

    /// Appends offsets committed in a transaction to the group log, in the producer's
    /// transactional batch, and waits until they are durable (and replicated); they are
    /// applied when the transaction's commit marker is written. Returns a Kafka error code.
    pub async fn persist_txn_offsets(
        self: &Arc<Self>,
        producer_id: i64,
        producer_epoch: i16,
        guard: Option<u64>,
        records: Vec<GroupRecord>,
    ) -> ErrorCode {
        if records.is_empty() {
            return ErrorCode::None;
        }
        self.append_group_log(GroupWrite::Transactional {
            producer_id,
            producer_epoch,
            guard,
            records,
        })
        .await
    }

    /// Makes the coordinator's own changes durable: group metadata that changed, expired
    /// offsets and groups that are gone (see `Coordinator::take_changes`).
    pub async fn persist_group_changes(self: &Arc<Self>) -> ErrorCode {
        let retention = Duration::from_secs(self.config.offsets_retention_minutes * 60);
        self.append_group_log(GroupWrite::Changes(retention)).await
    }

    async fn append_group_log(self: &Arc<Self>, write: GroupWrite) -> ErrorCode {
        // In a cluster, only the coordinator writes the group log, at its leader epoch, and a
        // write counts once the in-sync replicas hold it.
        if let Err(code) = self.group_coordinator_ready() {
            return code;
        }
        let leader = match self.leader_write(crate::groups::store::OFFSETS_TOPIC, 0) {
            Ok(leader) => leader,
            Err(_) => return ErrorCode::NotCoordinator,
        };
        let epoch = leader.epoch;
        let b = self.clone();
        // What to write is settled on the storage thread, which appends every batch of the
        // group log in turn: there, what is appended but not yet applied (`pending`) is
        // exactly what precedes this batch in the log.
        let appended = self
            .storage
            .run(partition_key(crate::groups::store::OFFSETS_TOPIC, 0), move || {
                // Pending first, then memory: a record applied in between is in one of them.
                let pending = b.group_store.pending_view();
                let (records, apply, producer) = match write {
                    GroupWrite::Records(records) => (records, Apply::Now, None),
                    // Already applied to memory by `take_changes`.
                    GroupWrite::Changes(retention) => {
                        (b.groups.take_changes(retention, &pending), Apply::No, None)
                    }
                    GroupWrite::Transactional {
                        producer_id,
                        producer_epoch,
                        guard,
                        records,
                    } => {
                        // As a transactional produce is checked: not from a fenced epoch (a
                        // marker with a newer one was written here), and, when it was only
                        // verified, not after a marker of its own epoch ended the transaction.
                        let (t, p) = (crate::groups::store::OFFSETS_TOPIC, 0);
                        if b.producers
                            .epoch(t, p, producer_id)
                            .is_some_and(|e| e > producer_epoch)
                        {
                            return Err(GroupLogError::Refused(ErrorCode::InvalidProducerEpoch));
                        }
                        if guard.is_some_and(|token| {
                            !b.producers.guarded(t, p, producer_id, producer_epoch, token)
                        }) {
                            return Err(GroupLogError::Refused(ErrorCode::InvalidTxnState));
                        }
                        (
                            records,
                            Apply::AtMarker(producer_id),
                            Some((producer_id, producer_epoch)),
                        )
                    }
                };
                if records.is_empty() {
                    return Ok(None);
                }
                let mut batch = GroupStore::encode(&records, &b.groups, &pending, producer)
                    .map_err(|e| GroupLogError::Encode(e.to_string()))?;
                // On the storage thread, where a fetcher would append: still the leader?
                if b.group_coordinator_ready().is_err() {
                    return Err(GroupLogError::NotCoordinator);
                }
                let log = b.group_store.log();
                let info =
                    log.append_as(&mut batch, laminar_storage::AppendMode::Leader { epoch: epoch.0 })?;
                let apply = match apply {
                    Apply::Now => {
                        // In log order: before any later batch exists.
                        b.group_store
                            .pending
                            .lock()
                            .unwrap()
                            .insert(info.last_offset, records);
                        None
                    }
                    Apply::No => None,
                    Apply::AtMarker(producer_id) => {
                        // In log order, before its marker can be appended.
                        b.group_store.add_txn_offsets(producer_id, records);
                        Some(())
                    }
                };
                Ok::<_, GroupLogError>(Some((info, apply)))
            })
            .await;
        let (info, apply) = match appended {
            Ok(Ok(None)) => return ErrorCode::None,
            Ok(Ok(Some(appended))) => appended,
            Ok(Err(GroupLogError::Encode(e))) => {
                crate::warn!("group records refused: {e}");
                return ErrorCode::InvalidRequest;
            }
            Ok(Err(GroupLogError::NotCoordinator)) => return ErrorCode::NotCoordinator,
            Ok(Err(GroupLogError::Refused(code))) => return code,
            Ok(Err(GroupLogError::Storage(e))) => {
                crate::warn!("persisting group records: {e}");
                return ReplicateError::Storage(e.to_string()).coordinator_code();
            }
            Err(panicked) => {
                crate::warn!("persisting group records: {panicked}");
                return ErrorCode::UnknownServerError;
            }
        };
        leader.appended(info.log_end, &self.data_arrived);
        let log = self.group_store.log();
        match leader
            .durable(&log, info.last_offset, GROUP_WRITE_REPLICATION)
            .wait()
            .await
        {
            Ok(_) => {
                // A transaction's offsets wait for its marker.
                if apply.is_none() {
                    self.group_store.apply_durable(&self.groups, info.last_offset);
                }
                ErrorCode::None
            }
            Err(e) => {
                crate::warn!("persisting group records: {e}");
                e.coordinator_code()
            }
        }
    }
}

/// How long a group write waits for the in-sync replicas (Kafka's
/// `offsets.commit.timeout.ms`).
const GROUP_WRITE_REPLICATION: Duration = Duration::from_secs(5);

/// What `append_group_log` writes.
enum GroupWrite {
    /// Records of a request (a commit, a deletion), applied to memory once durable.
    Records(Vec<GroupRecord>),
    /// The coordinator's own changes, taken with this offsets retention.
    Changes(Duration),
    /// Offsets committed in a producer's transaction (TxnOffsetCommit): written in its
    /// transactional batch, applied when its commit marker is.
    Transactional {
        producer_id: i64,
        producer_epoch: i16,
        /// The verification guard set before the transaction coordinator was asked, when it
        /// was only asked whether the group log's partition is in the transaction.
        guard: Option<u64>,
        records: Vec<GroupRecord>,
    },
}

/// When the records of a group write reach memory.
enum Apply {
    /// Once durable, in log order.
    Now,
    /// Never: already there.
    No,
    /// At the marker of this producer's transaction (`GroupStore::end_txn_offsets`).
    AtMarker(i64),
}

#[derive(Debug, thiserror::Error)]
enum GroupLogError {
    #[error("{0}")]
    Encode(String),
    /// In a cluster: this broker stopped leading the group log before the append.
    #[error("no longer the group coordinator")]
    NotCoordinator,
    /// A transaction's offsets that may not be written (a Kafka error code).
    #[error("refused with error code {0}")]
    Refused(ErrorCode),
    #[error(transparent)]
    Storage(#[from] laminar_storage::StorageError),
}
