//! One partition's log: an ordered list of segments, the last of which takes appends.
//!
//! Locks, in the order they may be taken:
//! - `appender`: serialises appends and rolls. Held across the `pwrite`, so only appends
//!   of this log wait behind a slow disk write.
//! - `view`: what readers see (segments, start, end). Held only to copy or publish a few
//!   words, never across I/O, so reads of hot data never wait behind a stalled write.
//! - `flush_state`: the recovery point and the durability waiters. Never held across I/O.
//!
//! `flush_lock` serialises flushes of this log and is held across fsyncs, but appends never
//! take it: flushing never blocks appending (seed 001).
//!
//! `layout` serialises the changes to the segment list other than appends and rolls:
//! retention, DeleteRecords and the cleaner's swaps. It is held across file removals and
//! renames, so only those three wait behind a slow disk; appends never take it.
//!
//! `prepare_lock` serialises the making of the next segment's file (created and allocated
//! ahead of the roll that needs it, on a preparer thread). Appends never take it either.
//!
//! Nothing an append does may wait for a read or a journal commit that another client's
//! work can cause (issue 27): no `fallocate`, no file creation, rename, truncation or
//! directory sync. A roll swaps in a file the preparer made; once a segment is sealed the
//! flusher trims it and gives it its base offset's name (see `Log::roll`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Instant;

use laminar_records::{
    control_type, validate_batches, validate_stored_batch, BatchHeader, Compression, RecordIter,
    BATCH_HEADER_BYTES, LOG_OVERHEAD_BYTES,
};

use crate::backend::{read_exact_at, Storage, StorageFile};
use crate::checkpoint;
use crate::config::LogConfig;
use crate::config::SEGMENT_BYTES_MAX;
use crate::epochs::LeaderEpochs;
use crate::error::{IoContext, Result, StorageError};
use crate::log_start;
use crate::log_threads::LogThreadsShared;
use crate::metrics::StorageMetrics;
use crate::segment::{
    self, Segment, CLEANED_SUFFIX, DATA_SUFFIX, INDEX_SUFFIX, PREPARED_SUFFIX, SWAP_SUFFIX, TIME_INDEX_SUFFIX,
};
use crate::txn::{AbortedTxn, OpenTxns, TxnIndex, TXN_INDEX_CLEANED_SUFFIX, TXN_INDEX_SUFFIX};
use crate::types::{now_ms, FilePos, Offset, RecoveryPoint};
use crate::wait::{Completion, FlushWait};

/// Record bodies decoded for a timestamp lookup are bounded by this.
const TIMESTAMP_LOOKUP_DECOMPRESSED_BYTES_MAX: usize = 256 << 20;
/// A prepared segment is allocated for about this long of its log's recent append rate
/// (at least `preallocate_bytes`): an idle log's segments hold a step, not a gigabyte each.
const PREALLOCATE_AHEAD_S: u64 = 60;
/// A log whose rate fills a whole segment within this long gets its segments allocated
/// whole (Kafka's `preallocate=true`), so its appends never grow a file.
const PREALLOCATE_WHOLE_S: u64 = 600;
/// Segments one read looks through for a batch that holds records (see `Log::read`).
const READ_SEGMENTS_MAX: usize = 16;
/// Recovery reads the data file in chunks of this size.
const RECOVERY_READ_BYTES: usize = 1 << 20;

/// Bytes of one segment that a reader may send as they are: whole batches, in order.
#[derive(Debug, Clone)]
pub struct FileRange {
    pub file: Arc<dyn StorageFile>,
    pub path: PathBuf,
    pub position: FilePos,
    pub len: u64,
    /// Base offset of the first batch in the range (at or before the requested offset).
    pub first_offset: Offset,
    /// The offset after the last batch in the range.
    pub next_offset: Offset,
}

/// What [`Log::try_flush`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flushed {
    /// Another thread is flushing this log; it will look again when it is done.
    Busy,
    /// Everything was already durable.
    Nothing,
    /// It fsynced (and completed the waiters the fsync covered).
    Synced,
}

#[derive(Debug, Clone)]
pub struct LogRead {
    /// `None` when the requested offset is the log end, or the first batch exceeds the
    /// budget and `min_one_batch` was false.
    pub range: Option<FileRange>,
    pub log_start: Offset,
    pub log_end: Offset,
    /// Every record below it is decided: no transaction open here starts below it.
    pub last_stable: Offset,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: Offset,
    pub last_offset: Offset,
    /// The log end after the append.
    pub log_end: Offset,
    pub max_timestamp_ms: i64,
    pub records: u64,
}

/// What recovery did to this log when it was opened.
#[derive(Debug, Clone, Default)]
pub struct RecoveryReport {
    pub clean: bool,
    pub recovery_point: Option<RecoveryPoint>,
    /// Bytes whose batches were fully validated (the tail after the recovery point).
    pub validated_bytes: u64,
    /// Where the log was truncated, and why.
    pub truncated_at: Option<(Offset, FilePos, String)>,
    pub segments_deleted: usize,
    pub indexes_rebuilt: usize,
}

struct View {
    segments: Vec<Arc<Segment>>,
    log_start: Offset,
    log_end: Offset,
    /// The transactions open in this log. Changed with `log_end`, under the same lock, so
    /// that a reader never sees records of a transaction without it being open.
    open_txns: OpenTxns,
}

impl View {
    /// Never below the log start: DeleteRecords or retention may pass an open transaction's
    /// first offset, and nothing below the start can be read (as Kafka clamps it).
    fn last_stable(&self) -> Offset {
        self.open_txns
            .first_unstable()
            .map_or(self.log_end, |o| o.min(self.log_end))
            .max(self.log_start)
    }
}

struct Appender {
    /// Size of the active data file: appends below it do not change the file size.
    allocated_bytes: u64,
    /// The active segment began in this process (a roll, or a new log), so its allocation
    /// was sized for it: outgrowing it within a minute means the log is faster than that
    /// size assumed. A segment found at startup was trimmed at the last close, and rolling
    /// it early would only add a segment boundary at every restart.
    sized_here: bool,
}

/// A data file made ready for the next segment before a roll needs it: created under a
/// temporary name in the log's directory and allocated.
struct PreparedFile {
    file: Arc<dyn StorageFile>,
    path: PathBuf,
    allocated_bytes: u64,
}

struct FlushState {
    flushed: RecoveryPoint,
    /// `(offset, completion)`: completes once `offset < flushed.next_offset`.
    waiters: Vec<(Offset, Arc<Completion>)>,
}

pub struct Log {
    name: String,
    dir: PathBuf,
    storage: Arc<dyn Storage>,
    metrics: Arc<StorageMetrics>,
    config: RwLock<LogConfig>,
    appender: Mutex<Appender>,
    view: RwLock<View>,
    flush_state: Mutex<FlushState>,
    flush_lock: Mutex<()>,
    layout: Mutex<()>,
    /// The cleaner's last measure of the share of cleanable bytes written since its last
    /// pass, in millionths (a gauge; 0 for logs that are not compacted).
    dirty_ratio_ppm: AtomicU64,
    /// The earliest delete horizon of the tombstones the last cleaning pass kept
    /// (`i64::MAX`: none known): once it has passed, a pass is due to remove them, dirty
    /// or not, as Kafka's cleaner does since KIP-534.
    delete_horizon_ms: AtomicI64,
    /// The recovery point the checkpoint file holds, and when it was written.
    checkpointed: Mutex<RecoveryPoint>,
    last_checkpoint_ms: AtomicI64,
    offline: Mutex<Option<String>>,
    closed: AtomicBool,
    /// A roll created a segment file whose directory entry is not yet synced. The flusher
    /// syncs the directory before it reports anything in that segment durable; the append
    /// that rolled does not wait for it (an `acks=1` produce must not wait for an fsync).
    dir_unsynced: AtomicBool,
    records_unflushed: AtomicU64,
    last_flush_ms: AtomicI64,
    /// Set when a durability waiter or the message threshold wants a flush now.
    pub(crate) flush_requested: AtomicBool,
    flusher: Mutex<Option<Weak<LogThreadsShared>>>,
    /// The next segment's file, once the preparer has made it.
    prepared: Mutex<Option<PreparedFile>>,
    /// Held while a file is being prepared (see the module's notes on locks).
    prepare_lock: Mutex<()>,
    /// Set when an append wants the next segment's file made; the preparer clears it.
    pub(crate) prepare_requested: AtomicBool,
    preparer: Mutex<Option<Weak<LogThreadsShared>>>,
    /// Numbers the prepared files' temporary names.
    prepared_seq: AtomicU64,
    recovery: RecoveryReport,
    /// Where each leader epoch began. Changed under the append lock.
    epochs: Mutex<LeaderEpochs>,
}

/// How an append places its batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendMode {
    /// As a leader: offsets from the log end, and this leader epoch, written into the
    /// batches.
    Leader { epoch: i32 },
    /// As a follower: the batches keep the offsets and epochs their leader gave them. The
    /// first starts at or after the log end (after it only where compaction left a gap).
    Replica,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("name", &self.name)
            .field("dir", &self.dir)
            .finish()
    }
}

impl Log {
    /// Opens (or creates) the log in `dir`, recovering it if `clean` is false: segments
    /// up to the recovery point are trusted; everything after it is validated batch by batch
    /// and the log is truncated at the first invalid byte.
    pub fn open(
        name: &str,
        dir: &Path,
        storage: Arc<dyn Storage>,
        config: LogConfig,
        metrics: Arc<StorageMetrics>,
        clean: bool,
    ) -> Result<Arc<Log>> {
        config.validate().map_err(|reason| StorageError::Corrupt {
            what: "log config",
            path: dir.to_path_buf(),
            reason,
        })?;
        storage.create_dir_all(dir).ctx("create directory", dir)?;
        let (segments, report, open_txns) = recover(storage.as_ref(), dir, &config, clean)?;
        let active = segments
            .last()
            .expect("recovery leaves at least one segment")
            .clone();
        let log_end = active.next_offset();
        // DeleteRecords may have moved the start into the first segment (never past the end:
        // a log truncated by recovery below it starts at its end).
        let log_start = log_start::read(storage.as_ref(), dir)
            .map_or(segments[0].base, |s| s.max(segments[0].base))
            .min(log_end);
        let allocated_bytes = active.file.len().ctx("stat", &active.data_path)?;
        let mut epochs = LeaderEpochs::load(storage.as_ref(), dir)?;
        // An epoch whose batches never reached the disk, or that recovery cut off.
        epochs.truncate_from_end(log_end, storage.as_ref(), dir)?;
        if epochs.latest().is_none() {
            // A new log, or one written before the cache existed (a single node's): epoch 0
            // from its start. Written to the file with the next epoch.
            epochs = LeaderEpochs::starting(0, log_start);
        }
        let flushed = RecoveryPoint {
            next_offset: log_end,
            segment_base: active.base,
            position: active.end_pos(),
        };
        let log = Arc::new(Log {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            storage,
            metrics,
            config: RwLock::new(config),
            appender: Mutex::new(Appender {
                allocated_bytes,
                sized_here: active.is_empty(),
            }),
            view: RwLock::new(View {
                segments,
                log_start,
                log_end,
                open_txns: open_txns.clone(),
            }),
            flush_state: Mutex::new(FlushState {
                flushed,
                waiters: Vec::new(),
            }),
            flush_lock: Mutex::new(()),
            layout: Mutex::new(()),
            dirty_ratio_ppm: AtomicU64::new(0),
            delete_horizon_ms: AtomicI64::new(i64::MAX),
            checkpointed: Mutex::new(flushed),
            last_checkpoint_ms: AtomicI64::new(now_ms()),
            offline: Mutex::new(None),
            closed: AtomicBool::new(false),
            dir_unsynced: AtomicBool::new(false),
            records_unflushed: AtomicU64::new(0),
            last_flush_ms: AtomicI64::new(now_ms()),
            flush_requested: AtomicBool::new(false),
            flusher: Mutex::new(None),
            prepared: Mutex::new(None),
            prepare_lock: Mutex::new(()),
            prepare_requested: AtomicBool::new(false),
            preparer: Mutex::new(None),
            prepared_seq: AtomicU64::new(0),
            recovery: report,
            epochs: Mutex::new(epochs),
        });
        // Recovery read every byte it kept from disk, and synced what it truncated, so the
        // whole log is now durable: record that as the new recovery point.
        checkpoint::write(log.storage.as_ref(), dir, &flushed, &open_txns)?;
        Ok(log)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    pub(crate) fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    pub(crate) fn metrics(&self) -> &Arc<StorageMetrics> {
        &self.metrics
    }

    /// The segments, oldest first; the last one takes appends.
    pub(crate) fn segments(&self) -> Vec<Arc<Segment>> {
        self.view.read().unwrap().segments.clone()
    }

    /// The segment the on-disk checkpoint points into. Recovery trusts every byte of the
    /// segments below it without reading them, so only those may be rewritten by the
    /// cleaner: a rewritten file's positions mean nothing to an older checkpoint.
    pub(crate) fn checkpointed_segment_base(&self) -> Offset {
        self.checkpointed.lock().unwrap().segment_base
    }

    /// The cleaner's last measure of this log's dirty ratio (0 to 1).
    pub fn dirty_ratio(&self) -> f64 {
        self.dirty_ratio_ppm.load(Ordering::Relaxed) as f64 / 1e6
    }

    pub(crate) fn delete_horizon_ms(&self) -> i64 {
        self.delete_horizon_ms.load(Ordering::Relaxed)
    }

    pub(crate) fn set_delete_horizon_ms(&self, horizon_ms: i64) {
        self.delete_horizon_ms.store(horizon_ms, Ordering::Relaxed);
    }

    pub(crate) fn set_dirty_ratio(&self, ratio: f64) {
        self.dirty_ratio_ppm
            .store((ratio.clamp(0.0, 1.0) * 1e6) as u64, Ordering::Relaxed);
    }

    pub fn config(&self) -> LogConfig {
        self.config.read().unwrap().clone()
    }

    pub fn set_config(&self, config: LogConfig) -> Result<(), String> {
        config.validate()?;
        *self.config.write().unwrap() = config;
        Ok(())
    }

    pub(crate) fn attach_flusher(&self, flusher: Weak<LogThreadsShared>) {
        *self.flusher.lock().unwrap() = Some(flusher);
    }

    fn notify_flusher(&self) {
        // Only the first request since the last flush started wakes a thread. A thread that
        // is flushing this log reads the flag again when its fsync returns, so waking one per
        // waiter would only add context switches (thousands a second under acks=all).
        if self.flush_requested.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(f) = self.flusher.lock().unwrap().as_ref().and_then(Weak::upgrade) {
            f.wake();
        }
    }

    pub fn log_start(&self) -> Offset {
        self.view.read().unwrap().log_start
    }

    pub fn log_end(&self) -> Offset {
        self.view.read().unwrap().log_end
    }

    /// Every record below this offset has been fsynced.
    pub fn flushed_end(&self) -> Offset {
        self.flush_state.lock().unwrap().flushed.next_offset
    }

    pub fn size_bytes(&self) -> u64 {
        self.view
            .read()
            .unwrap()
            .segments
            .iter()
            .map(|s| s.end_pos().0)
            .sum()
    }

    /// The base offset of each segment, oldest first; the last one takes appends.
    pub fn segment_bases(&self) -> Vec<Offset> {
        self.view
            .read()
            .unwrap()
            .segments
            .iter()
            .map(|s| s.base)
            .collect()
    }

    pub fn segment_count(&self) -> usize {
        self.view.read().unwrap().segments.len()
    }

    pub fn records_unflushed(&self) -> u64 {
        self.records_unflushed.load(Ordering::Relaxed)
    }

    pub fn last_flush_ms(&self) -> i64 {
        self.last_flush_ms.load(Ordering::Relaxed)
    }

    pub fn offline_reason(&self) -> Option<String> {
        self.offline.lock().unwrap().clone()
    }

    fn check_online(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(StorageError::ShuttingDown);
        }
        match self.offline.lock().unwrap().as_ref() {
            Some(reason) => Err(StorageError::Offline {
                log: self.name.clone(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// An fsync failed. The page cache may have dropped the dirty pages, so what we believe
    /// is on disk may not be: the log goes offline for good, and never retries the fsync.
    fn go_offline(&self, err: &StorageError) -> StorageError {
        let reason = err.to_string();
        *self.offline.lock().unwrap() = Some(reason.clone());
        let offline = StorageError::Offline {
            log: self.name.clone(),
            reason,
        };
        let waiters = std::mem::take(&mut self.flush_state.lock().unwrap().waiters);
        for (_, c) in waiters {
            c.complete(Err(offline.clone()));
        }
        offline
    }

    /// Appends one or more record batches, as received from a producer, on a single node
    /// (leader epoch 0). See [`Log::append_as`].
    pub fn append(&self, batches: &mut [u8]) -> Result<AppendInfo> {
        self.append_as(batches, AppendMode::Leader { epoch: 0 })
    }

    /// Appends one or more record batches. Every batch is validated before any byte is
    /// written; as a leader, offsets and the leader epoch are assigned in `batches` itself.
    /// Nothing is visible to readers until the whole write succeeded.
    pub fn append_as(&self, batches: &mut [u8], mode: AppendMode) -> Result<AppendInfo> {
        self.check_online()?;
        let config = self.config();
        if batches.is_empty() || batches.len() as u64 > config.segment_bytes {
            return Err(StorageError::AppendSize {
                bytes: batches.len(),
                segment_bytes: config.segment_bytes,
            });
        }
        let headers = validate_batches(batches)?;
        let records: u64 = headers
            .iter()
            .map(|(h, _, _)| h.last_offset_delta as u64 + 1)
            .sum();
        let bytes = batches.len() as u64;

        let mut app = self.appender.lock().unwrap();
        self.check_online()?;
        let (mut active, log_end) = {
            let view = self.view.read().unwrap();
            (view.segments.last().unwrap().clone(), view.log_end)
        };
        // Where the batches start and end, and the epochs they begin.
        let (first, end_offset) = match mode {
            AppendMode::Leader { .. } => (log_end, Offset(log_end.0 + records as i64)),
            AppendMode::Replica => {
                let mut next = log_end;
                for (h, _, _) in &headers {
                    if h.base_offset < next.0 {
                        return Err(StorageError::ReplicaOffsets {
                            log: self.name.clone(),
                            base_offset: h.base_offset,
                            expected: next.0,
                        });
                    }
                    next = Offset(h.next_offset());
                }
                (Offset(headers[0].0.base_offset), next)
            }
        };
        let latest = self.epochs.lock().unwrap().latest().map(|(e, _)| e);
        match mode {
            AppendMode::Leader { epoch } => {
                // A leader of an older epoch must not write after a newer one's records
                // (a broker that stopped leading, and replicated since).
                if let Some(latest) = latest.filter(|latest| *latest > epoch) {
                    return Err(StorageError::StaleEpoch {
                        log: self.name.clone(),
                        epoch,
                        latest,
                    });
                }
                if latest != Some(epoch) {
                    self.change_epochs(|e| e.assign(epoch, log_end, self.storage.as_ref(), &self.dir))?;
                }
            }
            AppendMode::Replica => {
                if headers
                    .iter()
                    .any(|(h, _, _)| Some(h.partition_leader_epoch) > latest)
                {
                    self.change_epochs(|e| {
                        for (h, _, _) in &headers {
                            e.assign(
                                h.partition_leader_epoch,
                                Offset(h.base_offset),
                                self.storage.as_ref(),
                                &self.dir,
                            )?;
                        }
                        Ok(true)
                    })?;
                }
            }
        }
        let relative_end = (end_offset.0 - active.base.0) as u64;
        let age_ms = now_ms() - active.created_ms;
        let too_old = config.segment_ms.is_some_and(|ms| age_ms >= ms as i64);
        // Past these the segment cannot take the batches at all: index positions are 32-bit
        // (as Kafka's) and relative offsets too.
        let full = active.end_pos().0 + bytes > SEGMENT_BYTES_MAX || relative_end > u32::MAX as u64;
        if !active.is_empty() && (active.end_pos().0 + bytes > config.segment_bytes || too_old || full) {
            let prepared = self.prepared.lock().unwrap().take();
            match prepared {
                Some(next) => active = self.roll(&mut app, &active, log_end, next, true),
                // The preparer is behind (its disk is slow): the segment grows past
                // `segment.bytes` or `segment.ms` rather than the append waiting for a file
                // to be created. Only a segment that cannot take the batches at all, or a
                // log without a preparer (tools and tests that open one alone), makes its
                // next file here.
                None if full || !self.has_preparer() => {
                    let next = self.prepare_file(&config)?;
                    if self.has_preparer() {
                        self.metrics.rolls_inline.fetch_add(1, Ordering::Relaxed);
                    }
                    active = self.roll(&mut app, &active, log_end, next, true);
                }
                None => {
                    self.metrics.rolls_deferred.fetch_add(1, Ordering::Relaxed);
                    self.want_next_segment();
                }
            }
        } else if !active.is_empty()
            && app.sized_here
            && app.allocated_bytes > 0
            && active.end_pos().0 + bytes > app.allocated_bytes
            && age_ms < (PREALLOCATE_AHEAD_S * 1000) as i64
            && self.prepared.lock().unwrap().is_some()
        {
            // The segment outgrew its allocation within a minute: its allocation was sized
            // for a slower log (a new log's first segment gets one step). Rather than grow
            // it with writes for the rest of its life, roll into the file the preparer
            // sized for this log's rate.
            // The flusher is not woken: this roll leaves less than a batch of preallocation to
            // trim, and an fsync now would compete with the appends that outgrew it; the next
            // flush, whenever it is due, trims and syncs it first.
            let next = self.prepared.lock().unwrap().take().expect("checked above");
            active = self.roll(&mut app, &active, log_end, next, false);
        } else if active.end_pos().0 + bytes >= config.segment_bytes / 2
            || config.segment_ms.is_some_and(|ms| age_ms >= ms as i64 / 2)
            || relative_end > (u32::MAX / 2) as u64
            || (app.sized_here
                && app.allocated_bytes > 0
                && active.end_pos().0 + bytes >= app.allocated_bytes / 2
                && age_ms < (PREALLOCATE_AHEAD_S * 1000) as i64)
        {
            // Half way to a roll, or to the end of an allocation filling fast: time enough
            // for the preparer, and no more than one unused file per log at any time.
            self.want_next_segment();
        }

        let mut next = log_end;
        if let AppendMode::Leader { epoch } = mode {
            for (h, start, _) in &headers {
                batches[*start..*start + 8].copy_from_slice(&next.0.to_be_bytes());
                // Outside the CRC, which starts at the attributes.
                batches[*start + 12..*start + 16].copy_from_slice(&epoch.to_be_bytes());
                next = Offset(next.0 + h.last_offset_delta as i64 + 1);
            }
        } else {
            next = end_offset;
        }
        debug_assert_eq!(next, end_offset);

        let position = active.end_pos().0;
        let end = position + bytes;
        assert!(
            end <= SEGMENT_BYTES_MAX,
            "a segment never grows past 32-bit positions"
        );
        // Past its allocation the write extends the file itself (ext4 allocates the blocks at
        // writeback). Never `fallocate` here: it can wait seconds for a block bitmap read
        // queued behind a consumer's cold reads, and would hold the file's inode lock
        // meanwhile, which every write to the file takes.
        if end > app.allocated_bytes {
            self.metrics
                .appends_past_allocation
                .fetch_add(1, Ordering::Relaxed);
            app.allocated_bytes = end;
        }
        let t = Instant::now();
        let written = active.file.write_all_at(batches, position);
        self.metrics.segment_write_us.record_since(t);
        // A failed write leaves garbage past the published end, which the next append
        // overwrites and recovery truncates: the log itself is unchanged.
        written.ctx("write", &active.data_path)?;

        let open_txns = self.track_txns(&active, batches, &headers)?;
        let mut max_timestamp_ms = i64::MIN;
        {
            let mut idx = active.indexes.lock().unwrap();
            for (h, start, stop) in &headers {
                let base = Offset(i64::from_be_bytes(
                    batches[*start..*start + 8].try_into().unwrap(),
                ));
                idx.on_batch(
                    active.relative(base),
                    (position + *start as u64) as u32,
                    (*stop - *start) as u64,
                    h.max_timestamp,
                    config.index_interval_bytes,
                );
                max_timestamp_ms = max_timestamp_ms.max(h.max_timestamp);
            }
        }
        {
            let mut view = self.view.write().unwrap();
            active.set_end(FilePos(end), next);
            view.log_end = next;
            if let Some(open) = open_txns {
                view.open_txns = open;
            }
        }
        drop(app);

        let unflushed = self.records_unflushed.fetch_add(records, Ordering::Relaxed) + records;
        if config.flush_messages.is_some_and(|n| unflushed >= n) {
            self.notify_flusher();
        }
        Ok(AppendInfo {
            base_offset: first,
            last_offset: Offset(next.0 - 1),
            log_end: next,
            max_timestamp_ms,
            records,
        })
    }

    /// The transactions open after the batches just written (offsets assigned), if any of
    /// them is transactional, with the aborts they end added to `active`'s index. Called with
    /// the append lock held, before the batches are published.
    fn track_txns(
        &self,
        active: &Segment,
        batches: &[u8],
        headers: &[(BatchHeader, usize, usize)],
    ) -> Result<Option<OpenTxns>> {
        if !headers.iter().any(|(h, _, _)| h.is_transactional()) {
            return Ok(None);
        }
        let mut open = self.view.read().unwrap().open_txns.clone();
        let mut aborted = Vec::new();
        for (_, start, stop) in headers {
            // Parsed again for the base offset just assigned.
            let h = BatchHeader::parse(&batches[*start..*stop]).expect("a validated batch");
            let marker = if h.is_control() {
                control_type(&batches[*start..*stop])
            } else {
                None
            };
            // The stable offset right after the marker (not after the whole append, which
            // may open another transaction): readers stop their search of the index there.
            aborted.extend(open.on_batch(&h, marker, Offset(h.next_offset())));
        }
        if !aborted.is_empty() {
            // In memory now; written and synced by the flusher before the checkpoint passes
            // it (creating the file here could wait on the directory). Readers may see the
            // entries before the batches: harmless, as the transaction stays open (and the
            // stable offset below it) until they are published.
            TxnIndex::append(&active.txns, aborted);
        }
        Ok(Some(open))
    }

    /// A new leader epoch begins at the log end: recorded now, before any batch of it, so
    /// that followers asking where their epoch ends get this log end.
    pub fn begin_epoch(&self, epoch: i32) -> Result<()> {
        let _app = self.appender.lock().unwrap();
        let log_end = self.log_end();
        self.change_epochs(|e| e.assign(epoch, log_end, self.storage.as_ref(), &self.dir))?;
        Ok(())
    }

    /// Drops the epochs that begin at or past the log end: on a follower, an epoch it began
    /// as leader and never appended in, which its leader does not know (Kafka's `truncateTo`
    /// does the same when it has no records to cut). Returns whether any went.
    pub fn forget_empty_epochs(&self) -> Result<bool> {
        let _app = self.appender.lock().unwrap();
        let log_end = self.log_end();
        let before = self.epochs.lock().unwrap().entries().len();
        self.change_epochs(|e| e.truncate_from_end(log_end, self.storage.as_ref(), &self.dir))?;
        Ok(self.epochs.lock().unwrap().entries().len() != before)
    }

    /// Changes the leader epoch cache: `change` works on a copy (and writes the checkpoint
    /// file, with its fsyncs, if it changes anything) outside the lock that readers take,
    /// so that a socket thread asking for an epoch never waits for that write. Callers hold
    /// the append lock, or the log is closed: changes never race one another.
    fn change_epochs<T>(&self, change: impl FnOnce(&mut LeaderEpochs) -> Result<T>) -> Result<T> {
        let mut copy = self.epochs.lock().unwrap().clone();
        let out = change(&mut copy)?;
        *self.epochs.lock().unwrap() = copy;
        Ok(out)
    }

    /// The latest leader epoch of this log, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epochs.lock().unwrap().latest().map(|(e, _)| e)
    }

    /// OffsetForLeaderEpoch: the largest epoch at or below `epoch` and where it ends.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        let epochs = self.epochs.lock().unwrap();
        epochs.end_offset_for(epoch, self.log_end())
    }

    /// Every `(epoch, start offset)` known.
    pub fn epochs(&self) -> Vec<(i32, Offset)> {
        self.epochs.lock().unwrap().entries().to_vec()
    }

    /// The offset below which every record is decided (committed, aborted, or in no
    /// transaction): what `read_committed` consumers may read up to.
    pub fn last_stable_offset(&self) -> Offset {
        self.view.read().unwrap().last_stable()
    }

    /// The transactions open in this log, by producer id and first offset.
    pub fn open_txns(&self) -> Vec<(i64, Offset)> {
        self.view.read().unwrap().open_txns.entries().collect()
    }

    /// The aborted transactions that hold records in `[from, upper)`, as a fetch returns them
    /// to a `read_committed` consumer. An entry lives in the segment of its marker, which
    /// lies at or after `from` for every transaction that reaches `from`; the search ends at
    /// the first entry whose stable offset reaches `upper`, as every transaction that
    /// starts below `upper` ended by then (Kafka's rule).
    pub fn aborted_txns(&self, from: Offset, upper: Offset) -> Vec<AbortedTxn> {
        let segments: Vec<Arc<Segment>> = {
            let view = self.view.read().unwrap();
            let i = view
                .segments
                .partition_point(|s| s.base <= from)
                .saturating_sub(1);
            view.segments[i..].to_vec()
        };
        let mut out = Vec::new();
        for seg in &segments {
            let txns = seg.txns.lock().unwrap();
            for e in &txns.entries {
                if e.last_offset >= from && e.first_offset < upper {
                    out.push(*e);
                }
                if e.last_stable_offset >= upper {
                    return out;
                }
            }
        }
        out
    }

    /// Seals the active segment and starts a new one at `log_end` in the prepared file
    /// `next`. No disk call: the flusher syncs the directory (the new file's entry) and trims
    /// the sealed file to its real end before it reports any byte of either durable, and
    /// gives the sealed one its base offset's name and its index files. The new file keeps
    /// its prepared name while it is active (see `flush_locked`).
    fn roll(
        &self,
        app: &mut Appender,
        old: &Arc<Segment>,
        log_end: Offset,
        next: PreparedFile,
        wake_flusher: bool,
    ) -> Arc<Segment> {
        old.seal();
        old.mark_untrimmed();
        let new = Arc::new(Segment::prepared(
            &self.dir,
            log_end,
            next.file,
            next.path,
            now_ms(),
        ));
        self.dir_unsynced.store(true, Ordering::Release);
        new.set_end(FilePos(0), log_end);
        self.view.write().unwrap().segments.push(new.clone());
        app.allocated_bytes = next.allocated_bytes;
        app.sized_here = true;
        if wake_flusher {
            self.notify_flusher();
        }
        self.want_next_segment();
        new
    }

    pub(crate) fn attach_preparer(&self, preparer: Weak<LogThreadsShared>) {
        *self.preparer.lock().unwrap() = Some(preparer);
    }

    fn has_preparer(&self) -> bool {
        self.preparer
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|p| p.strong_count() > 0)
    }

    /// Asks the preparer for the next segment's file, unless one is ready or asked for.
    fn want_next_segment(&self) {
        if self.prepared.lock().unwrap().is_some() || self.prepare_requested.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(p) = self.preparer.lock().unwrap().as_ref().and_then(Weak::upgrade) {
            p.wake();
        }
    }

    /// Makes the next segment's file if it was asked for and none is ready. Runs on a
    /// preparer thread; returns at once if another thread is preparing for this log.
    pub(crate) fn prepare_next(&self) -> Result<()> {
        let Ok(_only_one) = self.prepare_lock.try_lock() else {
            return Ok(());
        };
        if !self.prepare_requested.swap(false, Ordering::AcqRel)
            || self.is_offline_or_closed()
            || self.prepared.lock().unwrap().is_some()
        {
            return Ok(());
        }
        let next = self.prepare_file(&self.config()).inspect_err(|_| {
            self.metrics.prepare_failures.fetch_add(1, Ordering::Relaxed);
        })?;
        if self.closed.load(Ordering::Acquire) {
            // Closed meanwhile: `close` found nothing to remove, so this does it.
            return self.storage.remove_file(&next.path).ctx("remove", &next.path);
        }
        *self.prepared.lock().unwrap() = Some(next);
        Ok(())
    }

    /// Creates a file for the next segment under a temporary name and allocates it for about
    /// `PREALLOCATE_AHEAD_S` of this log's recent appends. Its directory entry is not synced:
    /// the flusher renames it when a roll swaps it in, and syncs the directory then. If the
    /// allocation fails (ENOSPC) the file is still used, as a file that appends extend.
    fn prepare_file(&self, config: &LogConfig) -> Result<PreparedFile> {
        let seq = self.prepared_seq.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("{:020}{PREPARED_SUFFIX}", seq));
        let t = Instant::now();
        let file = self.storage.open(&path, true).ctx("create", &path)?;
        self.metrics.segment_create_us.record_since(t);
        let mut allocated_bytes = 0;
        let want = self.preallocation_bytes(config);
        if want > 0 {
            let t = Instant::now();
            match file.allocate(want) {
                Ok(()) => allocated_bytes = want,
                Err(_) => {
                    self.metrics.allocate_failures.fetch_add(1, Ordering::Relaxed);
                    // Whatever a failed fallocate left allocated goes back.
                    file.set_len(0).ctx("truncate", &path)?;
                }
            }
            self.metrics.segment_allocate_us.record_since(t);
        }
        Ok(PreparedFile {
            file,
            path,
            allocated_bytes,
        })
    }

    /// How much to allocate for the next segment, from the log's append rate over its last
    /// two segments (a roll asks for the next file at once, when the active one is still
    /// empty): the whole `segment_bytes` for a log that fills one within
    /// `PREALLOCATE_WHOLE_S`, else `PREALLOCATE_AHEAD_S` of its appends in whole
    /// `preallocate_bytes` steps, at least one step. 0 when preallocation is off.
    fn preallocation_bytes(&self, config: &LogConfig) -> u64 {
        let step = config.preallocate_bytes;
        if step == 0 {
            return 0;
        }
        let (bytes, since_ms) = {
            let view = self.view.read().unwrap();
            let recent = &view.segments[view.segments.len().saturating_sub(2)..];
            let bytes: u64 = recent.iter().map(|s| s.end_pos().0).sum();
            (bytes, recent[0].created_ms)
        };
        let age_ms = (now_ms() - since_ms).max(1000) as u64;
        let per_s = |s: u64| bytes.saturating_mul(s * 1000) / age_ms;
        if per_s(PREALLOCATE_WHOLE_S) >= config.segment_bytes {
            return config.segment_bytes;
        }
        (per_s(PREALLOCATE_AHEAD_S)
            .div_ceil(step)
            .max(1)
            .saturating_mul(step))
        .min(config.segment_bytes)
    }

    /// The start of a batch roughly `bytes_back` bytes before the end of the active segment
    /// (or the segment's start): where a scan of the log's recent history can begin.
    pub fn recent_offset(&self, bytes_back: u64) -> Offset {
        let active = self.view.read().unwrap().segments.last().unwrap().clone();
        let target = active.end_pos().0.saturating_sub(bytes_back).min(u32::MAX as u64) as u32;
        let idx = active.indexes.lock().unwrap();
        idx.offsets
            .floor_by_position(target)
            .map_or(active.base, |e| Offset(active.base.0 + e.relative_offset as i64))
    }

    /// Returns a future that completes once every record up to and including `offset` is
    /// durable. It asks the flusher to run; it never fsyncs on the caller's thread.
    pub fn wait_flushed(&self, offset: Offset) -> FlushWait {
        if let Err(e) = self.check_online() {
            return FlushWait::ready(Err(e));
        }
        {
            let mut st = self.flush_state.lock().unwrap();
            if offset < st.flushed.next_offset {
                return FlushWait::ready(Ok(st.flushed.next_offset));
            }
            let (wait, completion) = FlushWait::pending();
            st.waiters.push((offset, completion));
            drop(st);
            self.notify_flusher();
            wait
        }
    }

    /// Fsyncs everything appended so far, then completes the waiters it covers, then (at
    /// most every `checkpoint_interval_ms`) writes the recovery-point checkpoint. Runs on a
    /// flusher thread (or at close). Returns whether there was anything to flush.
    pub fn flush(&self) -> Result<bool> {
        let guard = self.flush_lock.lock().unwrap();
        self.flush_locked(guard, true).map(|f| f == Flushed::Synced)
    }

    /// Like [`Log::flush`], but returns [`Flushed::Busy`] at once if another thread is
    /// flushing this log, and leaves the checkpoint until it is due.
    pub fn try_flush(&self) -> Result<Flushed> {
        match self.flush_lock.try_lock() {
            Ok(guard) => self.flush_locked(guard, false),
            Err(_) => Ok(Flushed::Busy),
        }
    }

    /// When (ms since the epoch) the checkpoint file, older than the recovery point in memory,
    /// is due to be rewritten; `None` if it is current.
    pub fn checkpoint_due_ms(&self) -> Option<i64> {
        let flushed = self.flush_state.lock().unwrap().flushed;
        (*self.checkpointed.lock().unwrap() != flushed).then(|| {
            self.last_checkpoint_ms.load(Ordering::Relaxed)
                + self.config.read().unwrap().checkpoint_interval_ms as i64
        })
    }

    /// Is this log offline (a failed fsync) or closed? The flusher leaves it alone then.
    pub fn is_offline_or_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire) || self.offline.lock().unwrap().is_some()
    }

    fn flush_locked(
        &self,
        _only_one: std::sync::MutexGuard<'_, ()>,
        checkpoint_now: bool,
    ) -> Result<Flushed> {
        if let Some(reason) = self.offline.lock().unwrap().clone() {
            return Err(StorageError::Offline {
                log: self.name.clone(),
                reason,
            });
        }
        self.flush_requested.store(false, Ordering::Release);
        let unflushed_before = self.records_unflushed.load(Ordering::Relaxed);
        let flushed = self.flush_state.lock().unwrap().flushed;
        let (segments, target, open_txns) = {
            let view = self.view.read().unwrap();
            let segments: Vec<Arc<Segment>> = view
                .segments
                .iter()
                .filter(|s| s.base >= flushed.segment_base || (s.is_sealed() && !s.indexes_durable()))
                .cloned()
                .collect();
            let active = view.segments.last().unwrap();
            let target = RecoveryPoint {
                next_offset: view.log_end,
                segment_base: active.base,
                position: active.end_pos(),
            };
            (segments, target, view.open_txns.clone())
        };
        let pending_indexes = segments.iter().any(|s| s.is_sealed() && !s.indexes_durable());
        let checkpointed = *self.checkpointed.lock().unwrap();
        let checkpoint_due = checkpointed != target
            && (checkpoint_now
                || now_ms() - self.last_checkpoint_ms.load(Ordering::Relaxed)
                    >= self.config.read().unwrap().checkpoint_interval_ms as i64);
        let dir_unsynced = self.dir_unsynced.swap(false, Ordering::AcqRel);
        if target == flushed && !pending_indexes && !checkpoint_due && !dir_unsynced {
            return Ok(Flushed::Nothing);
        }
        let started = Instant::now();
        // What rolls left to do, off the append path: trim each sealed segment's preallocated
        // tail and give it its base offset's name; then write the aborted-transaction
        // entries appended since the last flush (their file may be new). The active segment
        // keeps the name it was prepared under: a rename holds the file's inode lock, which
        // every write to it takes, for as long as the directory makes it wait. Its data is
        // durable under either name (recovery adopts a prepared file that holds batches).
        // A failure leaves what is on disk unknown to this log, as a failed fsync does.
        let mut dir_changed = false;
        for seg in segments.iter().filter(|s| s.is_sealed()) {
            let t = Instant::now();
            let trimmed = seg.trim();
            if let Err(e) = &trimmed {
                return Err(self.go_offline(e));
            }
            if trimmed.is_ok_and(|t| t) {
                self.metrics.segment_trim_us.record_since(t);
            }
            let t = Instant::now();
            match seg.finish_name(self.storage.as_ref()) {
                Ok(renamed) => {
                    if renamed {
                        self.metrics.segment_rename_us.record_since(t);
                    }
                    dir_changed |= renamed;
                }
                Err(e) => return Err(self.go_offline(&e)),
            }
        }
        for seg in &segments {
            if seg.txns.lock().unwrap().pending() {
                let t = Instant::now();
                match TxnIndex::persist(&seg.txns, self.storage.as_ref(), &seg.txn_index_path) {
                    Ok(created) => dir_changed |= created,
                    Err(e) => return Err(self.go_offline(&e)),
                }
                self.metrics.metadata_fsync_us.record_since(t);
            }
        }
        // Segments created by rolls since the last flush: their names must be durable before
        // any of their data is reported durable. Taken after `target` was read, so every
        // segment in `target` is covered (a later roll sets the flag again).
        if dir_unsynced || dir_changed {
            let t = Instant::now();
            let synced = self.storage.sync_dir(&self.dir).ctx("fsync directory", &self.dir);
            self.metrics.metadata_fsync_us.record_since(t);
            if let Err(e) = synced {
                return Err(self.go_offline(&e));
            }
        }
        // Every segment from the recovery point's on, even one whose bytes were all synced
        // before it rolled: it was trimmed above, and the trim must be durable before any
        // later segment is.
        for seg in &segments {
            let t = Instant::now();
            let synced = seg.file.sync_data().ctx("fdatasync", &seg.data_path);
            self.metrics.segment_fsync_us.record_since(t);
            if let Err(e) = synced {
                return Err(self.go_offline(&e));
            }
        }
        for seg in segments.iter().filter(|s| s.is_sealed() && !s.indexes_durable()) {
            let t = Instant::now();
            if let Err(e) = seg.persist_indexes(self.storage.as_ref(), true) {
                return Err(self.go_offline(&e));
            }
            self.metrics.metadata_fsync_us.record_since(t);
        }
        // Aborted-transaction entries cannot be rebuilt once the checkpoint passes their
        // markers: they were made durable above, with every entry appended before `target`
        // was read (and perhaps some after).
        // Group commit: everything appended before the fsync started is durable, so every
        // waiter for an offset below `target` completes now, together.
        let done: Vec<Arc<Completion>> = {
            let mut st = self.flush_state.lock().unwrap();
            debug_assert!(
                target.next_offset >= st.flushed.next_offset,
                "the recovery point only moves on"
            );
            st.flushed = target;
            let (done, waiting): (Vec<_>, Vec<_>) =
                st.waiters.drain(..).partition(|(o, _)| *o < target.next_offset);
            st.waiters = waiting;
            done.into_iter().map(|(_, c)| c).collect()
        };
        for c in done {
            c.complete(Ok(target.next_offset));
        }
        self.records_unflushed
            .fetch_sub(unflushed_before, Ordering::Relaxed);
        self.last_flush_ms.store(now_ms(), Ordering::Relaxed);
        // Waiters that arrived during this flush for offsets it did not cover need another,
        // and must not wait behind the checkpoint below.
        if !self.flush_state.lock().unwrap().waiters.is_empty() {
            self.flush_requested.store(true, Ordering::Release);
        }
        let checkpoint_due = checkpoint_now
            || now_ms() - self.last_checkpoint_ms.load(Ordering::Relaxed)
                >= self.config.read().unwrap().checkpoint_interval_ms as i64;
        if checkpoint_due && *self.checkpointed.lock().unwrap() != target {
            // The active segment's new index entries are written but not synced: recovery
            // validates them and rebuilds whatever is missing. The data is already durable,
            // so a failure here (ENOSPC, EIO) costs only recovery time: the old checkpoint
            // stays, the log stays online, and the next flush tries again. Unlike a failed
            // fsync, nothing about the data is left unknown.
            let t = Instant::now();
            let written = match segments.last().filter(|s| !s.is_sealed()) {
                Some(active) => active.persist_indexes(self.storage.as_ref(), false),
                None => Ok(()),
            }
            .and_then(|()| checkpoint::write(self.storage.as_ref(), &self.dir, &target, &open_txns));
            match written {
                Ok(()) => {
                    *self.checkpointed.lock().unwrap() = target;
                    self.last_checkpoint_ms.store(now_ms(), Ordering::Relaxed);
                    self.metrics.metadata_fsync_us.record_since(t);
                }
                Err(_) => {
                    self.metrics.checkpoint_failures.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        self.metrics.log_flush_us.record_since(started);
        Ok(Flushed::Synced)
    }

    /// Finds the batches to send for a read from `start`: whole batches of one segment,
    /// starting with the one that contains `start`, up to `max_bytes` (or one batch over
    /// it with `min_one_batch`, as Kafka returns the first batch whole). May read batch
    /// headers from disk, so it runs on a storage or I/O thread, never a socket thread.
    pub fn read(&self, start: Offset, max_bytes: u64, min_one_batch: bool) -> Result<LogRead> {
        self.read_to(start, max_bytes, min_one_batch, Offset(i64::MAX))
    }

    /// Like [`Log::read`], but returns only batches below `upper` (which is a batch
    /// boundary, such as the last stable offset for a `read_committed` consumer).
    pub fn read_committed(&self, start: Offset, max_bytes: u64, min_one_batch: bool) -> Result<LogRead> {
        self.read_to(start, max_bytes, min_one_batch, Offset(-1))
    }

    /// Like [`Log::read`], but only batches below `high_watermark` (in a cluster, what the
    /// in-sync replicas hold), and below the last stable offset too if `committed`.
    pub fn read_below(
        &self,
        start: Offset,
        max_bytes: u64,
        min_one_batch: bool,
        high_watermark: Offset,
        committed: bool,
    ) -> Result<LogRead> {
        let upper = if committed {
            self.last_stable_offset().min(high_watermark)
        } else {
            high_watermark
        };
        self.read_to(start, max_bytes, min_one_batch, upper.max(Offset(0)))
    }

    /// Reads below `upper`; -1 stands for the last stable offset, taken with the log's end.
    fn read_to(&self, start: Offset, max_bytes: u64, min_one_batch: bool, upper: Offset) -> Result<LogRead> {
        self.check_online()?;
        let (segments, log_start, log_end, last_stable) = {
            let view = self.view.read().unwrap();
            let i = view
                .segments
                .partition_point(|s| s.base <= start)
                .saturating_sub(1);
            // A read passes over segments holding only emptied batches (compaction), up to
            // a bound: past it the reader gets the last emptied batch and moves on from there.
            let segments: Vec<Arc<Segment>> = view.segments[i..]
                .iter()
                .take(READ_SEGMENTS_MAX)
                .cloned()
                .collect();
            (segments, view.log_start, view.log_end, view.last_stable())
        };
        let upper = if upper.0 < 0 {
            last_stable
        } else {
            upper.min(log_end)
        };
        if start < log_start || start > log_end {
            return Err(StorageError::OffsetOutOfRange {
                requested: start,
                log_start,
                log_end,
            });
        }
        let empty = LogRead {
            range: None,
            log_start,
            log_end,
            last_stable,
        };
        if start >= upper {
            return Ok(empty);
        }
        let t = Instant::now();
        // The last batch a cleaner emptied that was passed over, in case nothing follows it.
        let mut passed_empty: Option<(&Arc<Segment>, u64, BatchHeader)> = None;
        // `start` may sit exactly at the end of a segment that has just rolled.
        for seg in segments.iter().filter(|s| start < s.next_offset()) {
            let end_pos = seg.end_pos().0;
            let mut pos = seg
                .indexes
                .lock()
                .unwrap()
                .offsets
                .floor(seg.relative(start.max(seg.base)))
                .map_or(0, |e| e.position as u64);
            let first = loop {
                let Some(h) = seg.read_header(pos, end_pos)? else {
                    break None;
                };
                if Offset(h.last_offset()) >= start {
                    // A batch the cleaner emptied (kept so that its segment still ends where
                    // the next begins) holds no record. A response of nothing else would look
                    // to librdkafka like a batch too large for its buffer, which it doubles,
                    // for good, each time: pass over it, as Kafka passes over an empty segment.
                    if h.records_count != 0 || h.is_control() {
                        break Some(h);
                    }
                    passed_empty = Some((seg, pos, h));
                }
                pos += h.total_bytes() as u64;
            };
            if let Some(first) = first {
                let range = if first.base_offset < upper.0 {
                    self.range_from(seg, pos, first, max_bytes, min_one_batch, upper)?
                } else {
                    None
                };
                self.metrics.segment_read_us.record_since(t);
                return Ok(LogRead { range, ..empty });
            }
        }
        // Only emptied batches up to the end: send the last, so the reader moves past it.
        let range = match passed_empty {
            Some((seg, pos, h)) if h.base_offset < upper.0 => {
                self.range_from(seg, pos, h, max_bytes, min_one_batch, upper)?
            }
            _ => None,
        };
        self.metrics.segment_read_us.record_since(t);
        Ok(LogRead { range, ..empty })
    }

    /// Whole batches of `seg` from the batch `first` at `pos`, up to `max_bytes` (or the
    /// first batch whole, with `min_one_batch`).
    fn range_from(
        &self,
        seg: &Arc<Segment>,
        pos: u64,
        first: BatchHeader,
        max_bytes: u64,
        min_one_batch: bool,
        upper: Offset,
    ) -> Result<Option<FileRange>> {
        debug_assert!(first.base_offset < upper.0);
        let end_pos = seg.end_pos().0;
        let first_bytes = first.total_bytes() as u64;
        if first_bytes > max_bytes && !min_one_batch {
            return Ok(None);
        }
        let mut end = pos + first_bytes;
        let mut next = Offset(first.next_offset());
        // Jump over whole batches with the index, then walk the last few headers.
        let limit = pos + max_bytes;
        if let Some(e) = seg
            .indexes
            .lock()
            .unwrap()
            .offsets
            .floor_by_position(limit.min(u32::MAX as u64) as u32)
        {
            let at = Offset(seg.base.0 + e.relative_offset as i64);
            if e.position as u64 > end && (e.position as u64) < end_pos && at <= upper {
                end = e.position as u64;
                next = at;
            }
        }
        while end < end_pos {
            let Some(h) = seg.read_header(end, end_pos)? else {
                break;
            };
            if end + h.total_bytes() as u64 > limit || h.base_offset >= upper.0 {
                break;
            }
            end += h.total_bytes() as u64;
            next = Offset(h.next_offset());
        }
        Ok(Some(FileRange {
            file: seg.file.clone(),
            path: seg.data_path.clone(),
            position: FilePos(pos),
            len: end - pos,
            first_offset: Offset(first.base_offset),
            next_offset: next,
        }))
    }

    /// The largest record timestamp in the log, if it has any records.
    pub fn max_timestamp_ms(&self) -> Option<i64> {
        let segments = self.view.read().unwrap().segments.clone();
        segments
            .iter()
            .map(|s| s.max_timestamp_ms())
            .filter(|t| *t != i64::MIN)
            .max()
    }

    /// The first offset whose record timestamp is at or after `timestamp_ms`, with that
    /// timestamp; `None` if every record is older.
    pub fn offset_for_timestamp(&self, timestamp_ms: i64) -> Result<Option<(Offset, i64)>> {
        self.check_online()?;
        let segments = self.view.read().unwrap().segments.clone();
        for seg in segments.iter().filter(|s| s.max_timestamp_ms() >= timestamp_ms) {
            let end_pos = seg.end_pos().0;
            let mut pos = {
                let idx = seg.indexes.lock().unwrap();
                let from = idx
                    .times
                    .last_below(timestamp_ms)
                    .map_or(0, |e| e.relative_offset);
                idx.offsets.floor(from).map_or(0, |e| e.position as u64)
            };
            while let Some(h) = seg.read_header(pos, end_pos)? {
                if h.max_timestamp >= timestamp_ms {
                    return Ok(Some(self.first_record_at_or_after(seg, pos, &h, timestamp_ms)?));
                }
                pos += h.total_bytes() as u64;
            }
        }
        Ok(None)
    }

    fn first_record_at_or_after(
        &self,
        seg: &Segment,
        pos: u64,
        h: &BatchHeader,
        timestamp_ms: i64,
    ) -> Result<(Offset, i64)> {
        if h.is_log_append_time() {
            return Ok((Offset(h.base_offset), h.max_timestamp));
        }
        let mut buf = vec![0u8; h.total_bytes()];
        read_exact_at(seg.file.as_ref(), &mut buf, pos).ctx("read", &seg.data_path)?;
        validate_stored_batch(&buf)?;
        let body = &buf[BATCH_HEADER_BYTES..];
        let owned;
        let records = match h.compression()? {
            Compression::None => body,
            c => {
                owned = laminar_records::decompress(c, body, TIMESTAMP_LOOKUP_DECOMPRESSED_BYTES_MAX)?;
                &owned[..]
            }
        };
        for r in RecordIter::new(records, h.records_count).with_base_timestamp(h.base_timestamp) {
            let r = r?;
            if r.timestamp_ms >= timestamp_ms {
                return Ok((Offset(h.base_offset + r.offset_delta as i64), r.timestamp_ms));
            }
        }
        Ok((Offset(h.base_offset), h.max_timestamp))
    }

    /// Deletes whole segments older than `retention_ms` (by their largest timestamp) or
    /// beyond `retention_bytes`, never the active one, and advances the log start.
    /// Returns how many segments were deleted.
    pub fn apply_retention(&self, now_ms: i64) -> Result<usize> {
        self.check_online()?;
        let config = self.config();
        if !config.cleanup_delete {
            return Ok(0);
        }
        let _layout = self.layout.lock().unwrap();
        let doomed: Vec<Arc<Segment>> = {
            let mut view = self.view.write().unwrap();
            let mut total: u64 = view.segments.iter().map(|s| s.end_pos().0).sum();
            let mut n = 0;
            for seg in &view.segments[..view.segments.len() - 1] {
                let expired = config.retention_ms.is_some_and(|ms| {
                    seg.max_timestamp_ms() != i64::MIN && now_ms - seg.max_timestamp_ms() > ms
                });
                let too_big = config
                    .retention_bytes
                    .is_some_and(|max| total - seg.end_pos().0 >= max);
                if !(expired || too_big) {
                    break;
                }
                total -= seg.end_pos().0;
                n += 1;
            }
            let doomed: Vec<_> = view.segments.drain(..n).collect();
            view.log_start = view.log_start.max(view.segments[0].base);
            doomed
        };
        self.remove_segments(&doomed)?;
        Ok(doomed.len())
    }

    /// DeleteRecords: makes `before` the log start offset, so that no record below it is
    /// read again, and removes the segments that lie wholly below it. The new start is
    /// durable before this returns. Returns the log start offset (unchanged if `before` is
    /// not above it); `before` past the log end is OffsetOutOfRange.
    pub fn delete_records(&self, before: Offset) -> Result<Offset> {
        self.check_online()?;
        // Serializes with retention and the cleaner's swaps, so the segments below are the
        // current ones. Not with appends: they only add at the end, which stays, and they must
        // not wait behind the start's file write and its fsyncs (Kafka Streams deletes
        // records of its repartition topics every 30 s while it produces to them).
        let _layout = self.layout.lock().unwrap();
        let (log_start, log_end) = {
            let view = self.view.read().unwrap();
            (view.log_start, view.log_end)
        };
        if before > log_end || before.0 < 0 {
            return Err(StorageError::OffsetOutOfRange {
                requested: before,
                log_start,
                log_end,
            });
        }
        if before <= log_start {
            return Ok(log_start);
        }
        log_start::write(self.storage.as_ref(), &self.dir, before)?;
        let doomed: Vec<Arc<Segment>> = {
            let mut view = self.view.write().unwrap();
            view.log_start = before;
            // A segment is wholly below `before` when the next one starts at or below it; the
            // active segment always stays.
            let n = view
                .segments
                .windows(2)
                .take_while(|w| w[1].base <= before)
                .count();
            view.segments.drain(..n).collect()
        };
        debug_assert!(self.log_start() == before && self.log_start() <= self.log_end());
        self.remove_segments(&doomed)?;
        Ok(before)
    }

    /// Replaces `old`, consecutive sealed segments, with `cleaned`: their cleaned copy, whose
    /// data file `cleaned_path` (`B.log.cleaned`, where B is `old[0]`'s base) is written and
    /// synced, and whose last batch ends where `old` ends. Each step is durable before the
    /// next, and recovery finishes a swap that a crash interrupted (see `finish_swaps`):
    ///
    /// 1. rename `B.log.cleaned` to `B.log.swap`: from here on, the swap happens;
    /// 2. remove the files of every segment in `old`;
    /// 3. rename `B.log.swap` to `B.log`, and write its index files;
    /// 4. readers see `cleaned` in place of `old` (those reading `old` keep its descriptors).
    ///
    /// Returns false, and removes the cleaned file, if `old` is no longer in the log
    /// (retention or DeleteRecords removed some of it meanwhile). A failure after step 1
    /// takes the log offline: what the directory holds is then known only to recovery.
    pub(crate) fn swap_cleaned(
        &self,
        old: &[Arc<Segment>],
        cleaned: Arc<Segment>,
        cleaned_path: &Path,
        aborted: Vec<AbortedTxn>,
    ) -> Result<bool> {
        assert!(!old.is_empty() && cleaned.base == old[0].base && cleaned.is_sealed());
        assert_eq!(
            cleaned.next_offset(),
            old.last().unwrap().next_offset(),
            "a cleaned segment covers the offsets it replaces"
        );
        let _layout = self.layout.lock().unwrap();
        self.check_online()?;
        let at = {
            let view = self.view.read().unwrap();
            let at = view.segments.iter().position(|s| Arc::ptr_eq(s, &old[0]));
            at.filter(|&i| {
                i + old.len() < view.segments.len()
                    && view.segments[i..i + old.len()]
                        .iter()
                        .zip(old)
                        .all(|(a, b)| Arc::ptr_eq(a, b))
            })
        };
        let Some(at) = at else {
            self.storage
                .remove_file(cleaned_path)
                .ctx("remove", cleaned_path)?;
            return Ok(false);
        };
        // The aborted transactions whose markers the cleaned segment keeps, in one index,
        // durable before the commit point (recovery renames it into place with the swap).
        let merged = aborted;
        let merged_path = self
            .dir
            .join(segment::file_name(cleaned.base, TXN_INDEX_CLEANED_SUFFIX));
        let merged_index = if merged.is_empty() {
            TxnIndex::default()
        } else {
            let index = TxnIndex::rewrite(self.storage.as_ref(), &merged_path, merged)?;
            self.storage
                .sync_dir(&self.dir)
                .ctx("fsync directory", &self.dir)?;
            index
        };
        let swap_path = self.dir.join(segment::file_name(cleaned.base, SWAP_SUFFIX));
        self.storage
            .rename(cleaned_path, &swap_path)
            .ctx("rename", cleaned_path)?;
        let steps = || -> Result<()> {
            self.storage
                .sync_dir(&self.dir)
                .ctx("fsync directory", &self.dir)?;
            for seg in old {
                seg.remove_files(self.storage.as_ref())?;
            }
            self.storage
                .sync_dir(&self.dir)
                .ctx("fsync directory", &self.dir)?;
            // The data first: recovery renames a merged index left behind once no
            // `B.log.cleaned` or `B.log.swap` is there, while removing the replaced
            // segments' indexes would take a merged index renamed before the data.
            self.storage
                .rename(&swap_path, &cleaned.data_path)
                .ctx("rename", &swap_path)?;
            if !merged_index.entries.is_empty() {
                self.storage
                    .rename(&merged_path, &cleaned.txn_index_path)
                    .ctx("rename", &merged_path)?;
            }
            self.storage
                .sync_dir(&self.dir)
                .ctx("fsync directory", &self.dir)?;
            // Not synced: the segment lies below the checkpoint, so recovery trusts its data
            // and loads whatever prefix of its index files is valid (each entry has a CRC),
            // walking batch headers for the rest. Two fsyncs fewer per swap.
            cleaned.persist_indexes(self.storage.as_ref(), false)?;
            cleaned.mark_indexes_durable();
            Ok(())
        };
        let t = Instant::now();
        if let Err(e) = steps() {
            return Err(self.go_offline(&e));
        }
        self.metrics.metadata_fsync_us.record_since(t);
        debug_assert!(cleaned.indexes_durable());
        *cleaned.txns.lock().unwrap() = merged_index;
        let mut view = self.view.write().unwrap();
        view.segments.splice(at..at + old.len(), [cleaned]);
        Ok(true)
    }

    /// Unlinks the files of segments already taken out of the view, then syncs the directory.
    fn remove_segments(&self, doomed: &[Arc<Segment>]) -> Result<()> {
        for seg in doomed {
            // Readers holding this segment keep their open descriptor; unlinking is safe.
            seg.remove_files(self.storage.as_ref())?;
        }
        if !doomed.is_empty() {
            self.storage
                .sync_dir(&self.dir)
                .ctx("fsync directory", &self.dir)?;
        }
        Ok(())
    }

    /// Clean close: trims the active segment, persists every index, flushes, and refuses
    /// further appends. The caller writes the clean-shutdown marker after all logs close.
    pub fn close(&self) -> Result<()> {
        let _app = self.appender.lock().unwrap();
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if let Some(reason) = self.offline_reason() {
            return Err(StorageError::Offline {
                log: self.name.clone(),
                reason,
            });
        }
        // The next segment's file, if one was prepared, is not needed (nor named: recovery
        // would remove it anyway). One being prepared is removed by its preparer.
        if let Some(next) = self.prepared.lock().unwrap().take() {
            self.storage.remove_file(&next.path).ctx("remove", &next.path)?;
        }
        let active = self.view.read().unwrap().segments.last().unwrap().clone();
        active
            .file
            .set_len(active.end_pos().0)
            .ctx("truncate", &active.data_path)?;
        // The flush below syncs nothing if nothing was appended since the last one, and the
        // trim must be durable too: else a crash after a clean close brings back the
        // preallocated zeros, which the next recovery reads as a torn tail.
        active.file.sync_data().ctx("fdatasync", &active.data_path)?;
        active.indexes.lock().unwrap().add_time_entry();
        // Closed, the active segment takes no more writes: it gets its name now, so a clean
        // shutdown leaves every segment named as Kafka names them.
        if active.finish_name(self.storage.as_ref())? {
            self.dir_unsynced.store(true, Ordering::Release);
        }
        self.flush()?;
        active.persist_indexes(self.storage.as_ref(), true)?;
        // A clean start trusts the checkpoint for the transactions open at the end, so it
        // must be current (a flush tolerates a failed checkpoint write; close does not).
        let (point, open) = {
            let view = self.view.read().unwrap();
            let point = RecoveryPoint {
                next_offset: view.log_end,
                segment_base: active.base,
                position: active.end_pos(),
            };
            (point, view.open_txns.clone())
        };
        if *self.checkpointed.lock().unwrap() != point || !open.is_empty() {
            checkpoint::write(self.storage.as_ref(), &self.dir, &point, &open)?;
            *self.checkpointed.lock().unwrap() = point;
        }
        Ok(())
    }

    /// Cuts the files of this log, closed, back to the batch that holds `to`: that batch
    /// and everything after it go (as Kafka's `truncateTo`). Later segments are removed and
    /// the checkpoint with them: reopening the log validates it all again, which rebuilds
    /// its indexes, its aborted-transaction indexes and its open transactions from the
    /// batches that remain. (Slow for a long log, but a truncation is rare: a follower whose
    /// log diverged under an old leader.) Returns the log end after the cut.
    pub(crate) fn cut_closed(&self, to: Offset) -> Result<Offset> {
        assert!(self.closed.load(Ordering::Acquire), "only a closed log is cut");
        // A cleaner pass or retention may still hold the segment list: the cut waits for it,
        // so that no swap lands on files it has cut or removed.
        let _layout = self.layout.lock().unwrap();
        let segments = self.view.read().unwrap().segments.clone();
        let mut end = to;
        for seg in segments.iter().rev() {
            if seg.base >= to && seg.base > segments[0].base {
                seg.remove_files(self.storage.as_ref())?;
                continue;
            }
            // The segment that holds `to` (or the first, which always stays): find the
            // first batch that reaches `to`, and cut the file there.
            let end_pos = seg.end_pos().0;
            let mut pos = 0u64;
            end = seg.base;
            while let Some(h) = seg.read_header(pos, end_pos)? {
                if h.last_offset() >= to.0 {
                    break;
                }
                pos += h.total_bytes() as u64;
                end = Offset(h.next_offset());
            }
            seg.file.set_len(pos).ctx("truncate", &seg.data_path)?;
            seg.file.sync_data().ctx("fdatasync", &seg.data_path)?;
            break;
        }
        let checkpoint = self.dir.join(checkpoint::CHECKPOINT_FILE);
        if self.storage.exists(&checkpoint) {
            self.storage.remove_file(&checkpoint).ctx("remove", &checkpoint)?;
        }
        self.change_epochs(|e| e.truncate_from_end(end, self.storage.as_ref(), &self.dir))?;
        self.storage
            .sync_dir(&self.dir)
            .ctx("fsync directory", &self.dir)?;
        Ok(end)
    }

    /// Removes every file of a closed log and records `start` as its start, so that it opens
    /// again empty at `start` (Kafka's `truncateFullyAndStartAt`): a follower whose leader no
    /// longer has the records it would fetch next.
    pub(crate) fn empty_closed(&self, start: Offset) -> Result<()> {
        assert!(
            self.closed.load(Ordering::Acquire),
            "only a closed log is emptied"
        );
        let _layout = self.layout.lock().unwrap();
        // Data segments first, the newest first, the epoch cache last: a crash part way
        // leaves a log with its epochs for what remains (whose truncation then still
        // works), or no segment at all.
        let mut names = self.storage.list_dir(&self.dir).ctx("list", &self.dir)?;
        let rank = |n: &String| {
            if n.ends_with(".log") {
                0
            } else if n == crate::epochs::EPOCHS_FILE {
                2
            } else {
                1
            }
        };
        names.sort_by(|a, b| rank(a).cmp(&rank(b)).then(b.cmp(a)));
        for name in names {
            let path = self.dir.join(&name);
            self.storage.remove_file(&path).ctx("remove", &path)?;
        }
        log_start::write(self.storage.as_ref(), &self.dir, start)?;
        self.storage.sync_dir(&self.dir).ctx("fsync directory", &self.dir)
    }

    pub(crate) fn open_config(&self) -> LogConfig {
        self.config()
    }

    /// Removes the log's directory. The log must not be used afterwards.
    pub fn delete(&self) -> Result<()> {
        self.closed.store(true, Ordering::Release);
        // A file being prepared in the directory would make its removal fail.
        let _no_preparation = self.prepare_lock.lock().unwrap();
        let waiters = std::mem::take(&mut self.flush_state.lock().unwrap().waiters);
        for (_, c) in waiters {
            c.complete(Err(StorageError::UnknownLog(self.name.clone())));
        }
        self.storage
            .remove_dir_all(&self.dir)
            .ctx("remove directory", &self.dir)
    }
}

/// Loads the segments in `dir`, validating from the recovery point and truncating at the
/// first invalid batch. Always returns at least one segment.
fn recover(
    storage: &dyn Storage,
    dir: &Path,
    config: &LogConfig,
    clean: bool,
) -> Result<(Vec<Arc<Segment>>, RecoveryReport, OpenTxns)> {
    let mut names = storage.list_dir(dir).ctx("list", dir)?;
    if finish_swaps(storage, dir, &names)? | adopt_prepared(storage, dir, &names)? {
        names = storage.list_dir(dir).ctx("list", dir)?;
    }
    let mut bases: Vec<Offset> = names
        .iter()
        .filter_map(|n| segment::parse_file_name(n, DATA_SUFFIX))
        .collect();
    bases.sort();
    // Index files without a data file, temporary files and a cleaning pass's unfinished
    // output are left-overs of a crash.
    for name in &names {
        let orphan = [INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX]
            .iter()
            .any(|sfx| segment::parse_file_name(name, sfx).is_some_and(|b| !bases.contains(&b)));
        // A cleaning pass's merged aborted-transaction index: with its `B.log.cleaned` the pass
        // never committed; without it (and with `B.log`), the swap was done but for renaming
        // the index into place.
        if let Some(b) = segment::parse_file_name(name, TXN_INDEX_CLEANED_SUFFIX) {
            let path = dir.join(name);
            let uncommitted = names
                .iter()
                .any(|n| segment::parse_file_name(n, CLEANED_SUFFIX) == Some(b));
            if uncommitted || !bases.contains(&b) {
                storage.remove_file(&path).ctx("remove", &path)?;
            } else {
                let to = dir.join(segment::file_name(b, TXN_INDEX_SUFFIX));
                storage.rename(&path, &to).ctx("rename", &path)?;
                storage.sync_dir(dir).ctx("fsync directory", dir)?;
            }
            continue;
        }
        if orphan || name.ends_with(".tmp") || segment::parse_file_name(name, CLEANED_SUFFIX).is_some() {
            let path = dir.join(name);
            storage.remove_file(&path).ctx("remove", &path)?;
        }
    }
    let checkpoint = checkpoint::read(storage, dir);
    let recovery_point = checkpoint.as_ref().map(|c| c.point);
    // The transactions open at the recovery point; recovery follows the batches after it.
    let mut open_txns = checkpoint.map(|c| c.open_txns).unwrap_or_default();
    // A clean shutdown wrote the checkpoint last; without one, what was open is unknown and
    // every batch is read again.
    let clean = clean && recovery_point.is_some();
    let mut report = RecoveryReport {
        clean,
        recovery_point,
        ..Default::default()
    };
    if bases.is_empty() {
        // A new log starts at 0; one emptied to start again elsewhere (a follower behind its
        // leader's log start) at the start it recorded.
        let base = log_start::read(storage, dir).unwrap_or(Offset(0));
        let seg = Segment::new(storage, dir, base, true, now_ms())?;
        // A new log's first segment gets one step here, where a topic is created, not on
        // the append path; the preparer makes every later one. A failure (ENOSPC) only
        // leaves appends to extend the file.
        if config.preallocate_bytes > 0 {
            let want = config.preallocate_bytes.min(config.segment_bytes);
            if seg.file.allocate(want).is_err() {
                seg.file.set_len(0).ctx("truncate", &seg.data_path)?;
            }
        }
        storage.sync_dir(dir).ctx("fsync directory", dir)?;
        return Ok((vec![Arc::new(seg)], report, OpenTxns::default()));
    }

    let mut segments: Vec<Arc<Segment>> = Vec::new();
    let mut expected: Option<Offset> = None;
    for (i, &base) in bases.iter().enumerate() {
        let last = i == bases.len() - 1;
        if expected.is_some_and(|e| e != base) {
            let reason = format!(
                "segment {base} does not continue from offset {}",
                expected.unwrap()
            );
            report
                .truncated_at
                .get_or_insert((expected.unwrap(), FilePos(0), reason));
            delete_segments(storage, dir, &bases[i..], &mut report)?;
            break;
        }
        let seg = Segment::new(storage, dir, base, false, now_ms())?;
        let file_len = seg.file.len().ctx("stat", &seg.data_path)?;
        // How much of this file is known to be on disk and need not be validated.
        let trusted = if clean {
            file_len
        } else {
            match recovery_point {
                Some(rp) if base < rp.segment_base => file_len,
                Some(rp) if base == rp.segment_base => rp.position.0.min(file_len),
                _ => 0,
            }
        };
        let mut stopped = load_segment(
            storage,
            &seg,
            config,
            trusted,
            file_len,
            &mut report,
            &mut open_txns,
        )?
        .stopped;
        if stopped.is_some() && !last && bases[i + 1] == seg.next_offset() && zeros_to_end(&seg, file_len)? {
            // A sealed segment the flusher had not trimmed yet (a crash soon after a roll):
            // its batches end exactly where the next segment begins, and only preallocated
            // zeros follow them. Trimmed here as the flusher would have; nothing is lost.
            seg.file
                .set_len(seg.end_pos().0)
                .ctx("truncate", &seg.data_path)?;
            seg.file.sync_data().ctx("fdatasync", &seg.data_path)?;
            stopped = None;
        }
        expected = Some(seg.next_offset());
        let seg = Arc::new(seg);
        if let Some(reason) = stopped {
            let at = seg.end_pos();
            report.truncated_at.get_or_insert((seg.next_offset(), at, reason));
            seg.file.set_len(at.0).ctx("truncate", &seg.data_path)?;
            seg.file.sync_data().ctx("fdatasync", &seg.data_path)?;
            seg.persist_indexes(storage, false)?;
            segments.push(seg);
            delete_segments(storage, dir, &bases[i + 1..], &mut report)?;
            break;
        }
        // What was validated may still be only in the page cache (the process died, the
        // kernel did not): sync it before the new checkpoint vouches for it.
        if last && seg.end_pos().0 < file_len {
            seg.file
                .set_len(seg.end_pos().0)
                .ctx("truncate", &seg.data_path)?;
        }
        if trusted < file_len {
            seg.file.sync_data().ctx("fdatasync", &seg.data_path)?;
        }
        if !last {
            seg.seal();
            if seg.has_unpersisted_indexes() {
                seg.persist_indexes(storage, true)?;
            } else {
                seg.mark_indexes_durable();
            }
        } else {
            seg.persist_indexes(storage, false)?;
        }
        segments.push(seg);
    }
    if report.segments_deleted > 0 {
        storage.sync_dir(dir).ctx("fsync directory", dir)?;
    }
    // A truncation below the recovery point (a damaged trusted region) may have cut off
    // transactions the checkpoint holds open: nothing of them is left.
    let end = segments.last().map_or(Offset(0), |s| s.next_offset());
    open_txns.retain(|first| first < end);
    Ok((segments, report, open_txns))
}

/// Whether every byte of `seg`'s file from its end to `file_len` is zero.
fn zeros_to_end(seg: &Segment, file_len: u64) -> Result<bool> {
    let mut pos = seg.end_pos().0;
    let mut buf = vec![0u8; RECOVERY_READ_BYTES];
    while pos < file_len {
        let n = (file_len - pos).min(buf.len() as u64) as usize;
        read_exact_at(seg.file.as_ref(), &mut buf[..n], pos).ctx("read", &seg.data_path)?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        pos += n as u64;
    }
    Ok(true)
}

/// Gives each prepared file that holds batches (the active segment, which keeps its
/// prepared name, or one sealed since the flusher last ran) its base offset's name, and
/// removes the others (made ahead, never used). The batches are then validated or trusted
/// like any others: the checkpoint names segments by base offset, and the flusher synced
/// the prepared file's directory entry before it reported any of its batches durable. Only a file whose first batch is whole (its CRC holds) and starts above
/// every named segment is adopted: a damaged base offset must not place a file among the
/// older segments, where the continuity check would cut off the good ones after it.
/// Returns whether it changed the directory.
fn adopt_prepared(storage: &dyn Storage, dir: &Path, names: &[String]) -> Result<bool> {
    let mut found: Vec<(Option<Offset>, PathBuf)> = Vec::new();
    for name in names.iter().filter(|n| n.ends_with(PREPARED_SUFFIX)) {
        let path = dir.join(name);
        let file = storage.open(&path, false).ctx("open", &path)?;
        found.push((first_batch_base(file.as_ref(), &path)?, path));
    }
    if found.is_empty() {
        return Ok(false);
    }
    found.sort();
    let mut above = names
        .iter()
        .filter_map(|n| segment::parse_file_name(n, DATA_SUFFIX))
        .max();
    for (base, path) in found {
        match base.filter(|b| above.is_none_or(|a| *b > a)) {
            Some(b) => {
                let to = dir.join(segment::file_name(b, DATA_SUFFIX));
                storage.rename(&path, &to).ctx("rename", &path)?;
                above = Some(b);
            }
            None => storage.remove_file(&path).ctx("remove", &path)?,
        }
    }
    storage.sync_dir(dir).ctx("fsync directory", dir)?;
    Ok(true)
}

/// The base offset of the first batch of `file`, if that batch is whole and valid.
fn first_batch_base(file: &dyn StorageFile, path: &Path) -> Result<Option<Offset>> {
    let len = file.len().ctx("stat", path)?;
    let mut header = [0u8; BATCH_HEADER_BYTES];
    if len < BATCH_HEADER_BYTES as u64 {
        return Ok(None);
    }
    read_exact_at(file, &mut header, 0).ctx("read", path)?;
    let total = laminar_records::peek_total_bytes(&header).unwrap_or(0);
    if total < BATCH_HEADER_BYTES as i64 || total as u64 > len.min(SEGMENT_BYTES_MAX) {
        return Ok(None);
    }
    let mut batch = vec![0u8; total as usize];
    read_exact_at(file, &mut batch, 0).ctx("read", path)?;
    Ok(validate_stored_batch(&batch)
        .ok()
        .filter(|h| h.base_offset >= 0)
        .map(|h| Offset(h.base_offset)))
}

/// Finishes every cleaner swap a crash interrupted after its commit point: a `B.log.swap`
/// file replaces every segment whose base lies between B and the swap file's end offset
/// (see `Log::swap_cleaned`). The swap file was synced before it was renamed, so it is
/// whole. Returns whether there was one.
fn finish_swaps(storage: &dyn Storage, dir: &Path, names: &[String]) -> Result<bool> {
    let mut swaps: Vec<Offset> = names
        .iter()
        .filter_map(|n| segment::parse_file_name(n, SWAP_SUFFIX))
        .collect();
    swaps.sort();
    for &base in &swaps {
        let path = dir.join(segment::file_name(base, SWAP_SUFFIX));
        let file = storage.open(&path, false).ctx("open", &path)?;
        let len = file.len().ctx("stat", &path)?;
        let (mut pos, mut end) = (0u64, None);
        let mut buf = [0u8; BATCH_HEADER_BYTES];
        while pos + BATCH_HEADER_BYTES as u64 <= len {
            read_exact_at(file.as_ref(), &mut buf, pos).ctx("read", &path)?;
            let h = BatchHeader::parse(&buf).expect("a whole header");
            if h.batch_length <= 0 || pos + h.total_bytes() as u64 > len {
                break;
            }
            end = Some(Offset(h.next_offset()));
            pos += h.total_bytes() as u64;
        }
        let Some(end) = end.filter(|_| pos == len) else {
            return Err(StorageError::Corrupt {
                what: "cleaned segment",
                path,
                reason: format!("its batches end at byte {pos} of {len}"),
            });
        };
        for name in names {
            let replaced = [DATA_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX]
                .iter()
                .any(|sfx| segment::parse_file_name(name, sfx).is_some_and(|b| b >= base && b < end));
            if replaced {
                let p = dir.join(name);
                storage.remove_file(&p).ctx("remove", &p)?;
            }
        }
        storage.sync_dir(dir).ctx("fsync directory", dir)?;
        // The pass's merged aborted-transaction index, synced before the swap began.
        let merged = dir.join(segment::file_name(base, TXN_INDEX_CLEANED_SUFFIX));
        if names.iter().any(|n| dir.join(n) == merged) {
            let to = dir.join(segment::file_name(base, TXN_INDEX_SUFFIX));
            storage.rename(&merged, &to).ctx("rename", &merged)?;
        }
        let data = dir.join(segment::file_name(base, DATA_SUFFIX));
        storage.rename(&path, &data).ctx("rename", &path)?;
        storage.sync_dir(dir).ctx("fsync directory", dir)?;
    }
    Ok(!swaps.is_empty())
}

fn delete_segments(
    storage: &dyn Storage,
    dir: &Path,
    bases: &[Offset],
    report: &mut RecoveryReport,
) -> Result<()> {
    for &base in bases {
        for sfx in [DATA_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX] {
            let path = dir.join(segment::file_name(base, sfx));
            match storage.remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StorageError::io("remove", &path, e)),
            }
        }
        report.segments_deleted += 1;
    }
    Ok(())
}

/// Loads one segment's indexes and finds its end. Bytes below `trusted` were fsynced and
/// are only walked header by header where the index does not already cover them; bytes from
/// `trusted` on are validated batch by batch. Returns why the walk stopped early, if it did:
/// the segment's end is then the first invalid byte.
fn load_segment(
    storage: &dyn Storage,
    seg: &Segment,
    config: &LogConfig,
    trusted: u64,
    file_len: u64,
    report: &mut RecoveryReport,
    open_txns: &mut OpenTxns,
) -> Result<Loaded> {
    use crate::index::{Index, OffsetEntry, TimeEntry};
    let load = |path: &Path| -> Option<Arc<dyn StorageFile>> { storage.open(path, false).ok() };
    let offsets = load(&seg.index_path).and_then(|f| Index::<OffsetEntry>::load(&f).ok());
    let times = load(&seg.time_index_path).and_then(|f| Index::<TimeEntry>::load(&f).ok());
    let (mut offsets, mut times) = match (offsets, times) {
        (Some(o), Some(t)) if trusted > 0 => (o, t),
        _ => {
            if trusted > 0 {
                report.indexes_rebuilt += 1;
            }
            (Index::default(), Index::default())
        }
    };
    // Keep only entries that point into the trusted region, and time entries that an
    // offset entry covers.
    offsets.truncate_while(|e| (e.position as u64) < trusted);
    let last_rel = offsets.last().map_or(0, |e| e.relative_offset);
    times.truncate_while(|e| e.relative_offset <= last_rel);
    // Walk from the earlier of the last offset entry and the batch holding the last time
    // entry's maximum, so the segment's maximum timestamp is recomputed exactly.
    let start = match times.last() {
        Some(t) => offsets.floor(t.relative_offset).map_or(0, |e| e.position as u64),
        None => 0,
    };
    let start_rel = offsets
        .floor_by_position(start as u32)
        .filter(|_| start > 0)
        .map_or(0, |e| e.relative_offset);
    {
        let mut idx = seg.indexes.lock().unwrap();
        if let Some(t) = times.last() {
            idx.max_timestamp_ms = t.timestamp_ms;
            idx.max_timestamp_relative_offset = t.relative_offset;
        }
        idx.offsets = offsets;
        idx.times = times;
    }
    let mut walk = Walk {
        seg,
        pos: start,
        next: Offset(seg.base.0 + start_rel as i64),
        trusted,
        file_len,
        interval: config.index_interval_bytes,
        buf: Vec::new(),
        buf_pos: 0,
        validated_bytes: 0,
        open_txns,
        first_validated: None,
        aborted: Vec::new(),
    };
    let stopped = walk.run()?;
    report.validated_bytes += walk.validated_bytes;
    seg.set_end(FilePos(walk.pos), walk.next);
    let (end_pos, end_rel) = (walk.pos, seg.relative(walk.next));
    {
        let mut idx = seg.indexes.lock().unwrap();
        idx.offsets.truncate_while(|e| (e.position as u64) < end_pos);
        idx.times.truncate_while(|e| e.relative_offset < end_rel);
    }
    // The aborted-transaction index: entries for markers in the trusted part stand (they
    // were synced before the checkpoint passed them); those from the validated part are
    // rebuilt from the markers found, and the file rewritten if that changes it.
    let loaded = TxnIndex::load(storage, &seg.txn_index_path)?;
    let rebuilt = !walk.aborted.is_empty();
    let valid_below = walk.first_validated.unwrap_or(walk.next).min(walk.next);
    let mut entries: Vec<AbortedTxn> = loaded
        .entries
        .iter()
        .copied()
        .filter(|e| e.last_offset < valid_below)
        .collect();
    entries.append(&mut walk.aborted);
    // Entries rebuilt from validated markers are synced here even when the file already
    // held them (written, never synced, before a crash): the checkpoint written after
    // recovery vouches for them.
    let txns = if entries == loaded.entries && !rebuilt && loaded.exact {
        loaded
    } else {
        TxnIndex::rewrite(storage, &seg.txn_index_path, entries)?
    };
    *seg.txns.lock().unwrap() = txns;
    Ok(Loaded { stopped })
}

/// What loading a segment found.
struct Loaded {
    /// Why the walk stopped before the file's end, if it did.
    stopped: Option<String>,
}

struct Walk<'a> {
    seg: &'a Segment,
    pos: u64,
    next: Offset,
    trusted: u64,
    file_len: u64,
    interval: u64,
    buf: Vec<u8>,
    buf_pos: u64,
    validated_bytes: u64,
    /// Transactions open before the batch at `pos`, followed through validated batches.
    open_txns: &'a mut OpenTxns,
    /// The base offset of the first batch validated.
    first_validated: Option<Offset>,
    /// Transactions that validated abort markers end.
    aborted: Vec<AbortedTxn>,
}

impl Walk<'_> {
    /// Makes `[pos, pos+len)` available in `buf` and returns its start within it.
    fn fill(&mut self, len: usize) -> Result<usize> {
        let have = self.buf_pos + self.buf.len() as u64;
        if self.pos >= self.buf_pos && self.pos + len as u64 <= have {
            return Ok((self.pos - self.buf_pos) as usize);
        }
        let want = len
            .max(RECOVERY_READ_BYTES)
            .min((self.file_len - self.pos) as usize);
        self.buf.resize(want, 0);
        read_exact_at(self.seg.file.as_ref(), &mut self.buf, self.pos).ctx("read", &self.seg.data_path)?;
        self.buf_pos = self.pos;
        Ok(0)
    }

    fn run(&mut self) -> Result<Option<String>> {
        loop {
            if self.pos == self.file_len {
                return Ok(None);
            }
            let validate = self.pos >= self.trusted;
            if self.file_len - self.pos < BATCH_HEADER_BYTES as u64 {
                return Ok(Some(format!(
                    "{} trailing bytes are too few for a batch",
                    self.file_len - self.pos
                )));
            }
            let at = self.fill(BATCH_HEADER_BYTES)?;
            let total = laminar_records::peek_total_bytes(&self.buf[at..]).unwrap();
            if total < BATCH_HEADER_BYTES as i64 || total as u64 > self.file_len - self.pos {
                // Zero fill from preallocation ends up here: a length of 0.
                return Ok(Some(format!(
                    "batch length {} at {} does not fit",
                    total - LOG_OVERHEAD_BYTES as i64,
                    self.pos
                )));
            }
            let total = total as usize;
            let header = if validate {
                let at = self.fill(total)?;
                // A batch compaction filtered holds fewer records than the offsets it covers.
                match validate_stored_batch(&self.buf[at..at + total]) {
                    Ok(h) => h,
                    Err(e) => return Ok(Some(format!("invalid batch at {}: {e}", self.pos))),
                }
            } else {
                let h = BatchHeader::parse(&self.buf[at..at + BATCH_HEADER_BYTES]).unwrap();
                if h.magic != laminar_records::MAGIC_V2 {
                    return Ok(Some(format!("bad magic {} at {}", h.magic, self.pos)));
                }
                h
            };
            // Compaction leaves gaps between batches (never within one segment's range
            // end: a cleaned segment keeps its last batch), so offsets only have to grow.
            if header.base_offset < self.next.0 {
                return Ok(Some(format!(
                    "batch at {} has base offset {}, below {}",
                    self.pos, header.base_offset, self.next
                )));
            }
            if header.next_offset() - self.seg.base.0 > u32::MAX as i64 {
                return Ok(Some(format!(
                    "batch at {} overflows the segment's offset range",
                    self.pos
                )));
            }
            self.seg.indexes.lock().unwrap().on_batch(
                self.seg.relative(Offset(header.base_offset)),
                self.pos as u32,
                total as u64,
                header.max_timestamp,
                self.interval,
            );
            if validate {
                self.validated_bytes += total as u64;
                self.first_validated.get_or_insert(Offset(header.base_offset));
                if header.is_transactional() {
                    let at = self.fill(total)?;
                    let marker = control_type(&self.buf[at..at + total]);
                    let ended = self
                        .open_txns
                        .on_batch(&header, marker, Offset(header.next_offset()));
                    self.aborted.extend(ended);
                }
            }
            self.pos += total as u64;
            self.next = Offset(header.next_offset());
        }
    }
}
