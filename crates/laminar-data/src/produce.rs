//! A producer's append to a partition led here, on the partition's storage thread: its
//! batches validated once and written from the buffer the network read filled, never copied
//! (the offsets go in the headers written, [`ValidBatches`]); the topic's limits; the transaction and idempotence checks; then the
//! leader's one write sequence ([`LedPartition::append_with`]), the coordinators' and the
//! markers' too. What the request asked and who coordinates its transaction are the
//! caller's: it hands the checks that need a coordinator in ([`TxnCheck`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use laminar_protocol::ErrorCode;
use laminar_records::{
    decode_records, validate_batches, validate_compressed, BatchHeader, Compression, RecordsError,
    ValidBatches, BATCH_HEADER_BYTES,
};
use laminar_storage::{AppendInfo, Offset};

use crate::partition::{Append, LedPartition, WriteError, Written};
use crate::producers::{ProducerBatch, SeqCheck};
use crate::replicate::Durable;
use crate::storage_pool::StoragePool;

/// A compressed batch may expand to at most this much: the bound on a decompression bomb.
pub const DECOMPRESSED_BATCH_BYTES_MAX: usize = 64 << 20;
/// A storage thread decompresses at most this much of a request's batches while validating
/// them. A batch that expands further (rare for real producers, the rule for a bomb) is
/// validated on one thread of its own at the lowest CPU priority, and then appended: bombs
/// then cost at most one CPU, the CPU nothing else wants, and never hold a storage thread
/// that other partitions' appends need.
pub const INLINE_DECOMPRESSED_BYTES_MAX: usize = 1 << 20;

/// Requests whose batches expanded past [`INLINE_DECOMPRESSED_BYTES_MAX`] and went to the
/// large-batch thread.
pub static LARGE_BATCHES_VALIDATED: AtomicU64 = AtomicU64::new(0);
/// Of those, the ones it refused (past [`DECOMPRESSED_BATCH_BYTES_MAX`], or corrupt).
pub static LARGE_BATCHES_REFUSED: AtomicU64 = AtomicU64::new(0);
/// A transactional batch's check by this broker's transaction coordinator, given the
/// producer id and epoch: `Ok`, or the code the partition answers.
pub type CoordinatorCheck = Arc<dyn Fn(i64, i16) -> Result<(), ErrorCode> + Send + Sync>;

/// How a transactional batch is checked against its transaction, on the storage thread,
/// where the markers are appended too: a batch let through lands before its marker.
#[derive(Clone)]
pub enum TxnCheck {
    /// The transaction coordinator is this broker: its state says.
    Coordinator(CoordinatorCheck),
    /// The coordinator is another broker; the producer's transaction was in progress here
    /// already when the request came, and must still be.
    Open,
    /// The coordinator is another broker, and added the partition to the transaction
    /// (Produce v12). The producer's epoch, bumped at every end with transaction version 2,
    /// keeps a late batch out of a later transaction (the idempotence check's epoch).
    Added,
    /// The coordinator is another broker, and said the partition is in the transaction
    /// (below v12): the verification guard set with this token before it was asked must
    /// still be there. A marker of the producer since (its own abort, with the same epoch
    /// under transaction version 1) removed it, and the batch would open a transaction that
    /// nothing ends (KIP-890's hanging transaction).
    Guarded(u64),
}

/// What a partition's topic and the request's version require of its batches.
#[derive(Clone)]
pub struct Rules {
    /// The topic's `max.message.bytes`, per batch.
    pub max_message_bytes: usize,
    /// Produce v7+ (KIP-110).
    pub zstd_allowed: bool,
    /// `message.timestamp.type=LogAppendTime`.
    pub log_append_time: bool,
    /// How a transactional batch is checked.
    pub txn: TxnCheck,
}

/// Why a producer's batches were not appended.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// A Kafka error code for the partition.
    Code(ErrorCode),
    /// INVALID_RECORD, naming the records at fault (KIP-467): (index, why), and a summary.
    Records(Vec<(i32, String)>, String),
}

/// A producer's batches appended (or found appended already: a retried idempotent batch).
pub struct Produced {
    pub base_offset: Offset,
    pub log_start: Offset,
    /// The time the batches were stamped with (LogAppendTime topics).
    pub log_append_time_ms: Option<i64>,
    written: Written,
}

impl Produced {
    /// Starts the `acks=all` wait: the fsync that covers the batches here and, in a
    /// cluster, every in-sync replica having them, for at most `within`.
    pub fn durable(self, within: std::time::Duration) -> Durable {
        self.written.durable(within)
    }
}

/// Why the storage thread's job did not append.
enum Refusal {
    Refused(Refused),
    /// A compressed batch expands past the inline bound: validate it apart, then try again.
    Large,
}

impl From<WriteError> for Refusal {
    fn from(e: WriteError) -> Refusal {
        Refusal::Refused(Refused::Code(e.partition_code()))
    }
}

fn code(code: ErrorCode) -> Refusal {
    Refusal::Refused(Refused::Code(code))
}

/// What the storage thread's job learnt besides the append.
struct Outcome {
    log_start: Offset,
    log_append_time_ms: Option<i64>,
}

/// Appends a producer's `records` (the request's bytes for this partition) to `led`,
/// through the leader's one write sequence, after every check.
pub async fn produce(
    led: &LedPartition,
    storage: &StoragePool,
    records: Bytes,
    rules: Rules,
) -> Result<Produced, Refused> {
    let mut validated = false;
    loop {
        let (rules, sent) = (rules.clone(), records.clone());
        let attempt = led
            .append_with(storage, move |append| append_job(append, sent, &rules, validated))
            .await;
        match attempt {
            Ok(Some((written, outcome))) => {
                return Ok(Produced {
                    base_offset: written.info.base_offset,
                    log_start: outcome.log_start,
                    log_append_time_ms: outcome.log_append_time_ms,
                    written,
                })
            }
            Ok(None) => unreachable!("a produce's job appends or refuses"),
            Err(Refusal::Refused(refused)) => return Err(refused),
            Err(Refusal::Large) => {
                assert!(!validated, "validated records are not checked again");
                validate_large(records.clone()).await.map_err(Refused::Code)?;
                validated = true;
            }
        }
    }
}

/// Runs on the storage thread: validates the batches (decompressing compressed ones, with a
/// bound), applies the transaction and idempotence checks, and appends.
fn append_job(
    append: &Append,
    records: Bytes,
    rules: &Rules,
    records_validated: bool,
) -> Result<Option<(AppendInfo, Outcome)>, Refusal> {
    let hosted = append.partition();
    let log = append.log;
    let mut batches = ValidBatches::validate(&records).map_err(|_| code(ErrorCode::CorruptMessage))?;
    let headers = batches.headers();
    if headers.is_empty() {
        return Err(code(ErrorCode::CorruptMessage));
    }
    for (h, start, end) in headers {
        if end - start > rules.max_message_bytes {
            return Err(code(ErrorCode::MessageTooLarge));
        }
        // As Kafka refuses it: zstd came with Produce v7 (KIP-110), so that a client too old
        // to read it never finds it in a topic.
        if !rules.zstd_allowed && matches!(h.compression(), Ok(Compression::Zstd)) {
            return Err(code(ErrorCode::UnsupportedCompressionType));
        }
    }
    if !records_validated {
        match validate_records(&records, headers, INLINE_DECOMPRESSED_BYTES_MAX) {
            Ok(()) => {}
            Err(Some(c)) => return Err(code(c)),
            Err(None) => return Err(Refusal::Large),
        }
    }
    if log.config().cleanup_compact {
        refuse_keyless(&batches, &hosted.topic, hosted.partition).map_err(Refusal::Refused)?;
    }
    if headers.iter().any(|(h, _, _)| h.is_control()) {
        // As Kafka refuses them: only a transaction coordinator writes markers.
        return Err(code(ErrorCode::InvalidRecord));
    }
    let (first, last) = (&headers[0].0, &headers[headers.len() - 1].0);
    let (pid, epoch) = (first.producer_id, first.producer_epoch);
    if headers.iter().any(|(h, _, _)| h.is_transactional()) {
        if headers
            .iter()
            .any(|(h, _, _)| !h.is_transactional() || h.producer_id != pid || h.producer_epoch != epoch)
        {
            return Err(code(ErrorCode::InvalidRecord));
        }
        match &rules.txn {
            TxnCheck::Coordinator(check) => check(pid, epoch).map_err(code)?,
            TxnCheck::Added => {}
            TxnCheck::Open => {
                if !hosted.in_transaction(pid, epoch) {
                    return Err(code(ErrorCode::InvalidTxnState));
                }
            }
            TxnCheck::Guarded(token) => {
                if !hosted.producers.guarded(pid, epoch, *token) {
                    return Err(code(ErrorCode::InvalidTxnState));
                }
            }
        }
    }
    let seqs = ProducerBatch {
        producer_id: pid,
        epoch,
        first_seq: first.base_sequence,
        last_seq: last.base_sequence.wrapping_add(last.last_offset_delta),
        max_timestamp_ms: headers
            .iter()
            .map(|(h, _, _)| h.max_timestamp)
            .max()
            .unwrap_or(-1),
    };
    match hosted.producers.check(seqs) {
        SeqCheck::Append => {}
        SeqCheck::Duplicate { base_offset } => {
            // Appended before: answered with the first append's offset, and an `acks=all`
            // wait covers it.
            let info = AppendInfo {
                base_offset: Offset(base_offset),
                last_offset: Offset(base_offset),
                log_end: log.log_end(),
                max_timestamp_ms: seqs.max_timestamp_ms,
                records: 0,
            };
            let outcome = Outcome {
                log_start: log.log_start(),
                log_append_time_ms: None,
            };
            return Ok(Some((info, outcome)));
        }
        SeqCheck::Reject(c) => return Err(code(c)),
    }
    let log_append_time_ms = rules.log_append_time.then(|| {
        let now = crate::now_ms();
        batches.set_log_append_time(now);
        now
    });
    let info = append.append_valid(batches).map_err(|e| {
        if let WriteError::Storage(e) = &e {
            laminar_metrics::warn!("append to {}-{} failed: {e}", hosted.topic, hosted.partition);
        }
        Refusal::from(e)
    })?;
    hosted.producers.record(seqs, info.base_offset.0);
    let outcome = Outcome {
        log_start: log.log_start(),
        log_append_time_ms,
    };
    Ok(Some((info, outcome)))
}

/// Checks the records of the compressed batches in `buf`, decompressing at most
/// `limit_bytes` of each. Streamed: the decompressed records are checked as they come and
/// never held, so a bomb costs the time to reach the bound, not the memory. `Err(None)`: a
/// batch expands past `limit_bytes`, below the full bound.
fn validate_records(
    buf: &[u8],
    headers: &[(BatchHeader, usize, usize)],
    limit_bytes: usize,
) -> Result<(), Option<ErrorCode>> {
    for (h, start, end) in headers {
        let compression = h.compression().map_err(|_| Some(ErrorCode::CorruptMessage))?;
        if compression == Compression::None {
            continue;
        }
        let body = &buf[start + BATCH_HEADER_BYTES..*end];
        match validate_compressed(compression, body, h.records_count, limit_bytes) {
            Ok(()) => {}
            Err(RecordsError::DecompressedTooLarge { .. }) if limit_bytes < DECOMPRESSED_BATCH_BYTES_MAX => {
                return Err(None)
            }
            Err(_) => return Err(Some(ErrorCode::CorruptMessage)),
        }
    }
    Ok(())
}

/// A compacted topic has no place for a record without a key: as Kafka does, the request's
/// batches are refused with INVALID_RECORD and each such record is named by its index
/// (KIP-467), so that a client fails exactly those and retries none of them. The batches
/// were validated before, within the decompression bound.
fn refuse_keyless(batches: &ValidBatches, topic: &str, partition: i32) -> Result<(), Refused> {
    let mut errors = Vec::new();
    let mut index = 0i32;
    for (i, (h, _, _)) in batches.headers().iter().enumerate() {
        if h.is_control() {
            continue;
        }
        let records = decode_records(batches.received(i), DECOMPRESSED_BATCH_BYTES_MAX)
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

/// Validates every batch up to the full decompression bound.
fn validate_fully(records: &[u8]) -> Result<(), ErrorCode> {
    let headers = validate_batches(records).map_err(|_| ErrorCode::CorruptMessage)?;
    validate_records(records, &headers, DECOMPRESSED_BATCH_BYTES_MAX)
        .map_err(|c| c.expect("the full bound is never past the inline one"))
}

type LargeJob = (Bytes, tokio::sync::oneshot::Sender<Result<(), ErrorCode>>);

/// The one thread that validates large compressed batches, in arrival order, at the lowest
/// CPU priority (nice 19): a stream of bombs then takes only the CPU nothing else wants.
static LARGE_BATCHES: OnceLock<Mutex<std::sync::mpsc::Sender<LargeJob>>> = OnceLock::new();

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
    LARGE_BATCHES_VALIDATED.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let queue = LARGE_BATCHES.get_or_init(|| Mutex::new(large_batches_thread()));
    let sent = queue
        .lock()
        .expect("never poisoned: send does not panic")
        .send((records, tx));
    let verdict = match sent {
        Ok(()) => rx.await.unwrap_or(Err(ErrorCode::UnknownServerError)),
        Err(_) => Err(ErrorCode::UnknownServerError),
    };
    if verdict.is_err() {
        LARGE_BATCHES_REFUSED.fetch_add(1, Ordering::Relaxed);
    }
    verdict
}
