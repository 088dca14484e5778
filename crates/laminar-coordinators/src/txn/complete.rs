//! What the coordinator does with the broker: writes its records durably, ends
//! transactions (markers into the partitions, offsets into the group log), aborts the ones
//! that timed out, and forgets ids that expired.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use laminar_records::{control_batch, ControlType};
use laminar_storage::Offset;

use super::log::encode_batch;
use super::service::Txns;
use super::{Decision, TxnMeta, TxnStatus};
use crate::groups::store::GroupRecord;
use laminar_cluster::TopicPartition;
use laminar_data::partition::{Append, WriteError};
use laminar_protocol::ErrorCode;

/// How long a completion waits before trying a partition again whose marker failed.
const MARKER_RETRY_MS: u64 = 1_000;

/// Appends `changes` to the transaction log and waits until they are durable.
pub async fn persist(txns: &Arc<Txns>, changes: Vec<(String, Option<TxnMeta>)>) -> Result<(), ErrorCode> {
    persist_with(txns, changes, true).await
}

/// Appends `changes` to the transaction log; with `durable`, waits for the fsync too, and in
/// a cluster for the in-sync replicas of `__transaction_state-0`.
async fn persist_with(
    txns: &Arc<Txns>,
    changes: Vec<(String, Option<TxnMeta>)>,
    durable: bool,
) -> Result<(), ErrorCode> {
    let job = move |append: &Append| {
        let info = append.append(&mut encode_batch(&changes))?;
        Ok(Some((info, ())))
    };
    let within = durable.then_some(TXN_WRITE_REPLICATION);
    txns.runtime.write(&txns.hold, within, job).await.map_err(|e| {
        if !matches!(e, WriteError::NotLeader | WriteError::Refused(_)) {
            crate::warn!("writing the transaction log: {e}");
        }
        e.coordinator_code()
    })?;
    Ok(())
}

/// How long a write to the transaction log waits for its in-sync replicas.
const TXN_WRITE_REPLICATION: Duration = Duration::from_secs(5);

/// The longest a request waits for its transactional id to be free (a change being written,
/// or the previous transaction's markers) before it answers CONCURRENT_TRANSACTIONS and the
/// client retries. A producer's next transaction usually starts right after the last one's
/// EndTxn answer, while its markers are being made durable; waiting here spares it the
/// client's retry backoff (franz-go's grows to a second), and costs nothing else: only this
/// request waits, on a timer and a notification, never on a socket thread.
pub const CONCURRENT_WAIT_MS: u64 = 2_000;

/// Decides a change of `id` as [`TxnCoordinator::begin`] does, but waits (up to
/// [`CONCURRENT_WAIT_MS`]) while the answer would be CONCURRENT_TRANSACTIONS.
///
/// [`TxnCoordinator::begin`]: super::TxnCoordinator::begin
pub async fn begin_when_free<T>(
    txns: &Arc<Txns>,
    id: &str,
    mut decide: impl FnMut(Option<&TxnMeta>) -> Result<Decision<T>, ErrorCode>,
) -> Result<Decision<T>, ErrorCode> {
    let epoch = txns.epoch()?;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(CONCURRENT_WAIT_MS);
    loop {
        // Registered before looking, so that a change in between still wakes this request.
        let changed = txns.coordinator.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let decided = txns.coordinator.begin(id, &mut decide);
        // In a cluster this broker may have stopped coordinating while it waited (its state
        // emptied): what it decided then is no answer; the client finds the coordinator.
        match txns.epoch() {
            Ok(now) if now == epoch => {}
            _ => {
                if let Ok(Decision::Write(_)) = decided {
                    txns.coordinator.finish(id, None);
                }
                return Err(ErrorCode::NotCoordinator);
            }
        }
        match decided {
            Err(ErrorCode::ConcurrentTransactions) if tokio::time::Instant::now() < deadline => {
                txns.coordinator.metrics.waits.fetch_add(1, Ordering::Relaxed);
                let _ = laminar_net::waiting(tokio::time::timeout_at(deadline, changed)).await;
            }
            other => return other,
        }
    }
}

/// Adds `partitions` to the transaction of `id`'s producer, durably (AddPartitionsToTxn,
/// AddOffsetsToTxn, and Produce v12's implicit add). Returns a Kafka error code.
pub async fn add_partitions(
    txns: &Arc<Txns>,
    id: &str,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &[TopicPartition],
) -> Result<(), ErrorCode> {
    let now = laminar_storage::now_ms();
    let decision = begin_when_free(txns, id, |m| {
        super::decide_add(m, producer_id, producer_epoch, partitions, now)
    })
    .await;
    run(txns, id, decision).await.map(|_| ())
}

/// Runs a decision of `id`: writes it if it is a change, applies it once durable. Returns the
/// reply, or the written state.
pub async fn run<T>(
    txns: &Arc<Txns>,
    id: &str,
    decision: Result<Decision<T>, ErrorCode>,
) -> Result<Written<T>, ErrorCode> {
    match decision? {
        Decision::Reply(r) => Ok(Written::Reply(r)),
        Decision::Write(meta) => {
            let written = persist(txns, vec![(id.to_string(), Some(meta.clone()))]).await;
            txns.coordinator.finish(id, written.is_ok().then(|| meta.clone()));
            written?;
            if meta.status.is_prepared() {
                // Markers, then the complete record, in the background.
                if let Ok(epoch) = txns.epoch() {
                    tokio::spawn(complete(txns.clone(), meta.clone(), epoch));
                }
            }
            Ok(Written::Wrote(meta))
        }
    }
}

pub enum Written<T> {
    Reply(T),
    Wrote(TxnMeta),
}

/// Appends one marker of `producer_id` to `topic`-`partition`, led here, and waits until it
/// is durable (in a cluster: on every in-sync replica, as Kafka's markers are written with
/// `acks=all`). Returns its offset, or `None` if the partition no longer exists (its topic
/// was deleted: nothing is left to end). A marker with an epoch older than the producer's
/// on the partition is refused (a fenced coordinator's, or a stale abort).
///
/// `coordinator_epoch` is the epoch of the coordinator that ends the transaction (in a
/// cluster, its leader epoch of `__transaction_state-0`): a marker from an older coordinator
/// than the producer's last marker here is refused (TRANSACTION_COORDINATOR_FENCED), so that
/// a deposed coordinator's late marker cannot end a later transaction.
pub async fn write_marker(
    txns: &Arc<Txns>,
    topic: &str,
    partition: i32,
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    commit: bool,
) -> Result<Option<Offset>, ErrorCode> {
    if txns
        .runtime
        .partitions
        .get(topic, partition)
        .and_then(|p| p.log())
        .is_none()
    {
        // A partition that still exists but is not here moved: its leader is elsewhere, and
        // the marker must reach it.
        let moved = txns.cluster.image().partition(topic, partition).is_some();
        return if moved {
            Err(ErrorCode::NotLeaderOrFollower)
        } else {
            Ok(None)
        };
    }
    let led = txns.runtime.partitions.led(topic, partition)?;
    let (txns2, group_log) = (txns.clone(), is_group_log(topic, partition));
    let marker = if commit {
        ControlType::Commit
    } else {
        ControlType::Abort
    };
    let job = move |append: &Append| {
        // The group log's marker ends the offsets committed in the transaction: the
        // coordinator must have them loaded (the coordinator retries).
        if group_log {
            txns2.groups.ready().map_err(WriteError::Refused)?;
        }
        let producers = append.producers;
        if producers.coordinator_epoch(producer_id) > coordinator_epoch {
            return Err(WriteError::Refused(ErrorCode::TransactionCoordinatorFenced));
        }
        if producers.epoch(producer_id).is_some_and(|e| e > producer_epoch) {
            return Err(WriteError::Refused(ErrorCode::InvalidProducerEpoch));
        }
        let now = laminar_storage::now_ms();
        let mut batch = control_batch(marker, producer_id, producer_epoch, coordinator_epoch, now);
        let info = append.append(&mut batch)?;
        producers.on_marker(producer_id, producer_epoch, coordinator_epoch, now);
        if group_log {
            // In log order with the group's other records.
            txns2
                .groups
                .store
                .end_txn_offsets(producer_id, commit, info.last_offset);
        }
        Ok(Some((info, ())))
    };
    let written = led
        .write_with(&txns.runtime.storage, Some(MARKER_REPLICATION), job)
        .await
        .map_err(|e| {
            if !matches!(e, WriteError::NotLeader | WriteError::Refused(_)) {
                crate::warn!("a transaction marker for {topic}-{partition}: {e}");
            }
            e.partition_code()
        })?;
    let Some((appended, ())) = written else {
        unreachable!("a marker is always written")
    };
    if group_log {
        txns.groups
            .store
            .apply_durable(&txns.groups.coordinator, appended.last_offset);
    }
    Ok(Some(appended.last_offset))
}

/// How long a client's abort of a transaction the coordinator runs waits for its markers
/// before it is answered (it is decided, and durable, before that wait).
const CLIENT_ABORT_WAIT: Duration = Duration::from_secs(10);

/// An abort marker for `topic`-`partition` from a client (the Admin client's
/// `abortTransaction`, `kafka-transactions abort`), on a broker that is the only
/// transaction coordinator. A transaction the coordinator runs there is aborted by the
/// coordinator (see [`super::decide_client_abort`]: its producer is fenced), and this waits
/// for its markers; a hanging one, which no coordinator will end, gets the marker; a
/// producer with no transaction open there gets nothing (a marker would only move its epoch,
/// fencing an idempotent producer).
pub async fn abort_from_client(
    txns: &Arc<Txns>,
    topic: &str,
    partition: i32,
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
) -> Result<(), ErrorCode> {
    let tp = TopicPartition::new(topic, partition);
    if let Some(id) = txns.coordinator.id_of(producer_id) {
        let now = laminar_storage::now_ms();
        let mut allocate = || txns.producer_ids.allocate();
        let decision = begin_when_free(txns, &id, |m| {
            super::decide_client_abort(m, producer_id, &tp, now, &mut allocate)
        })
        .await;
        if let Written::Wrote(meta) = run(txns, &id, decision).await? {
            crate::info!(
                "a client aborted transaction {id:?} on {topic}-{partition}: aborting it, producer {} fenced with epoch {}",
                meta.producer_id,
                meta.producer_epoch
            );
            wait_completed(txns, &id).await;
            return Ok(());
        }
    }
    let open_here = txns
        .runtime
        .partitions
        .get(topic, partition)
        .and_then(|p| p.log())
        .map(|log| log.open_txns().iter().any(|&(pid, _)| pid == producer_id));
    if open_here == Some(false) {
        return Ok(());
    }
    match write_marker(
        txns,
        topic,
        partition,
        producer_id,
        producer_epoch,
        coordinator_epoch,
        false,
    )
    .await?
    {
        Some(_) => Ok(()),
        None => Err(ErrorCode::UnknownTopicOrPartition),
    }
}

/// Waits (up to [`CLIENT_ABORT_WAIT`]) until `id`'s decided end is complete.
async fn wait_completed(txns: &Txns, id: &str) {
    let deadline = tokio::time::Instant::now() + CLIENT_ABORT_WAIT;
    loop {
        let changed = txns.coordinator.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let prepared = txns.coordinator.get(id).is_some_and(|m| m.status.is_prepared());
        if !prepared || tokio::time::timeout_at(deadline, changed).await.is_err() {
            return;
        }
    }
}

fn is_group_log(topic: &str, partition: i32) -> bool {
    (topic, partition) == (crate::groups::store::OFFSETS_TOPIC, 0)
}

/// How long a marker waits for the partition's in-sync replicas.
const MARKER_REPLICATION: Duration = Duration::from_secs(5);

/// Writes the markers of one transaction into `partitions`: those led here directly, the
/// others with WriteTxnMarkers to their leaders (in a cluster), all at once so that their
/// fsyncs overlap. Returns the partitions whose marker must be tried again.
async fn write_markers(
    txns: &Arc<Txns>,
    prepared: &TxnMeta,
    coordinator_epoch: i32,
    partitions: Vec<TopicPartition>,
) -> Vec<TopicPartition> {
    let id = &prepared.transactional_id;
    let commit = prepared.status == TxnStatus::PrepareCommit;
    let (pid, epoch) = (prepared.producer_id, prepared.producer_epoch);
    let mut local = Vec::new();
    let mut remote: std::collections::BTreeMap<i32, Vec<TopicPartition>> = Default::default();
    let mut failed = Vec::new();
    let image = txns.cluster.image();
    for tp in partitions {
        match image.partition(&tp.topic, tp.partition).map(|p| p.leader) {
            // Its topic was deleted: nothing is left to end.
            None => {}
            Some(leader) if leader == txns.cluster.node_id => local.push(tp),
            Some(leader) if leader >= laminar_cluster::BrokerId(0) => {
                remote.entry(leader.0).or_default().push(tp)
            }
            Some(_) => failed.push(tp),
        }
    }
    let mut writes = tokio::task::JoinSet::new();
    for tp in local {
        let txns = txns.clone();
        writes.spawn(async move {
            let written = write_marker(
                &txns,
                &tp.topic,
                tp.partition,
                pid,
                epoch,
                coordinator_epoch,
                commit,
            )
            .await
            .map(|_| ());
            vec![(tp, written)]
        });
    }
    for (leader, partitions) in remote {
        let txns = txns.clone();
        writes.spawn(async move {
            send_markers(&txns, leader, pid, epoch, commit, coordinator_epoch, partitions).await
        });
    }
    while let Some(joined) = writes.join_next().await {
        let Ok(results) = joined else {
            crate::warn!("transaction {id:?}: a marker task failed");
            continue;
        };
        for (tp, written) in results {
            match written {
                Ok(()) => {}
                // A newer epoch of this producer wrote there since: this transaction's
                // records were ended by that epoch's first marker already.
                Err(ErrorCode::InvalidProducerEpoch) => {
                    crate::warn!("transaction {id:?}: {tp} has a newer epoch; no marker needed")
                }
                // Deleted meanwhile (a leader that is no longer one answers
                // NOT_LEADER_OR_FOLLOWER for a partition that still exists).
                Err(ErrorCode::UnknownTopicOrPartition) if !partition_exists(txns, &tp) => {}
                Err(code) => {
                    txns.coordinator.metrics.retries.fetch_add(1, Ordering::Relaxed);
                    crate::warn!("transaction {id:?}: the marker for {tp} failed ({code}), retrying");
                    failed.push(tp);
                }
            }
        }
    }
    failed
}

/// Does the partition exist, as this broker knows?
fn partition_exists(txns: &Txns, tp: &TopicPartition) -> bool {
    txns.cluster.image().partition(&tp.topic, tp.partition).is_some()
}

/// WriteTxnMarkers to broker `leader` for `partitions`: each partition's outcome.
async fn send_markers(
    txns: &Arc<Txns>,
    leader: i32,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    partitions: Vec<TopicPartition>,
) -> Vec<(TopicPartition, Result<(), ErrorCode>)> {
    use kafka_protocol::messages::write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
    use kafka_protocol::messages::{
        ApiKey, ProducerId, TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
    };
    let c = &txns.cluster;
    let mut marker = WritableTxnMarker::default();
    marker.producer_id = ProducerId(producer_id);
    marker.producer_epoch = producer_epoch;
    marker.transaction_result = commit;
    marker.coordinator_epoch = coordinator_epoch;
    for tp in &partitions {
        if marker.topics.last().is_none_or(|t| t.name.0.as_str() != tp.topic) {
            let mut t = WritableTxnMarkerTopic::default();
            t.name = TopicName(crate::sb(&tp.topic));
            marker.topics.push(t);
        }
        marker
            .topics
            .last_mut()
            .unwrap()
            .partition_indexes
            .push(tp.partition);
    }
    let mut req = WriteTxnMarkersRequest::default();
    req.markers.push(marker);
    let answered: std::io::Result<WriteTxnMarkersResponse> = c
        .clients
        .call(
            &c.image(),
            laminar_cluster::BrokerId(leader),
            ApiKey::WriteTxnMarkers,
            WRITE_TXN_MARKERS_VERSION,
            &req,
        )
        .await;
    let resp = match answered {
        Ok(r) => r,
        Err(e) => {
            crate::warn!("WriteTxnMarkers to broker {leader}: {e}");
            return partitions
                .into_iter()
                .map(|tp| (tp, Err(ErrorCode::NetworkException)))
                .collect();
        }
    };
    let mut codes = std::collections::HashMap::new();
    for m in &resp.markers {
        for t in &m.topics {
            for p in &t.partitions {
                codes.insert(
                    TopicPartition::new(t.name.0.as_str(), p.partition_index),
                    p.error_code,
                );
            }
        }
    }
    partitions
        .into_iter()
        .map(|tp| {
            let code = codes
                .get(&tp)
                .copied()
                .map_or(ErrorCode::UnknownServerError, ErrorCode::from_wire);
            (tp, if code.is_none() { Ok(()) } else { Err(code) })
        })
        .collect()
}

const WRITE_TXN_MARKERS_VERSION: i16 = 1;

/// Ends a prepared transaction: a marker in each of its partitions and, on commit, its offsets
/// in the group log, all durable; then the complete record. Retries what fails until it
/// succeeds (as Kafka's marker channel does): the transaction's id waits meanwhile. Stops
/// when this broker stops being the coordinator of `coordinator_epoch`: the next one loads
/// the transaction prepared and completes it.
pub async fn complete(txns: Arc<Txns>, prepared: TxnMeta, coordinator_epoch: i32) {
    debug_assert!(prepared.status.is_prepared());
    let started = std::time::Instant::now();
    let commit = prepared.status == TxnStatus::PrepareCommit;
    let id = prepared.transactional_id.clone();
    // The group log's partition gets its marker too: the group coordinator applies the
    // offsets of the transaction with it. Offsets in the transaction's own record are
    // those of a transaction decided by an earlier Laminar, which kept them there.
    let mut left: Vec<TopicPartition> = prepared.partitions.iter().cloned().collect();
    let mut offsets_left = commit && !prepared.offsets.is_empty();
    if offsets_left && !txns.cluster.alone() {
        // Only a single node wrote them (transactions were refused in a cluster then); in a
        // cluster of several the group log may be led elsewhere: they cannot be written
        // from here.
        crate::warn!(
            "transaction {id:?}: {} offsets kept in its record by an older Laminar are not committed in a cluster",
            prepared.offsets.len()
        );
        offsets_left = false;
    }
    loop {
        if txns.epoch() != Ok(coordinator_epoch) {
            crate::info!("transaction {id:?}: no longer its coordinator; the next one completes it");
            return;
        }
        left = write_markers(&txns, &prepared, coordinator_epoch, left).await;
        if offsets_left {
            let records = prepared
                .offsets
                .iter()
                .map(|((group, topic, partition), o)| GroupRecord::Offset {
                    group: group.clone(),
                    topic: topic.clone(),
                    partition: *partition,
                    offset: o.offset,
                    leader_epoch: o.leader_epoch,
                    metadata: Some(o.metadata.clone().unwrap_or_default()),
                    commit_ms: o.commit_ms,
                })
                .collect();
            match txns.groups.persist_records(records).await {
                ErrorCode::None => offsets_left = false,
                code => {
                    txns.coordinator.metrics.retries.fetch_add(1, Ordering::Relaxed);
                    crate::warn!("transaction {id:?}: committing its offsets failed ({code}), retrying")
                }
            }
        }
        if left.is_empty() && !offsets_left {
            break;
        }
        tokio::time::sleep(Duration::from_millis(MARKER_RETRY_MS)).await;
    }
    let done = prepared.completed(laminar_storage::now_ms());
    // Nothing else writes this id while it is prepared; wait out a reader's busy mark.
    loop {
        if txns.epoch() != Ok(coordinator_epoch) {
            return;
        }
        let begun = txns.coordinator.begin(&id, |m| match m {
            Some(m) if m.status == done.status || m.status.is_prepared() => Ok(Decision::Write(done.clone())),
            _ => Ok(Decision::Reply(())),
        });
        match begun {
            Ok(Decision::Write(meta)) => {
                // Not waited for: a complete record lost in a crash leaves the prepared one,
                // and the completion runs again (the markers, durable now, are idempotent).
                // Any later record of this id is fsynced, and this one with it.
                let written = persist_with(&txns, vec![(id.clone(), Some(meta.clone()))], false).await;
                txns.coordinator.finish(&id, written.is_ok().then_some(meta));
                if written.is_ok() {
                    let m = &txns.coordinator.metrics;
                    m.completion_us.record_since(started);
                    if commit { &m.commits } else { &m.aborts }.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
            Ok(Decision::Reply(())) => return,
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(MARKER_RETRY_MS)).await;
    }
}

/// Aborts the transactions past their timeout, fencing their producers with a new epoch.
pub async fn abort_timed_out(txns: &Arc<Txns>) {
    let now = laminar_storage::now_ms();
    for id in txns.coordinator.timed_out(now) {
        let mut allocate = || txns.producer_ids.allocate();
        let decision = txns
            .coordinator
            .begin(&id, |m| super::decide_timeout(m, now, &mut allocate));
        if let Ok(Written::Wrote(meta)) = run(txns, &id, decision).await {
            txns.coordinator.metrics.timed_out.fetch_add(1, Ordering::Relaxed);
            crate::info!(
                "transaction {id:?} timed out after {} ms: aborting it, producer {} fenced with epoch {}",
                meta.timeout_ms,
                meta.producer_id,
                meta.producer_epoch
            );
        }
    }
}

/// Forgets ids idle past `transactional.id.expiration.ms`, with a tombstone each.
pub async fn expire_ids(txns: &Arc<Txns>) {
    let now = laminar_storage::now_ms();
    let expiration_ms = txns.settings.id_expiration_ms;
    for id in txns.coordinator.expired(now, expiration_ms) {
        // Busy while the tombstone is written, and only if it is still idle.
        let begun = txns.coordinator.begin(&id, |m| match m {
            Some(m)
                if matches!(
                    m.status,
                    TxnStatus::Empty | TxnStatus::CompleteCommit | TxnStatus::CompleteAbort
                ) && now.saturating_sub(m.update_ms) > expiration_ms as i64 =>
            {
                Ok(Decision::Write(m.clone()))
            }
            _ => Ok(Decision::Reply(())),
        });
        if let Ok(Decision::Write(_)) = begun {
            if persist(txns, vec![(id.clone(), None)]).await.is_ok() {
                txns.coordinator.remove(&id);
                crate::info!("transactional id {id:?} expired");
            } else {
                txns.coordinator.finish(&id, None);
            }
        }
    }
}
