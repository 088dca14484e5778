//! Removing the log's head: retention by time and size, and DeleteRecords.

use crate::error::{IoContext, Result, StorageError};
use crate::log_start;
use crate::segment::{self, Segment, SWAP_SUFFIX};
use crate::txn::{AbortedTxn, TxnIndex, TXN_INDEX_CLEANED_SUFFIX};
use crate::types::Offset;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use super::Log;

impl Log {
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
}
