//! Recovery at open: which segment files to trust, validated batch by batch from the
//! recovery point, and the files a crash left half made.

use crate::backend::{read_exact_at, Storage, StorageFile};
use crate::checkpoint;
use crate::config::LogConfig;
use crate::config::SEGMENT_BYTES_MAX;
use crate::error::{IoContext, Result, StorageError};
use crate::log_start;
use crate::segment::{
    self, Segment, CLEANED_SUFFIX, DATA_SUFFIX, INDEX_SUFFIX, PREPARED_SUFFIX, SWAP_SUFFIX, TIME_INDEX_SUFFIX,
};
use crate::txn::{AbortedTxn, OpenTxns, TxnIndex, TXN_INDEX_CLEANED_SUFFIX, TXN_INDEX_SUFFIX};
use crate::types::{now_ms, FilePos, Offset, RecoveryPoint};
use laminar_records::{
    control_type, validate_stored_batch, BatchHeader, BATCH_HEADER_BYTES, LOG_OVERHEAD_BYTES,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Recovery reads the data file in chunks of this size.
const RECOVERY_READ_BYTES: usize = 1 << 20;

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

/// Loads the segments in `dir`, validating from the recovery point and truncating at the
/// first invalid batch. Always returns at least one segment.
pub(super) fn recover(
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
    // A failed fsync took this log offline: what it wrote after its last successful fsync
    // may have reached only the page cache, which still shows it after the error (and an
    // fsync on a new descriptor then succeeds without writing it: PostgreSQL's 2018
    // "fsyncgate"). None of it is trusted: the log is cut there before anything is read.
    if let Some(durable) = checkpoint::read_durable_before_failure(storage, dir) {
        cut_at_durable(storage, dir, &mut bases, durable, &mut report)?;
    }
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
        let Loaded {
            mut stopped,
            stale_index_entries,
        } = load_segment(
            storage,
            &seg,
            config,
            Extent {
                trusted,
                file_len,
                next_base: bases.get(i + 1).copied(),
            },
            &mut report,
            &mut open_txns,
        )?;
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
            seg.persist_indexes(storage, stale_index_entries)?;
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
            if seg.has_unpersisted_indexes() || stale_index_entries {
                seg.persist_indexes(storage, true)?;
            } else {
                seg.mark_indexes_durable();
            }
        } else {
            seg.persist_indexes(storage, stale_index_entries)?;
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

/// Cuts the log in `dir` at `durable`, where its last successful fsync reached before one
/// failed: later segments go, the segment it is in ends there. Then forgets the failure.
fn cut_at_durable(
    storage: &dyn Storage,
    dir: &Path,
    bases: &mut Vec<Offset>,
    durable: RecoveryPoint,
    report: &mut RecoveryReport,
) -> Result<()> {
    let later: Vec<Offset> = bases
        .iter()
        .copied()
        .filter(|b| *b > durable.segment_base)
        .collect();
    delete_segments(storage, dir, &later, report)?;
    bases.retain(|b| *b <= durable.segment_base);
    if bases.last() == Some(&durable.segment_base) {
        let path = dir.join(segment::file_name(durable.segment_base, DATA_SUFFIX));
        let file = storage.open(&path, false).ctx("open", &path)?;
        if file.len().ctx("stat", &path)? > durable.position.0 {
            file.set_len(durable.position.0).ctx("truncate", &path)?;
            file.sync_data().ctx("fdatasync", &path)?;
        }
    }
    report.truncated_at.get_or_insert((
        durable.next_offset,
        durable.position,
        "an fsync failed: nothing written after the last successful one is trusted".into(),
    ));
    storage.sync_dir(dir).ctx("fsync directory", dir)?;
    let marker = dir.join(checkpoint::DURABLE_BEFORE_FAILURE_FILE);
    storage.remove_file(&marker).ctx("remove", &marker)?;
    storage.sync_dir(dir).ctx("fsync directory", dir)?;
    Ok(())
}

/// Whether the batch at byte `pos` of `seg`'s file (of `file_len` bytes) starts at `offset`.
fn batch_starts_at(seg: &Segment, pos: u64, file_len: u64, offset: Offset) -> Result<bool> {
    if pos + BATCH_HEADER_BYTES as u64 > file_len {
        return Ok(false);
    }
    let mut buf = [0u8; BATCH_HEADER_BYTES];
    read_exact_at(seg.file.as_ref(), &mut buf, pos).ctx("read", &seg.data_path)?;
    let header = BatchHeader::parse(&buf).expect("buffer holds a whole header");
    Ok(header.base_offset == offset.0)
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

/// Loads one segment's indexes and finds its end. Bytes below `trusted` were fsynced: they
/// are read only where the index does not already cover them, checked, and a damaged batch
/// there is stepped over and remembered (the rest is checked by the first read that sends
/// it, `Segment::check`); bytes from `trusted` on are validated batch by batch, and the
/// first invalid one ends the segment (a torn write). Returns why the walk stopped early, if
/// it did: the segment's end is then the first invalid byte.
fn load_segment(
    storage: &dyn Storage,
    seg: &Segment,
    config: &LogConfig,
    extent: Extent,
    report: &mut RecoveryReport,
    open_txns: &mut OpenTxns,
) -> Result<Loaded> {
    let Extent {
        trusted,
        file_len,
        next_base,
    } = extent;
    use crate::index::{Index, IndexEntry, OffsetEntry, TimeEntry};
    let load = |path: &Path| -> Option<Arc<dyn StorageFile>> { storage.open(path, false).ok() };
    let offsets_file = load(&seg.index_path);
    let times_file = load(&seg.time_index_path);
    let file_bytes = |f: &Option<Arc<dyn StorageFile>>| f.as_ref().and_then(|f| f.len().ok()).unwrap_or(0);
    let index_file_bytes = (file_bytes(&offsets_file), file_bytes(&times_file));
    let offsets = offsets_file.and_then(|f| Index::<OffsetEntry>::load(&f).ok());
    let times = times_file.and_then(|f| Index::<TimeEntry>::load(&f).ok());
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
    let mut start = match times.last() {
        Some(t) => offsets.floor(t.relative_offset).map_or(0, |e| e.position as u64),
        None => 0,
    };
    let mut start_rel = offsets
        .floor_by_position(start as u32)
        .filter(|_| start > 0)
        .map_or(0, |e| e.relative_offset);
    // The entry the walk starts from must name the batch that is there: an index that
    // disagrees with its segment (entries from a layout since cut and written over) is
    // dropped and rebuilt from the segment's start, never followed into a batch's middle.
    if start > 0 && !batch_starts_at(seg, start, file_len, Offset(seg.base.0 + start_rel as i64))? {
        report.indexes_rebuilt += 1;
        offsets = Index::default();
        times = Index::default();
        (start, start_rel) = (0, 0);
    }
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
        next_base,
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
    // Below `trusted` only headers were read (where the index did not cover them): the
    // first read of those bytes checks them before they are sent.
    seg.set_unchecked_below(trusted.min(walk.pos));
    let (end_pos, end_rel) = (walk.pos, seg.relative(walk.next));
    let stale_index_entries = {
        let mut idx = seg.indexes.lock().unwrap();
        idx.offsets.truncate_while(|e| (e.position as u64) < end_pos);
        idx.times.truncate_while(|e| e.relative_offset < end_rel);
        index_file_bytes.0 > (idx.offsets.persisted * OffsetEntry::BYTES) as u64
            || index_file_bytes.1 > (idx.times.persisted * TimeEntry::BYTES) as u64
    };
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
    Ok(Loaded {
        stopped,
        stale_index_entries,
    })
}

/// What recovery knows of a segment's file before it reads it.
struct Extent {
    /// Bytes synced before the checkpoint vouched for them.
    trusted: u64,
    file_len: u64,
    /// The base offset of the segment after it, if there is one.
    next_base: Option<Offset>,
}

/// What loading a segment found.
struct Loaded {
    /// Why the walk stopped before the file's end, if it did.
    stopped: Option<String>,
    /// An index file holds entries recovery no longer believes (past a torn tail, past a
    /// cut, garbled, or beyond the trusted bytes): its rewrite must be synced before any
    /// checkpoint vouches for bytes past them. Else a power cut can bring them back, and a
    /// later recovery trusts an entry that points into the middle of a batch written since
    /// (a follower that cut its log and replicated over it recovered short that way).
    stale_index_entries: bool,
}

struct Walk<'a> {
    seg: &'a Segment,
    pos: u64,
    next: Offset,
    trusted: u64,
    file_len: u64,
    /// The base offset of the segment after this one, if there is one.
    next_base: Option<Offset>,
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

    /// Steps over the damaged trusted batch of `total` bytes at `pos` if where it ends is
    /// known: at a sound batch, or at the end of a sealed segment's file (the next segment's
    /// base). It is remembered as damaged (reads refuse it); returns whether it stepped.
    fn step_over(&mut self, total: usize, reason: String) -> Result<bool> {
        let after = self.pos + total as u64;
        let ends_at = if after == self.file_len {
            self.next_base
        } else if after + BATCH_HEADER_BYTES as u64 <= self.trusted {
            self.pos = after;
            let sound = self.peek_sound_batch()?;
            self.pos -= total as u64;
            sound
        } else {
            None
        };
        let Some(ends_at) = ends_at.filter(|e| *e > self.next) else {
            return Ok(false);
        };
        self.seg.found(&crate::segment::Damage {
            position: self.pos,
            offset: self.next,
            reason,
        });
        self.pos = after;
        self.next = ends_at;
        Ok(true)
    }

    /// The base offset of the batch at `pos`, if it is sound.
    fn peek_sound_batch(&mut self) -> Result<Option<Offset>> {
        let at = self.fill(BATCH_HEADER_BYTES)?;
        let total = laminar_records::peek_total_bytes(&self.buf[at..]).unwrap_or(0);
        if total < BATCH_HEADER_BYTES as i64 || total as u64 > self.file_len - self.pos {
            return Ok(None);
        }
        let at = self.fill(total as usize)?;
        Ok(validate_stored_batch(&self.buf[at..at + total as usize])
            .ok()
            .map(|h| Offset(h.base_offset)))
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
                // Below the recovery point: synced before the checkpoint vouched for it, so
                // not a torn write. Checked all the same (a byte can change on the disk after
                // its fsync): a damaged batch is stepped over, not cut with all that follows.
                let at = self.fill(total)?;
                match validate_stored_batch(&self.buf[at..at + total]) {
                    Ok(h) => h,
                    Err(e) => match self.step_over(total, e.to_string())? {
                        true => continue,
                        false => return Ok(Some(format!("damaged batch at {}: {e}", self.pos))),
                    },
                }
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
