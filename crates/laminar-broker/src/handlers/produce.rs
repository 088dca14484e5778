//! Produce v3-11, with acks 0, 1 and all.
//!
//! The append runs on the partition's storage thread, never here. `acks=1` answers once the
//! batches are in the page cache; `acks=all` answers once the fsync that covers them has
//! finished (group commit on the flusher threads). Nothing else waits for an fsync, not
//! even the same connection's next request: it is appended while this one's fsync runs.

use laminar_cluster::{LeaderEpoch, TopicPartition};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, NodeEndpoint, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{BrokerId, ProduceResponse};
use laminar_protocol::requests::{ProduceRequest, ProduceTopic};
use laminar_protocol::responses::ResponseFrame;
use laminar_protocol::{responses, ApiKey};
use laminar_records::{
    decode_records, validate_batches, validate_compressed, BatchHeader, Compression, RecordsError,
    BATCH_HEADER_BYTES,
};
use laminar_storage::{AppendMode, Offset, StorageError};

use super::refused::Refused as RefusedResources;
use super::{sb, topic_name};
use crate::context::RequestContext;
use crate::quotas::Quotas;
use crate::response::{Dispatched, RecordsFile};
use crate::topics::Topics;
use laminar_cluster::Cluster;
use laminar_coordinators::txn::service::Txns;
use laminar_data::partition::{Partition, Partitions};
use laminar_data::producers::{ProducerBatch, SeqCheck};
use laminar_data::replicate::{self, ReplicateError, Replicated};
use laminar_data::storage_pool::StoragePool;
use laminar_net::{CloseConnection, ResponseOrClose};
use laminar_protocol::ErrorCode;

/// A compressed batch may expand to at most this much: the bound on a decompression bomb.
pub const DECOMPRESSED_BATCH_BYTES_MAX: usize = 64 << 20;
/// A storage thread decompresses at most this much of a request's batches while validating
/// them. A batch that expands further (rare for real producers, the rule for a bomb) is
/// validated on one thread of its own at the lowest CPU priority ([`LARGE_BATCHES`]), and
/// then appended: bombs then cost at most one CPU, the CPU nothing else wants, and never
/// hold a storage thread that other partitions' appends need.
pub const INLINE_DECOMPRESSED_BYTES_MAX: usize = 1 << 20;

type LargeJob = (Bytes, tokio::sync::oneshot::Sender<Result<(), ErrorCode>>);
/// The one thread that validates large compressed batches, in arrival order, at the lowest
/// CPU priority (nice 19): a stream of bombs then takes only the CPU nothing else wants.
static LARGE_BATCHES: std::sync::OnceLock<std::sync::Mutex<std::sync::mpsc::Sender<LargeJob>>> =
    std::sync::OnceLock::new();

/// Why an append did not happen.
enum Refused {
    /// A Kafka error code for the partition.
    Code(ErrorCode),
    /// INVALID_RECORD, naming the records at fault (KIP-467): (index, why), and a summary.
    Records(Vec<(i32, String)>, String),
    /// A compressed batch expands past the inline bound: validate it apart, then retry.
    Large,
}

struct Appended {
    base_offset: i64,
    last_offset: i64,
    /// The log end after it (the high watermark follows it when no follower is in sync).
    log_end: i64,
    log_start: i64,
    /// The time the batches were stamped with (LogAppendTime topics), else -1.
    log_append_time_ms: i64,
}

fn storage_code(e: &StorageError) -> ErrorCode {
    match e {
        StorageError::InvalidBatch(_) => ErrorCode::CorruptMessage,
        StorageError::AppendSize { .. } => ErrorCode::MessageTooLarge,
        StorageError::StaleEpoch { .. } => ErrorCode::NotLeaderOrFollower,
        _ => ErrorCode::KafkaStorageError,
    }
}

/// What a partition's topic and the request's version require of its batches.
#[derive(Clone, Copy)]
struct Rules {
    max_message_bytes: usize,
    /// Produce v7+ (KIP-110).
    zstd_allowed: bool,
    /// `message.timestamp.type=LogAppendTime`.
    log_append_time: bool,
    /// The leader epoch the batches are written with.
    leader_epoch: LeaderEpoch,
    /// How a transactional batch is checked against its transaction.
    txn: TxnCheck,
}

/// How a transactional batch is checked against its transaction, on the storage thread.
#[derive(Clone, Copy)]
enum TxnCheck {
    /// The transaction coordinator is this broker, at this epoch: its state says (single
    /// node, or a cluster's coordinator).
    Coordinator(i32),
    /// The coordinator is another broker; the producer's transaction was in progress here
    /// already when the request came, and must still be.
    Open,
    /// The coordinator is another broker, and added the partition to the transaction
    /// (Produce v12). The producer's epoch, bumped at every end with transaction version 2,
    /// keeps a late batch out of a later transaction (the storage thread's epoch check).
    Added,
    /// The coordinator is another broker, and said the partition is in the transaction
    /// (below v12): the verification guard set with this token before it was asked must
    /// still be there. A marker of the producer since (its own abort, with the same epoch
    /// under transaction version 1) removed it, and the batch would open a transaction that
    /// nothing ends (KIP-890's hanging transaction).
    Guarded(u64),
}

/// What a produce works with: the topics as applied here (their configs), the partitions
/// placed here, their storage threads and the fetches waiting for data, the cluster (the
/// leader a refused produce points at), the transaction coordinator (a transactional
/// batch's check) and the client quotas.
pub struct ProduceService {
    pub topics: Arc<Topics>,
    pub partitions: Arc<Partitions>,
    pub storage: Arc<StoragePool>,
    pub cluster: Arc<Cluster>,
    pub txns: Arc<Txns>,
    pub quotas: Arc<Quotas>,
}

/// Runs on the storage thread: validates the batches (decompressing compressed ones, with a
/// bound), applies the idempotence checks, and appends.
fn append(
    s: &ProduceService,
    hosted: &Partition,
    records: Bytes,
    rules: Rules,
    records_validated: bool,
) -> Result<Appended, Refused> {
    let (topic, partition) = (hosted.topic.as_str(), hosted.partition);
    let Rules {
        max_message_bytes,
        zstd_allowed,
        log_append_time,
        leader_epoch,
        txn,
    } = rules;
    // Looked up here, on the storage thread: a follower's truncation reopens the log.
    let log = hosted
        .log()
        .ok_or(Refused::Code(ErrorCode::UnknownTopicOrPartition))?;
    let mut buf = records.to_vec();
    let batches = validate_batches(&buf).map_err(|_| Refused::Code(ErrorCode::CorruptMessage))?;
    if batches.is_empty() {
        return Err(Refused::Code(ErrorCode::CorruptMessage));
    }
    for (h, start, end) in &batches {
        if end - start > max_message_bytes {
            return Err(Refused::Code(ErrorCode::MessageTooLarge));
        }
        // As Kafka refuses it: zstd came with Produce v7 (KIP-110), so that a client too old
        // to read it never finds it in a topic.
        if !zstd_allowed && matches!(h.compression(), Ok(Compression::Zstd)) {
            return Err(Refused::Code(ErrorCode::UnsupportedCompressionType));
        }
    }
    if !records_validated {
        validate_records(&buf, &batches, INLINE_DECOMPRESSED_BYTES_MAX)?;
    }
    if log.config().cleanup_compact {
        refuse_keyless(&buf, &batches, topic, partition)?;
    }
    if batches.iter().any(|(h, _, _)| h.is_control()) {
        // As Kafka refuses them: only a transaction coordinator writes markers.
        return Err(Refused::Code(ErrorCode::InvalidRecord));
    }
    let (first, last) = (&batches[0].0, &batches[batches.len() - 1].0);
    let (pid, epoch) = (first.producer_id, first.producer_epoch);
    if batches.iter().any(|(h, _, _)| h.is_transactional()) {
        if batches
            .iter()
            .any(|(h, _, _)| !h.is_transactional() || h.producer_id != pid || h.producer_epoch != epoch)
        {
            return Err(Refused::Code(ErrorCode::InvalidRecord));
        }
        // Here, on the storage thread that appends the markers too: a batch let through
        // lands before the marker of its transaction.
        match txn {
            TxnCheck::Coordinator(coordinator_epoch) => {
                s.txns
                    .coordinator
                    .check_produce(pid, epoch, topic, partition)
                    .map_err(|code| {
                        // Its state was dropped: this broker stopped coordinating since the
                        // request came (the producer retries, and the check goes elsewhere).
                        if s.txns.epoch() != Ok(coordinator_epoch) {
                            Refused::Code(ErrorCode::NotEnoughReplicas)
                        } else {
                            Refused::Code(code)
                        }
                    })?
            }
            TxnCheck::Added => {}
            TxnCheck::Open => {
                if !in_transaction_here(hosted, &log, pid, epoch) {
                    return Err(Refused::Code(ErrorCode::InvalidTxnState));
                }
            }
            TxnCheck::Guarded(token) => {
                if !hosted.producers.guarded(pid, epoch, token) {
                    return Err(Refused::Code(ErrorCode::InvalidTxnState));
                }
            }
        }
    }
    let first_seq = first.base_sequence;
    let last_seq = last.base_sequence.wrapping_add(last.last_offset_delta);
    let seqs = ProducerBatch {
        producer_id: pid,
        epoch,
        first_seq,
        last_seq,
        max_timestamp_ms: batches
            .iter()
            .map(|(h, _, _)| h.max_timestamp)
            .max()
            .unwrap_or(-1),
    };
    match hosted.producers.check(seqs) {
        SeqCheck::Append => {}
        SeqCheck::Duplicate { base_offset } => {
            return Ok(Appended {
                base_offset,
                last_offset: base_offset,
                log_end: log.log_end().0,
                log_start: log.log_start().0,
                log_append_time_ms: -1,
            });
        }
        SeqCheck::Reject(code) => return Err(Refused::Code(code)),
    }
    // Checked again here, on the partition's storage thread, where a follower's fetcher
    // appends and truncates too: the leadership may have moved since the request was
    // taken (a large batch's validation, a transaction's implicit add).
    if s.partitions.leadership(topic, partition) != Ok(leader_epoch) {
        return Err(Refused::Code(ErrorCode::NotLeaderOrFollower));
    }
    let log_append_time_ms = if log_append_time {
        let now = laminar_data::now_ms();
        for (_, start, end) in &batches {
            laminar_records::set_log_append_time(&mut buf[*start..*end], now);
        }
        now
    } else {
        -1
    };
    let info = log
        .append_as(
            &mut buf,
            AppendMode::Leader {
                epoch: leader_epoch.0,
            },
        )
        .map_err(|e| {
            crate::warn!("append to {topic}-{partition} failed: {e}");
            Refused::Code(storage_code(&e))
        })?;
    hosted.producers.record(seqs, info.base_offset.0);
    Ok(Appended {
        base_offset: info.base_offset.0,
        last_offset: info.last_offset.0,
        log_end: info.log_end.0,
        log_start: log.log_start().0,
        log_append_time_ms,
    })
}

/// Checks the records of the compressed batches in `buf`, decompressing at most
/// `limit_bytes` of each. Streamed: the decompressed records are checked as they come and
/// never held, so a bomb costs the time to reach the bound, not the memory.
fn validate_records(
    buf: &[u8],
    batches: &[(BatchHeader, usize, usize)],
    limit_bytes: usize,
) -> Result<(), Refused> {
    for (h, start, end) in batches {
        let compression = h
            .compression()
            .map_err(|_| Refused::Code(ErrorCode::CorruptMessage))?;
        if compression == Compression::None {
            continue;
        }
        let body = &buf[start + BATCH_HEADER_BYTES..*end];
        match validate_compressed(compression, body, h.records_count, limit_bytes) {
            Ok(()) => {}
            Err(RecordsError::DecompressedTooLarge { .. }) if limit_bytes < DECOMPRESSED_BATCH_BYTES_MAX => {
                return Err(Refused::Large)
            }
            Err(_) => return Err(Refused::Code(ErrorCode::CorruptMessage)),
        }
    }
    Ok(())
}

/// A compacted topic has no place for a record without a key: as Kafka does, the request's
/// batches are refused with INVALID_RECORD and each such record is named by its index
/// (KIP-467), so that a client fails exactly those and retries none of them. The batches
/// were validated before, within the decompression bound.
fn refuse_keyless(
    buf: &[u8],
    batches: &[(BatchHeader, usize, usize)],
    topic: &str,
    partition: i32,
) -> Result<(), Refused> {
    let mut errors = Vec::new();
    let mut index = 0i32;
    for (h, start, end) in batches {
        if h.is_control() {
            continue;
        }
        let records = decode_records(&buf[*start..*end], DECOMPRESSED_BATCH_BYTES_MAX)
            .map_err(|_| Refused::Code(ErrorCode::CorruptMessage))?;
        for r in records {
            if r.key.is_none() {
                errors.push((
                    index,
                    format!("Compacted topic cannot accept message without key in topic partition {topic}-{partition}."),
                ));
            }
            index += 1;
        }
    }
    if errors.is_empty() {
        return Ok(());
    }
    let shown: Vec<String> = errors
        .iter()
        .take(3)
        .map(|(i, m)| format!("record {i}: {m}"))
        .collect();
    let summary = format!(
        "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
        errors.len(),
        shown.join(", ")
    );
    Err(Refused::Records(errors, summary))
}

fn validate_fully(records: &[u8]) -> Result<(), ErrorCode> {
    let batches = validate_batches(records).map_err(|_| ErrorCode::CorruptMessage)?;
    validate_records(records, &batches, DECOMPRESSED_BATCH_BYTES_MAX).map_err(|r| match r {
        Refused::Code(c) => c,
        Refused::Records(..) | Refused::Large => unreachable!("validation refuses with a code"),
    })
}

fn large_batches_thread() -> std::sync::mpsc::Sender<LargeJob> {
    let (tx, rx) = std::sync::mpsc::channel::<LargeJob>();
    std::thread::Builder::new()
        .name("laminar-large-batches".into())
        .spawn(move || {
            // SAFETY: setpriority on this thread's own id changes only its scheduling weight.
            unsafe {
                libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19);
            }
            for (records, answer) in rx {
                let verdict = std::panic::catch_unwind(|| validate_fully(&records))
                    .unwrap_or(Err(ErrorCode::UnknownServerError));
                let _ = answer.send(verdict);
            }
        })
        .expect("spawn the large-batch validation thread");
    tx
}

/// Validates a request's batches up to the full bound, on the large-batch thread.
async fn validate_large(records: Bytes) -> Result<(), ErrorCode> {
    crate::metrics::LARGE_BATCHES_VALIDATED.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let queue = LARGE_BATCHES.get_or_init(|| std::sync::Mutex::new(large_batches_thread()));
    let sent = queue
        .lock()
        .expect("never poisoned: send does not panic")
        .send((records, tx));
    let verdict = match sent {
        Ok(()) => rx.await.unwrap_or(Err(ErrorCode::UnknownServerError)),
        Err(_) => Err(ErrorCode::UnknownServerError),
    };
    if verdict.is_err() {
        crate::metrics::LARGE_BATCHES_REFUSED.fetch_add(1, Ordering::Relaxed);
    }
    verdict
}

/// Is this producer's transaction in progress on `topic`-`partition` at `epoch` (a batch of
/// it appended, no marker since)?
fn in_transaction_here(hosted: &Partition, log: &laminar_storage::Log, producer_id: i64, epoch: i16) -> bool {
    hosted.producers.epoch(producer_id) == Some(epoch)
        && log.open_txns().iter().any(|(p, _)| *p == producer_id)
}

/// The check of `records`' transaction, if its first batch is transactional, made before
/// it goes to the storage thread. With the coordinator here, Produce v12 (transaction
/// version 2, KIP-890) adds the partition to the transaction durably; the append checks the
/// rest. With the coordinator on another broker, it is asked, with AddPartitionsToTxn v4:
/// to add the partition (v12), or whether it is in the transaction (below v12, KIP-890's
/// verification), unless the transaction is in progress here already.
async fn check_transaction(
    s: &Arc<ProduceService>,
    version: i16,
    transactional_id: Option<&str>,
    topic: &str,
    partition: i32,
    records: &[u8],
) -> Result<TxnCheck, ErrorCode> {
    let local = s.txns.epoch();
    // Not transactional, or refused by the append: checked against this broker's state if
    // it is the coordinator, which refuses it otherwise.
    let unchecked = TxnCheck::Coordinator(local.unwrap_or(-1));
    let Ok(h) = BatchHeader::parse(records) else {
        return Ok(unchecked); // refused as corrupt by the append
    };
    if !h.is_transactional() || h.is_control() || h.producer_id < 0 {
        return Ok(unchecked);
    }
    let (pid, epoch) = (h.producer_id, h.producer_epoch);
    let add = version >= 12;
    if let Ok(coordinator_epoch) = local {
        if add {
            let id = match transactional_id {
                Some(id) => id.to_string(),
                None => s
                    .txns
                    .coordinator
                    .id_of(pid)
                    .ok_or(ErrorCode::InvalidProducerIdMapping)?,
            };
            let partitions = [TopicPartition::new(topic, partition)];
            laminar_coordinators::txn::complete::add_partitions(&s.txns, &id, pid, epoch, &partitions)
                .await
                .map_err(produce_code)?;
        }
        return Ok(TxnCheck::Coordinator(coordinator_epoch));
    }
    let Some(id) = transactional_id else {
        return Err(ErrorCode::InvalidTxnState);
    };
    let hosted = s.partitions.get(topic, partition);
    if let Some((hosted, log)) = hosted.as_ref().and_then(|p| Some((p, p.log()?))) {
        if in_transaction_here(hosted, &log, pid, epoch) {
            return Ok(TxnCheck::Open);
        }
    }
    if add {
        // No guard: the coordinator answers once the producer's previous transaction is
        // complete, and its markers, written meanwhile, would remove it.
        laminar_coordinators::txn::remote::add_or_verify(&s.cluster, id, pid, epoch, topic, partition, false)
            .await
            .map_err(produce_code)?;
        return Ok(TxnCheck::Added);
    }
    let hosted = hosted.ok_or(ErrorCode::NotLeaderOrFollower)?;
    let token = hosted.producers.guard(pid, epoch);
    laminar_coordinators::txn::remote::add_or_verify(&s.cluster, id, pid, epoch, topic, partition, true)
        .await
        .map_err(produce_code)?;
    Ok(TxnCheck::Guarded(token))
}

/// As Kafka's produce path answers for the coordinator: a fenced producer gets the error
/// producers handle (it aborts, and goes on with its next epoch), and what a retry will get
/// past is a retriable error.
fn produce_code(code: ErrorCode) -> ErrorCode {
    match code {
        ErrorCode::ProducerFenced => ErrorCode::InvalidProducerEpoch,
        ErrorCode::ConcurrentTransactions
        | ErrorCode::CoordinatorNotAvailable
        | ErrorCode::NotCoordinator
        | ErrorCode::CoordinatorLoadInProgress
        | ErrorCode::NetworkException => ErrorCode::NotEnoughReplicas,
        other => other,
    }
}

/// What every partition of a produce request shares.
struct RequestArgs {
    version: i16,
    acks: i16,
    /// The request's `timeout_ms`.
    timeout: Duration,
    transactional_id: Option<String>,
}

/// Appends one partition's batches. With `acks=all`, also returns the wait for the fsync
/// that will cover them: the caller awaits it after the request's ordered part is done.
async fn produce_partition(
    s: Arc<ProduceService>,
    request: Arc<RequestArgs>,
    topic: String,
    partition: i32,
    records: Option<Bytes>,
) -> (PartitionProduceResponse, Option<Durable>) {
    let RequestArgs {
        version,
        acks,
        timeout,
        ref transactional_id,
    } = *request;
    let mut out = PartitionProduceResponse::default();
    out.index = partition;
    out.base_offset = -1;
    out.log_append_time_ms = -1;
    let Some(meta) = s.topics.get(&topic) else {
        out.error_code = ErrorCode::UnknownTopicOrPartition.code();
        return (out, None);
    };
    if partition < 0 || partition as u32 >= meta.partitions {
        out.error_code = ErrorCode::UnknownTopicOrPartition.code();
        return (out, None);
    }
    if crate::topics::is_internal(&topic) {
        // As Kafka refuses it: only the broker writes its internal topics.
        out.error_code = ErrorCode::InvalidTopicException.code();
        if version >= 8 {
            out.error_message = Some(sb(&format!("Cannot append to internal topic {topic}")));
        }
        return (out, None);
    }
    let led = match s.partitions.led(&topic, partition) {
        Ok(led) => led,
        Err(code) => {
            out.error_code = code.code();
            // KIP-951: the leader the client should go to, so that it need not ask for
            // metadata first (its endpoint goes in the response's node endpoints).
            if version >= 10 {
                if let Some(p) = s.cluster.image().partition(&topic, partition) {
                    out.current_leader.leader_id = BrokerId(p.leader.0);
                    out.current_leader.leader_epoch = p.leader_epoch.0;
                }
            }
            return (out, None);
        }
    };
    let write = led.write();
    let leader_epoch = write.epoch;
    if acks == -1 {
        if let Some(isr) = led.partition.replica.isr() {
            // Checked before the append, as Kafka does: fewer in sync than the topic asks
            // for, and nothing is written.
            if isr.len() < s.topics.min_insync_replicas(&meta) {
                out.error_code = ErrorCode::NotEnoughReplicas.code();
                return (out, None);
            }
        }
    }
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        out.error_code = ErrorCode::CorruptMessage.code();
        return (out, None);
    };
    // Transaction version 2 (KIP-890): the producer adds no partitions; its first batch to a
    // partition in a transaction adds it, durably, before anything is appended.
    let txn = match check_transaction(
        &s,
        version,
        transactional_id.as_deref(),
        &topic,
        partition,
        &records,
    )
    .await
    {
        Ok(check) => check,
        Err(code) => {
            out.error_code = code.code();
            return (out, None);
        }
    };
    let rules = Rules {
        max_message_bytes: s.topics.max_message_bytes(&meta),
        zstd_allowed: version >= 7,
        log_append_time: s.topics.log_append_time(&meta),
        leader_epoch,
        txn,
    };
    let mut validated = false;
    let result = loop {
        let (s2, hosted, r) = (s.clone(), led.partition.clone(), records.clone());
        let attempt = s
            .storage
            .run(hosted.storage_key(), move || {
                append(&s2, &hosted, r, rules, validated)
            })
            .await
            .unwrap_or_else(|e| {
                crate::warn!("produce to {topic}-{partition}: {e}");
                Err(Refused::Code(ErrorCode::UnknownServerError))
            });
        match attempt {
            Ok(a) => break Ok(a),
            Err(Refused::Code(c)) => break Err(c),
            Err(Refused::Records(errors, summary)) => {
                if version >= 8 {
                    out.record_errors = errors
                        .into_iter()
                        .map(|(i, m)| {
                            let mut e = BatchIndexAndErrorMessage::default();
                            e.batch_index = i;
                            e.batch_index_error_message = Some(super::sb(&m));
                            e
                        })
                        .collect();
                    out.error_message = Some(super::sb(&summary));
                }
                break Err(ErrorCode::InvalidRecord);
            }
            Err(Refused::Large) if !validated => match validate_large(records.clone()).await {
                Ok(()) => validated = true,
                Err(c) => break Err(c),
            },
            Err(Refused::Large) => unreachable!("validated records are not checked again"),
        }
    };
    match result {
        Err(code) => {
            out.error_code = code.code();
            (out, None)
        }
        Ok(a) => {
            write.appended(Offset(a.log_end));
            out.base_offset = a.base_offset;
            out.log_append_time_ms = a.log_append_time_ms;
            if version >= 5 {
                out.log_start_offset = a.log_start;
            }
            // acks=0 and 1 ask for no fsync: with `log.read.after.fsync` a consumer's read asks
            // for it when unsynced records hold it back (`high_watermark_for_reader`).
            let durable = (acks == -1)
                .then(|| led.partition.log())
                .flatten()
                .map(|log| Durable {
                    durable: write.durable(&log, Offset(a.last_offset), timeout),
                    min_insync_replicas: s.topics.min_insync_replicas(&meta),
                });
            (out, durable)
        }
    }
}

/// What an `acks=all` append waits for: the fsync that covers it here and, in a cluster,
/// the high watermark passing it (every in-sync replica has it on its disk).
struct Durable {
    durable: replicate::Durable,
    /// The topic's `min.insync.replicas`.
    min_insync_replicas: usize,
}

/// Waits for the fsyncs (and, in a cluster, the replication) that cover the appended
/// partitions, then encodes the response. A partition whose fsync failed (its log went
/// offline) answers KAFKA_STORAGE_ERROR; one not replicated in time, REQUEST_TIMED_OUT (or
/// NOT_LEADER_OR_FOLLOWER if its leadership moved meanwhile).
async fn answer_when_durable(
    mut resp: ProduceResponse,
    waits: Vec<(usize, usize, Durable)>,
    version: i16,
    correlation_id: i32,
) -> ResponseOrClose<RecordsFile> {
    for (t, p, wait) in waits {
        let error = match wait.durable.wait().await {
            Err(e) => {
                if let ReplicateError::Storage(_) = e {
                    let tr = &resp.responses[t];
                    crate::warn!(
                        "acks=all on {}-{}: {e}",
                        tr.name.as_str(),
                        tr.partition_responses[p].index
                    );
                }
                Some(e.partition_code())
            }
            // As Kafka answers: replicated, but by fewer than the topic asks for (the ISR
            // shrank after the append).
            Ok(Replicated { isr_len: Some(isr) }) if isr < wait.min_insync_replicas => {
                Some(ErrorCode::NotEnoughReplicasAfterAppend)
            }
            Ok(_) => None,
        };
        if let Some(code) = error {
            let pr = &mut resp.responses[t].partition_responses[p];
            pr.error_code = code.code();
            pr.base_offset = -1;
            pr.log_start_offset = -1;
        }
    }
    encode(resp, version, correlation_id).map(Some)
}

fn encode(
    resp: ProduceResponse,
    version: i16,
    correlation_id: i32,
) -> Result<ResponseFrame<RecordsFile>, CloseConnection> {
    responses::encode(ApiKey::Produce, version, correlation_id, &resp)
        .map(ResponseFrame::from_bytes)
        .map_err(|e| CloseConnection(format!("encoding Produce v{version} response: {e}")))
}

/// Appends every partition's batches (each on its partition's storage thread, in parallel),
/// in this connection's request order. `acks=1` answers now; `acks=all` hands back the rest
/// of the request, which waits for the fsyncs while the connection's next requests go on:
/// one fsync can then cover several requests of one producer (group commit).
pub async fn handle(
    s: &Arc<ProduceService>,
    ctx: &RequestContext,
    r: ProduceRequest,
    refused: RefusedResources,
) -> Result<Dispatched, CloseConnection> {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let client_id = ctx.client_id.as_str();
    // v13 names topics by id: the step named each known one (and refused the others).
    let ids: HashMap<String, [u8; 16]> = r
        .topics
        .iter()
        .filter_map(|t| Some((t.name.clone(), t.topic_id?)))
        .collect();
    let acks = r.acks;
    let timeout = Duration::from_millis(r.timeout_ms.max(0) as u64);
    let request_bytes: u64 = r
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.records.as_ref().map_or(0, |records| records.len() as u64))
        .sum();
    let mut resp = ProduceResponse::default();
    let mut waits = Vec::new();
    if ![0, 1, -1].contains(&acks) {
        for t in &r.topics {
            resp.responses
                .push(every_partition(t, ErrorCode::InvalidRequiredAcks));
        }
    } else {
        let mut pending = Vec::new();
        let args = Arc::new(RequestArgs {
            version,
            acks,
            timeout,
            transactional_id: r.transactional_id.clone(),
        });
        // The topics the principal may not write (or, for a transaction's records, whose
        // transactional id it may not write) were taken out by the authorization step.
        for t in r.topics {
            let handles: Vec<_> = t
                .partitions
                .into_iter()
                .map(|p| {
                    tokio::spawn(produce_partition(
                        s.clone(),
                        args.clone(),
                        t.name.clone(),
                        p.index,
                        p.records,
                    ))
                })
                .collect();
            pending.push((t.name, handles));
        }
        for (name, handles) in pending {
            let mut tr = TopicProduceResponse::default();
            tr.name = topic_name(&name);
            for h in handles {
                // The partitions' appends run in their own tasks; this request waits for them.
                let (pr, durable) = laminar_net::waiting(h)
                    .await
                    .map_err(|e| CloseConnection(format!("produce task failed: {e}")))?;
                if let Some(wait) = durable {
                    waits.push((resp.responses.len(), tr.partition_responses.len(), wait));
                }
                tr.partition_responses.push(pr);
            }
            resp.responses.push(tr);
        }
    }
    // v13 answers by topic id.
    for tr in &mut resp.responses {
        if let Some(id) = ids.get(tr.name.as_str()) {
            tr.topic_id = super::uuid(*id);
        }
    }
    refused.answer(&mut resp);
    let redirected = || {
        resp.responses
            .iter()
            .flat_map(|t| &t.partition_responses)
            .any(|p| p.error_code == ErrorCode::NotLeaderOrFollower.code())
    };
    if version >= 10 && redirected() {
        let image = s.cluster.image();
        let mut leaders: Vec<laminar_cluster::BrokerId> = resp
            .responses
            .iter()
            .flat_map(|t| &t.partition_responses)
            .filter(|p| {
                p.error_code == ErrorCode::NotLeaderOrFollower.code() && p.current_leader.leader_id.0 >= 0
            })
            .map(|p| laminar_cluster::BrokerId(p.current_leader.leader_id.0))
            .collect();
        leaders.sort_unstable();
        leaders.dedup();
        resp.node_endpoints = leaders
            .into_iter()
            .filter_map(|id| image.brokers.get(&id))
            .filter_map(|x| Some((x.id, x.endpoint(&ctx.listener.name)?)))
            .map(|(id, (host, port))| {
                let mut e = NodeEndpoint::default();
                e.node_id = BrokerId(id.0);
                e.host = sb(host);
                e.port = port as i32;
                e
            })
            .collect();
    }
    // As Kafka does: the records are appended, then a client over its quota is told to
    // wait and its connection is muted for that long (with acks=0, only muted).
    let throttle = s.quotas.record(
        &ctx.principal.name,
        client_id,
        crate::quotas::QuotaKind::Produce,
        request_bytes,
    );
    if !throttle.is_zero() {
        resp.throttle_time_ms = throttle.as_millis() as i32;
        laminar_net::throttle(throttle);
    }
    if acks == 0 {
        return Ok(Dispatched::Now(None));
    }
    if waits.is_empty() {
        return encode(resp, version, correlation_id).map(|f| Dispatched::Now(Some(f)));
    }
    Ok(Dispatched::Later(Box::pin(answer_when_durable(
        resp,
        waits,
        version,
        correlation_id,
    ))))
}

/// A topic's answer when none of its partitions is appended: `code` for each.
fn every_partition(t: &ProduceTopic, code: ErrorCode) -> TopicProduceResponse {
    let mut tr = TopicProduceResponse::default();
    tr.name = topic_name(&t.name);
    tr.topic_id = super::uuid(t.topic_id.unwrap_or_default());
    for p in &t.partitions {
        let mut pr = PartitionProduceResponse::default();
        pr.index = p.index;
        pr.error_code = code.code();
        pr.base_offset = -1;
        tr.partition_responses.push(pr);
    }
    tr
}
