//! The write path: appends, and the rolls that swap in a prepared segment file.

use crate::config::LogConfig;
use crate::config::SEGMENT_BYTES_MAX;
use crate::error::{IoContext, Result, StorageError};
use crate::segment::{Segment, PREPARED_SUFFIX};
use crate::txn::{OpenTxns, TxnIndex};
use crate::types::{now_ms, FilePos, Offset};
use laminar_records::{control_type, ValidBatches};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Instant;

use super::{AppendInfo, AppendMode, Appender, Log, PreparedFile, WakeThreads};

/// A prepared segment is allocated for about this long of its log's recent append rate
/// (at least `preallocate_bytes`): an idle log's segments hold a step, not a gigabyte each.
const PREALLOCATE_AHEAD_S: u64 = 60;
/// A log whose rate fills a whole segment within this long gets its segments allocated
/// whole (Kafka's `preallocate=true`), so its appends never grow a file.
const PREALLOCATE_WHOLE_S: u64 = 600;

impl Log {
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
        let valid = ValidBatches::validate(batches)?;
        let (info, written) = self.append_written(valid, mode)?;
        for (start, header) in written.into_changed_headers() {
            batches[start..start + header.len()].copy_from_slice(&header);
        }
        Ok(info)
    }

    /// Appends batches validated already (a producer's, checked once as they arrived), from
    /// their own buffer, which is only read: as a leader, the offsets and the leader epoch
    /// are assigned in the headers written ([`ValidBatches::parts`]).
    pub fn append_valid(&self, batches: ValidBatches<'_>, mode: AppendMode) -> Result<AppendInfo> {
        self.append_written(batches, mode).map(|(info, _)| info)
    }

    /// [`Self::append_valid`], handing back the batches as written.
    fn append_written<'a>(
        &self,
        mut batches: ValidBatches<'a>,
        mode: AppendMode,
    ) -> Result<(AppendInfo, ValidBatches<'a>)> {
        self.check_online()?;
        let config = self.config();
        let bytes = batches.len();
        if bytes == 0 || bytes as u64 > config.segment_bytes {
            return Err(StorageError::AppendSize {
                bytes,
                segment_bytes: config.segment_bytes,
            });
        }
        let headers = batches.headers();
        let records: u64 = headers
            .iter()
            .map(|(h, _, _)| h.last_offset_delta as u64 + 1)
            .sum();
        let bytes = bytes as u64;

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
                for (h, _, _) in headers {
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
                        for (h, _, _) in headers {
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

        let next = match mode {
            // Outside the CRC, which starts at the attributes.
            AppendMode::Leader { epoch } => Offset(batches.assign_offsets(log_end.0, epoch)),
            AppendMode::Replica => end_offset,
        };
        debug_assert_eq!(next, end_offset);
        let headers = batches.headers();

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
        if end > app.file_bytes {
            self.metrics
                .appends_past_allocation
                .fetch_add(1, Ordering::Relaxed);
            app.file_bytes = end;
        }
        let t = Instant::now();
        let written = active.file.write_parts_at(&batches.parts(), position);
        self.metrics.segment_write_us.record_since(t);
        // A failed write leaves garbage past the published end, which the next append
        // overwrites and recovery truncates: the log itself is unchanged.
        written.ctx("write", &active.data_path)?;

        let open_txns = self.track_txns(&active, &batches)?;
        let mut max_timestamp_ms = i64::MIN;
        {
            let mut idx = active.indexes.lock().unwrap();
            for (h, start, stop) in headers {
                // The offset assigned above (a leader's), or the leader's (a replica's).
                let base = Offset(h.base_offset);
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
        let info = AppendInfo {
            base_offset: first,
            last_offset: Offset(next.0 - 1),
            log_end: next,
            max_timestamp_ms,
            records,
        };
        Ok((info, batches))
    }

    /// The transactions open after the batches just written (offsets assigned), if any of
    /// them is transactional, with the aborts they end added to `active`'s index. Called with
    /// the append lock held, before the batches are published.
    fn track_txns(&self, active: &Segment, batches: &ValidBatches) -> Result<Option<OpenTxns>> {
        let headers = batches.headers();
        if !headers.iter().any(|(h, _, _)| h.is_transactional()) {
            return Ok(None);
        }
        let mut open = self.view.read().unwrap().open_txns.clone();
        let mut aborted = Vec::new();
        for (i, (h, _, _)) in headers.iter().enumerate() {
            let marker = if h.is_control() {
                // The marker's type is in its record, which the append leaves as it came.
                control_type(batches.received(i))
            } else {
                None
            };
            // The stable offset right after the marker (not after the whole append, which
            // may open another transaction): readers stop their search of the index there.
            aborted.extend(open.on_batch(h, marker, Offset(h.next_offset())));
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
        app.file_bytes = next.allocated_bytes;
        app.sized_here = true;
        if wake_flusher {
            self.notify_flusher();
        }
        self.want_next_segment();
        new
    }

    pub(crate) fn attach_preparer(&self, preparer: Weak<dyn WakeThreads>) {
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
}
