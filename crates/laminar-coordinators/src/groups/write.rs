//! The group coordinator as a service: its state (`Coordinator`), its log (`GroupStore`),
//! its hold on `__consumer_offsets-0`, and its writes: group records appended to that log on
//! its storage thread through the coordinators' runtime, made durable (and, in a cluster,
//! replicated), then applied to the coordinator.

use laminar_protocol::ErrorCode;
use std::sync::Arc;
use std::time::Duration;

use crate::groups::store::{GroupRecord, GroupStore, OFFSETS_TOPIC};
use crate::groups::Coordinator;
use crate::runtime::{CoordinatorLog, CoordinatorRuntime};
use laminar_cluster::LeaderEpoch;
use laminar_data::partition::{Append, WriteError};
use laminar_net::IoPool;
use laminar_storage::Store;

/// The group coordinator: what its handlers, the image publisher (which loads and unloads
/// it) and its timers hold.
pub struct Groups {
    /// The groups, their members and their committed offsets.
    pub coordinator: Coordinator,
    /// Its log, and the records appended to it not yet applied.
    pub store: GroupStore,
    /// Its hold on `__consumer_offsets-0`.
    pub hold: CoordinatorLog,
    runtime: Arc<CoordinatorRuntime>,
    /// Kafka's `offsets.retention.minutes`.
    offsets_retention: Duration,
    /// Held by each round of [`Groups::persist_changes`] until its records are durable: a
    /// round that finds a change already taken by the round before it must not answer until
    /// that round's records are durable.
    changes_round: tokio::sync::Mutex<()>,
}

impl Groups {
    pub fn new(
        coordinator: Coordinator,
        store: GroupStore,
        runtime: Arc<CoordinatorRuntime>,
        offsets_retention: Duration,
    ) -> Groups {
        Groups {
            coordinator,
            store,
            hold: CoordinatorLog::new(OFFSETS_TOPIC),
            runtime,
            offsets_retention,
            changes_round: tokio::sync::Mutex::new(()),
        }
    }

    /// This broker leads the group log now, at `epoch`: it becomes the group coordinator once
    /// it has read the groups from it (on the I/O pool: a disk read). Until then group
    /// requests get COORDINATOR_LOAD_IN_PROGRESS.
    pub async fn load(self: &Arc<Self>, io: &IoPool, store: Arc<Store>, epoch: LeaderEpoch) {
        let g = self.clone();
        match io.run(move || g.store.reload(&store, &g.coordinator)).await {
            Ok(n) => {
                crate::info!("coordinating groups at epoch {epoch}: {n} group records loaded");
                self.hold.loaded(epoch);
            }
            Err(e) => crate::warn!("loading the groups at epoch {epoch}: {e}"),
        }
    }

    /// This broker no longer leads the group log: it forgets the groups (their members are
    /// answered, and find the new coordinator).
    pub fn unload(&self) {
        if self.hold.unloaded() {
            crate::info!("no longer coordinating groups");
        }
        self.coordinator.shutdown();
        self.coordinator.clear();
    }

    /// Whether this broker coordinates groups now: it leads `__consumer_offsets-0` and has
    /// loaded the groups from it. The error code a group request gets if not.
    pub fn ready(&self) -> Result<(), ErrorCode> {
        self.runtime.ready(&self.hold).map(|_| ())
    }

    /// Appends group records to the internal log, waits for their fsync, then applies them.
    /// Returns a Kafka error code.
    pub async fn persist_records(self: &Arc<Self>, records: Vec<GroupRecord>) -> ErrorCode {
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
    /// offsets and groups that are gone (see `Coordinator::take_changes`). When it returns,
    /// every change made before the call is durable (or the error says why not): a request
    /// that changed a group (a LeaveGroup) answers after it, as Kafka answers once its
    /// records are committed, so a broker killed after the answer comes back with the change.
    pub async fn persist_changes(self: &Arc<Self>) -> ErrorCode {
        // One round at a time: a change taken by a round in flight is durable only when that
        // round is done, and this one may find nothing left to write.
        let _round = self.changes_round.lock().await;
        self.append_group_log(GroupWrite::Changes(self.offsets_retention))
            .await
    }

    async fn append_group_log(self: &Arc<Self>, write: GroupWrite) -> ErrorCode {
        // Only the coordinator writes the group log, at its leader epoch, and a write counts
        // once the in-sync replicas hold it.
        if let Err(code) = self.ready() {
            return code;
        }
        let g = self.clone();
        // What to write is settled on the storage thread, which appends every batch of the
        // group log in turn: there, what is appended but not yet applied (`pending`) is
        // exactly what precedes this batch in the log.
        let job = move |append: &Append| {
            // Pending first, then memory: a record applied in between is in one of them.
            let pending = g.store.pending_view();
            let (records, apply, producer) = match write {
                GroupWrite::Records(records) => (records, Apply::Now, None),
                // Already applied to memory by `take_changes`.
                GroupWrite::Changes(retention) => {
                    (g.coordinator.take_changes(retention, &pending), Apply::No, None)
                }
                GroupWrite::Transactional {
                    producer_id,
                    producer_epoch,
                    guard,
                    records,
                } => {
                    // As a transactional produce is checked: not from a fenced epoch (a marker
                    // with a newer one was written here), and, when it was only verified, not
                    // after a marker of its own epoch ended the transaction.
                    let producers = append.producers;
                    if producers.epoch(producer_id).is_some_and(|e| e > producer_epoch) {
                        return Err(WriteError::Refused(ErrorCode::InvalidProducerEpoch));
                    }
                    if guard.is_some_and(|token| !producers.guarded(producer_id, producer_epoch, token)) {
                        return Err(WriteError::Refused(ErrorCode::InvalidTxnState));
                    }
                    let producer = Some((producer_id, producer_epoch));
                    (records, Apply::AtMarker(producer_id), producer)
                }
            };
            if records.is_empty() {
                return Ok(None);
            }
            let appended = GroupStore::encode(&records, &g.coordinator, &pending, producer)
                .map_err(|e| WriteError::Encode(e.to_string()))
                .and_then(|mut batch| append.append(&mut batch));
            let info = match appended {
                Ok(info) => info,
                Err(e) => {
                    // Changes taken from memory and not written are taken again next round.
                    if matches!(apply, Apply::No) {
                        g.coordinator.metadata_not_written(&records);
                    }
                    return Err(e);
                }
            };
            match apply {
                // In log order: before any later batch exists.
                Apply::Now => {
                    let mut pending = g.store.pending.lock().unwrap();
                    pending.insert(info.last_offset, records);
                }
                Apply::No => {}
                // In log order, before its marker can be appended.
                Apply::AtMarker(producer_id) => g.store.add_txn_offsets(producer_id, records),
            }
            Ok(Some((info, apply)))
        };
        let written = self
            .runtime
            .write(&self.hold, Some(GROUP_WRITE_REPLICATION), job)
            .await;
        match written {
            Ok(None) => ErrorCode::None,
            Ok(Some((info, apply))) => {
                // Applied once durable, in log order (with whatever earlier writes left
                // pending); a transaction's offsets wait for its marker.
                if !matches!(apply, Apply::AtMarker(_)) {
                    self.store.apply_durable(&self.coordinator, info.last_offset);
                }
                ErrorCode::None
            }
            Err(e) => {
                if !matches!(e, WriteError::Refused(_) | WriteError::NotLeader) {
                    crate::warn!("persisting group records: {e}");
                }
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
