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

use crate::backend::{Storage, StorageFile};
use crate::checkpoint;
use crate::config::LogConfig;
use crate::epochs::LeaderEpochs;
use crate::error::{IoContext, Result, StorageError};
use crate::log_start;
use crate::metrics::StorageMetrics;
use crate::segment::Segment;
use crate::txn::{AbortedTxn, OpenTxns};
use crate::types::{now_ms, FilePos, Offset, RecoveryPoint};
use crate::wait::Completion;

mod append;
mod flush;
mod read;
mod recover;
mod retention;

use recover::recover;
pub use recover::RecoveryReport;

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
    /// The active data file's allocation when it became the active segment: what the
    /// preparer sized it for (0: none, `log.preallocate.bytes=0` or a failed `fallocate`).
    /// Fixed for the segment's life, so that outgrowing it is one event, not every append
    /// after it.
    allocated_bytes: u64,
    /// Size of the active data file: appends below it do not change the file size.
    file_bytes: u64,
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

/// What a log holds (weakly) to wake the threads that work for it (the flusher's and the
/// preparer's): the log knows them only by this.
pub(crate) trait WakeThreads: Send + Sync {
    fn wake(&self);
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
    /// A flusher thread is flushing this log: it reads `flush_requested` again when its
    /// fsync is done, so a request meanwhile wakes no other thread.
    flusher_flushing: AtomicBool,
    flusher: Mutex<Option<Weak<dyn WakeThreads>>>,
    /// The next segment's file, once the preparer has made it.
    prepared: Mutex<Option<PreparedFile>>,
    /// Held while a file is being prepared (see the module's notes on locks).
    prepare_lock: Mutex<()>,
    /// Set when an append wants the next segment's file made; the preparer clears it.
    pub(crate) prepare_requested: AtomicBool,
    preparer: Mutex<Option<Weak<dyn WakeThreads>>>,
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
        crate::backend::create_dir_all_durably(storage.as_ref(), dir).ctx("create directory", dir)?;
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
                file_bytes: allocated_bytes,
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
            flusher_flushing: AtomicBool::new(false),
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

    pub(crate) fn attach_flusher(&self, flusher: Weak<dyn WakeThreads>) {
        *self.flusher.lock().unwrap() = Some(flusher);
    }

    /// Asks the flusher to sync what is appended soon, without waiting for it (an `acks=1`
    /// append whose records consumers see only once they are on the disk).
    pub fn request_flush(&self) {
        self.notify_flusher();
    }

    fn notify_flusher(&self) {
        // Only the first request since the last flush started wakes a thread. A thread that
        // is flushing this log reads the flag again when its fsync returns, so waking one per
        // waiter would only add context switches (thousands a second under acks=all), and
        // so would waking another thread while one flushes it: it would find the log busy
        // and sleep again, once per fsync. SeqCst, with the flusher's store of
        // `flusher_flushing` and its load of `flush_requested` after it (`try_flush`): if
        // this sees it flushing, that thread sees this request.
        if self.flush_requested.swap(true, Ordering::SeqCst) || self.flusher_flushing.load(Ordering::SeqCst) {
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

    /// Where the first batch found damaged in this log starts (see `Segment::check`), if a
    /// read or recovery found one: a replica cuts its log there and fetches the rest again.
    pub fn damaged_from(&self) -> Option<Offset> {
        let segments = self.view.read().unwrap().segments.clone();
        segments.iter().find_map(|s| s.damage()).map(|d| d.offset)
    }

    pub fn segment_count(&self) -> usize {
        self.view.read().unwrap().segments.len()
    }

    /// Whether the next segment's file is made and waiting, so that the next roll takes it
    /// without deferring (a test that needs rolls where `segment.bytes` puts them waits for
    /// this; appends never do).
    pub fn next_segment_ready(&self) -> bool {
        self.prepared.lock().unwrap().is_some()
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
    /// Where its last successful fsync reached is written down, so that recovery cuts the log
    /// there rather than trust what the page cache still shows after the error (and what an
    /// fsync on a new descriptor then reports synced although it never reached the disk).
    fn go_offline(&self, err: &StorageError) -> StorageError {
        let reason = err.to_string();
        let first = self.offline.lock().unwrap().replace(reason.clone()).is_none();
        if first {
            if let Some(dir_name) = self.dir.file_name() {
                let dir_name = dir_name.to_string_lossy().into_owned();
                self.metrics.went_offline.lock().unwrap().push(dir_name);
            }
            let durable = self.flush_state.lock().unwrap().flushed;
            if let Err(e) =
                checkpoint::write_durable_before_failure(self.storage.as_ref(), &self.dir, &durable)
            {
                // The disk may be gone: recovery then validates from the checkpoint, which
                // is at or below this point, and trusts what it reads.
                laminar_metrics::warn!("log {}: recording where it is durable to: {e}", self.name);
            }
        }
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
            // A damaged batch's header is not believed: a cut at or below its offset is
            // made where it starts.
            let damage = seg.damage().filter(|d| d.offset >= to);
            while let Some(h) = match damage.as_ref() {
                Some(d) if pos >= d.position => None,
                _ => seg.read_header(pos, end_pos)?,
            } {
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
