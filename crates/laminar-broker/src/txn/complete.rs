//! What the coordinator does with the broker: writes its records durably, ends
//! transactions (markers into the partitions, offsets into the group log), aborts the ones
//! that timed out, and forgets ids that expired.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use laminar_records::{control_batch, ControlType};
use laminar_storage::Offset;

use super::log::{encode_batch, TRANSACTION_TOPIC};
use super::{Decision, TxnMeta, TxnStatus};
use crate::broker::Broker;
use crate::error_codes as ec;
use crate::groups::store::GroupRecord;
use crate::storage_pool::partition_key;

/// How long a completion waits before trying a partition again whose marker failed.
const MARKER_RETRY_MS: u64 = 1_000;

/// Appends `changes` to the transaction log and waits until they are durable.
pub async fn persist(b: &Arc<Broker>, changes: Vec<(String, Option<TxnMeta>)>) -> Result<(), i16> {
    persist_with(b, changes, true).await
}

/// Appends `changes` to the transaction log; with `durable`, waits for the fsync too.
async fn persist_with(
    b: &Arc<Broker>,
    changes: Vec<(String, Option<TxnMeta>)>,
    durable: bool,
) -> Result<(), i16> {
    let log = b.txn_log.clone();
    let appended = b
        .storage
        .run(partition_key(TRANSACTION_TOPIC, 0), move || {
            let mut batch = encode_batch(&changes);
            log.append(&mut batch)
        })
        .await;
    let last = match appended {
        Ok(Ok(info)) => info.last_offset,
        Ok(Err(e)) => {
            crate::warn!("writing the transaction log: {e}");
            return Err(ec::COORDINATOR_NOT_AVAILABLE);
        }
        Err(e) => {
            crate::warn!("writing the transaction log: {e}");
            return Err(ec::COORDINATOR_NOT_AVAILABLE);
        }
    };
    if !durable {
        return Ok(());
    }
    crate::net::waiting(b.txn_log.wait_flushed(last))
        .await
        .map_err(|e| {
            crate::warn!("syncing the transaction log: {e}");
            ec::COORDINATOR_NOT_AVAILABLE
        })?;
    Ok(())
}

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
    b: &Arc<Broker>,
    id: &str,
    mut decide: impl FnMut(Option<&TxnMeta>) -> Result<Decision<T>, i16>,
) -> Result<Decision<T>, i16> {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(CONCURRENT_WAIT_MS);
    loop {
        // Registered before looking, so that a change in between still wakes this request.
        let changed = b.txns.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        match b.txns.begin(id, &mut decide) {
            Err(ec::CONCURRENT_TRANSACTIONS) if tokio::time::Instant::now() < deadline => {
                b.txns.metrics.waits.fetch_add(1, Ordering::Relaxed);
                let _ = crate::net::waiting(tokio::time::timeout_at(deadline, changed)).await;
            }
            other => return other,
        }
    }
}

/// Adds `partitions` to the transaction of `id`'s producer, durably (AddPartitionsToTxn,
/// AddOffsetsToTxn, and Produce v12's implicit add). Returns a Kafka error code.
pub async fn add_partitions(
    b: &Arc<Broker>,
    id: &str,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &[(String, i32)],
) -> Result<(), i16> {
    let now = laminar_storage::now_ms();
    let decision = begin_when_free(b, id, |m| {
        super::decide_add(m, producer_id, producer_epoch, partitions, now)
    })
    .await;
    run(b, id, decision).await.map(|_| ())
}

/// Runs a decision of `id`: writes it if it is a change, applies it once durable. Returns the
/// reply, or the written state.
pub async fn run<T>(
    b: &Arc<Broker>,
    id: &str,
    decision: Result<Decision<T>, i16>,
) -> Result<Written<T>, i16> {
    match decision? {
        Decision::Reply(r) => Ok(Written::Reply(r)),
        Decision::Write(meta) => {
            let written = persist(b, vec![(id.to_string(), Some(meta.clone()))]).await;
            b.txns.finish(id, written.is_ok().then(|| meta.clone()));
            written?;
            if meta.status.is_prepared() {
                // Markers, then the complete record, in the background.
                tokio::spawn(complete(b.clone(), meta.clone()));
            }
            Ok(Written::Wrote(meta))
        }
    }
}

pub enum Written<T> {
    Reply(T),
    Wrote(TxnMeta),
}

/// Appends one marker of `producer_id` to `topic`-`partition` and waits until it is durable.
/// Returns its offset, or `None` if the partition no longer exists (its topic was deleted:
/// nothing is left to end). A marker with an epoch older than the producer's on the
/// partition is refused (a fenced coordinator's, or a stale abort).
pub async fn write_marker(
    b: &Arc<Broker>,
    topic: &str,
    partition: i32,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
) -> Result<Option<Offset>, i16> {
    let Some(log) = b.topics.log(topic, partition) else {
        return Ok(None);
    };
    let (b2, t) = (b.clone(), topic.to_string());
    let marker = if commit {
        ControlType::Commit
    } else {
        ControlType::Abort
    };
    let log2 = log.clone();
    let appended = b
        .storage
        .run(partition_key(topic, partition), move || {
            if b2
                .producers
                .epoch(&t, partition, producer_id)
                .is_some_and(|e| e > producer_epoch)
            {
                return Err(ec::INVALID_PRODUCER_EPOCH);
            }
            let now = laminar_storage::now_ms();
            let mut batch = control_batch(marker, producer_id, producer_epoch, 0, now);
            let info = log2.append(&mut batch).map_err(|e| {
                crate::warn!("a transaction marker for {t}-{partition}: {e}");
                ec::KAFKA_STORAGE_ERROR
            })?;
            b2.producers
                .on_marker(&t, partition, producer_id, producer_epoch, now);
            Ok(info.last_offset)
        })
        .await
        .map_err(|_| ec::UNKNOWN_SERVER_ERROR)??;
    b.data_arrived.notify_waiters();
    crate::net::waiting(log.wait_flushed(appended))
        .await
        .map_err(|e| {
            crate::warn!("a transaction marker for {topic}-{partition}: {e}");
            ec::KAFKA_STORAGE_ERROR
        })?;
    Ok(Some(appended))
}

/// Ends a prepared transaction: a marker in each of its partitions and, on commit, its offsets
/// in the group log, all durable; then the complete record. Retries what fails until it
/// succeeds (as Kafka's marker channel does): the transaction's id waits meanwhile.
pub async fn complete(b: Arc<Broker>, prepared: TxnMeta) {
    debug_assert!(prepared.status.is_prepared());
    let started = std::time::Instant::now();
    let commit = prepared.status == TxnStatus::PrepareCommit;
    let id = prepared.transactional_id.clone();
    let offsets_partition = super::offsets_partition();
    let mut left: Vec<(String, i32)> = prepared
        .partitions
        .iter()
        .filter(|p| **p != offsets_partition)
        .cloned()
        .collect();
    let mut offsets_left = commit && !prepared.offsets.is_empty();
    loop {
        let mut failed = Vec::new();
        // Every partition's marker at once: their fsyncs overlap.
        let mut writes = tokio::task::JoinSet::new();
        for (topic, partition) in left {
            let (b, pid, epoch) = (b.clone(), prepared.producer_id, prepared.producer_epoch);
            writes.spawn(async move {
                let written = write_marker(&b, &topic, partition, pid, epoch, commit).await;
                (topic, partition, written)
            });
        }
        while let Some(joined) = writes.join_next().await {
            let Ok((topic, partition, written)) = joined else {
                crate::warn!("transaction {id:?}: a marker task failed");
                continue;
            };
            if written == Err(ec::INVALID_PRODUCER_EPOCH) {
                // A newer epoch of this producer wrote there since: this transaction's
                // records were ended by that epoch's first marker already.
                crate::warn!("transaction {id:?}: {topic}-{partition} has a newer epoch; no marker needed");
            } else if let Err(code) = written {
                b.txns.metrics.retries.fetch_add(1, Ordering::Relaxed);
                crate::warn!(
                    "transaction {id:?}: the marker for {topic}-{partition} failed ({code}), retrying"
                );
                failed.push((topic, partition));
            }
        }
        left = failed;
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
            match b.persist_group_records(records).await {
                ec::NONE => offsets_left = false,
                code => {
                    b.txns.metrics.retries.fetch_add(1, Ordering::Relaxed);
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
        let begun = b.txns.begin(&id, |m| match m {
            Some(m) if m.status == done.status || m.status.is_prepared() => Ok(Decision::Write(done.clone())),
            _ => Ok(Decision::Reply(())),
        });
        match begun {
            Ok(Decision::Write(meta)) => {
                // Not waited for: a complete record lost in a crash leaves the prepared one,
                // and the completion runs again (the markers, durable now, are idempotent).
                // Any later record of this id is fsynced, and this one with it.
                let written = persist_with(&b, vec![(id.clone(), Some(meta.clone()))], false).await;
                b.txns.finish(&id, written.is_ok().then_some(meta));
                if written.is_ok() {
                    let m = &b.txns.metrics;
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
pub async fn abort_timed_out(b: &Arc<Broker>) {
    let now = laminar_storage::now_ms();
    for id in b.txns.timed_out(now) {
        let mut allocate = || b.producers.allocate();
        let decision = b
            .txns
            .begin(&id, |m| super::decide_timeout(m, now, &mut allocate));
        if let Ok(Written::Wrote(meta)) = run(b, &id, decision).await {
            b.txns.metrics.timed_out.fetch_add(1, Ordering::Relaxed);
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
pub async fn expire_ids(b: &Arc<Broker>) {
    let now = laminar_storage::now_ms();
    let expiration_ms = b.config.transactional_id_expiration_ms;
    for id in b.txns.expired(now, expiration_ms) {
        // Busy while the tombstone is written, and only if it is still idle.
        let begun = b.txns.begin(&id, |m| match m {
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
            if persist(b, vec![(id.clone(), None)]).await.is_ok() {
                b.txns.remove(&id);
                crate::info!("transactional id {id:?} expired");
            } else {
                b.txns.finish(&id, None);
            }
        }
    }
}
