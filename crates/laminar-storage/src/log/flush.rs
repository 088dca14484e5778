//! Flushing: the durability waiters, fsyncs on the flusher threads, the checkpoint.

use crate::checkpoint;
use crate::error::{IoContext, Result, StorageError};
use crate::segment::Segment;
use crate::txn::TxnIndex;
use crate::types::{now_ms, Offset, RecoveryPoint};
use crate::wait::{Completion, FlushWait};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::{Flushed, Log};

impl Log {
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
            // Again under the lock `go_offline` takes the waiters under, after marking the
            // log offline: a waiter queued once they were taken would never complete.
            if let Err(e) = self.check_online() {
                return FlushWait::ready(Err(e));
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
    /// flushing this log, and leaves the checkpoint until it is due. A flusher thread's
    /// flush: requests made meanwhile wake no other thread, so the caller must look at
    /// [`Log::flush_wanted`] when it returns.
    pub fn try_flush(&self) -> Result<Flushed> {
        match self.flush_lock.try_lock() {
            // Closed, the log was flushed by its close; a flusher that found it open just
            // before must not write its indexes or a checkpoint now, over files that a cut
            // may have changed since.
            Ok(_) if self.closed.load(Ordering::Acquire) => Ok(Flushed::Nothing),
            Ok(guard) => {
                self.flusher_flushing.store(true, Ordering::SeqCst);
                let flushed = self.flush_locked(guard, false);
                self.flusher_flushing.store(false, Ordering::SeqCst);
                flushed
            }
            Err(_) => Ok(Flushed::Busy),
        }
    }

    /// Whether a flush is asked for now (a durability waiter, an acks=1 append's reader, the
    /// message threshold). Read after [`Log::try_flush`] (SeqCst: see `notify_flusher`).
    pub fn flush_wanted(&self) -> bool {
        self.flush_requested.load(Ordering::SeqCst)
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
        if target.next_offset > flushed.next_offset {
            if let Some(listener) = self.metrics.flush_listener.get() {
                listener(&self.name);
            }
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
}
