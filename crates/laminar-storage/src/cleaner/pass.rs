//! One cleaning pass over one log, as Kafka's `Cleaner.doClean`:
//!
//! 1. [`examine`] finds the cleanable part: the sealed segments below the active one, below
//!    the segment the on-disk checkpoint points into (recovery trusts those without reading
//!    them), and older than `min.compaction.lag.ms`. Its dirty part starts at the cleaner
//!    checkpoint: what earlier passes have not seen.
//! 2. [`clean`] maps the newest offset of each key in the dirty part, in bounded memory. If
//!    the map fills, the pass ends at the first offset it could not put.
//! 3. Each group of segments below that end (as many as fit one segment) is rewritten,
//!    keeping for each key only its newest record, tombstones until their delete horizon,
//!    and every record at or past the end. A group in which nothing changed is left alone.
//! 4. Each rewritten group is swapped in ([`Log::swap_cleaned`], crash-safe), and the
//!    cleaner checkpoint moves to the end.
//!
//! Offsets never change: a kept record keeps its offset, and each cleaned segment keeps its
//! last batch (empty if none of its records stay), so it still ends where the next begins.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use laminar_records::clean::{filter_batch, with_delete_horizon, Filtered, DELETE_HORIZON_FLAG};
use laminar_records::{decode_records, BatchHeader, BATCH_HEADER_BYTES, LOG_OVERHEAD_BYTES};

use super::{checkpoint, OffsetMap};
use crate::backend::{read_exact_at, StorageFile};
use crate::error::{IoContext, Result, StorageError};
use crate::log::Log;
use crate::segment::{self, Segment, CLEANED_SUFFIX};
use crate::txn::AbortedTxn;
use crate::types::{FilePos, Offset};

/// One batch's records, decompressed, are bounded by this (as a fetch's would be).
const DECOMPRESSED_BYTES_MAX: usize = 256 << 20;

/// The I/O and memory a pass may use.
#[derive(Debug, Clone)]
pub struct PassLimits {
    /// `log.cleaner.dedupe.buffer.size`: the offset map's memory.
    pub dedupe_buffer_bytes: usize,
    /// `log.cleaner.io.buffer.size`: the size of each read and write.
    pub io_buffer_bytes: usize,
    /// `log.cleaner.io.max.bytes.per.second`: reads and writes together; `None`: no limit.
    pub io_max_bytes_per_s: Option<u64>,
}

/// What [`examine`] found in a log.
#[derive(Debug)]
pub struct Cleanable {
    /// Sealed segments, oldest first, that a pass may rewrite.
    segments: Vec<Arc<Segment>>,
    /// Where the part no pass has mapped yet begins.
    pub first_dirty: Offset,
    /// The base of the first segment that may not be cleaned yet.
    pub end: Offset,
    pub dirty_bytes: u64,
    pub clean_bytes: u64,
    /// The oldest dirty record is older than `max.compaction.lag.ms`.
    pub overdue: bool,
    /// Tombstones kept by the last pass have reached their delete horizon.
    pub tombstones_due: bool,
}

impl Cleanable {
    /// The share of the cleanable bytes that no pass has seen.
    pub fn dirty_ratio(&self) -> f64 {
        let total = self.dirty_bytes + self.clean_bytes;
        if total == 0 {
            0.0
        } else {
            self.dirty_bytes as f64 / total as f64
        }
    }

    /// Whether a pass is due, by `min.cleanable.dirty.ratio` or `max.compaction.lag.ms`.
    pub fn is_due(&self, min_dirty_ratio: f64) -> bool {
        self.tombstones_due
            || (self.dirty_bytes > 0 && (self.overdue || self.dirty_ratio() >= min_dirty_ratio))
    }
}

/// What one pass did.
#[derive(Debug, Clone, Default)]
pub struct PassStats {
    pub first_dirty: Offset,
    /// Where the pass's offset map ended, and the next pass's dirty part begins.
    pub end: Offset,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_removed: u64,
    pub segments_before: usize,
    pub segments_after: usize,
    pub elapsed: Duration,
    /// The earliest delete horizon of the tombstones kept (`i64::MAX`: none).
    pub delete_horizon_ms: i64,
}

/// Finds the part of `log` a pass may clean; `None` if the log is not compacted or has no
/// sealed segment to clean.
pub fn examine(log: &Log, now_ms: i64) -> Result<Option<Cleanable>> {
    let config = log.config();
    if !config.cleanup_compact {
        return Ok(None);
    }
    let all = log.segments();
    let limit = log.checkpointed_segment_base();
    // Nothing at or past the first open transaction: whether its records stay is not decided
    // yet, so they can neither be removed nor make older records of their keys go.
    let stable = log.last_stable_offset();
    let young = |s: &Segment| {
        config.min_compaction_lag_ms > 0
            && s.max_timestamp_ms() > now_ms.saturating_sub(config.min_compaction_lag_ms)
    };
    let n = all[..all.len() - 1]
        .iter()
        .take_while(|s| s.base < limit && s.next_offset() <= stable && s.is_sealed() && !young(s))
        .count();
    if n == 0 {
        return Ok(None);
    }
    let segments = all[..n].to_vec();
    let end = all[n].base;
    let log_start = log.log_start().max(segments[0].base);
    let first_dirty = checkpoint::read(log.storage().as_ref(), log.dir())
        .filter(|o| *o <= end)
        .unwrap_or(log_start)
        .max(log_start);
    let (mut dirty_bytes, mut clean_bytes) = (0, 0);
    for s in &segments {
        if s.next_offset() > first_dirty {
            dirty_bytes += s.end_pos().0;
        } else {
            clean_bytes += s.end_pos().0;
        }
    }
    let overdue = match segments.iter().find(|s| s.next_offset() > first_dirty) {
        Some(s) if config.max_compaction_lag_ms < i64::MAX => {
            // The first batch's base timestamp: the oldest record of the first dirty segment,
            // as near as one header read tells.
            let first = s.read_header(0, s.end_pos().0)?;
            first.is_some_and(|h| now_ms.saturating_sub(h.base_timestamp) > config.max_compaction_lag_ms)
        }
        _ => false,
    };
    Ok(Some(Cleanable {
        segments,
        first_dirty,
        end,
        dirty_bytes,
        clean_bytes,
        overdue,
        tombstones_due: log.delete_horizon_ms() <= now_ms,
    }))
}

/// Reads and writes at no more than a byte rate, in windows of a second, so that a pause
/// does not bank credit for a burst.
pub struct Throttle {
    bytes_per_s: Option<u64>,
    window_start: Instant,
    window_bytes: u64,
}

impl Throttle {
    pub fn new(bytes_per_s: Option<u64>) -> Throttle {
        Throttle {
            bytes_per_s: bytes_per_s.filter(|r| *r > 0),
            window_start: Instant::now(),
            window_bytes: 0,
        }
    }

    fn spend(&mut self, bytes: u64, stop: &AtomicBool) {
        let Some(rate) = self.bytes_per_s else {
            return;
        };
        if self.window_start.elapsed() >= Duration::from_secs(1) {
            self.window_start = Instant::now();
            self.window_bytes = 0;
        }
        self.window_bytes += bytes;
        let due = Duration::from_secs_f64(self.window_bytes as f64 / rate as f64);
        while !stop.load(Ordering::Relaxed) {
            let Some(left) = due.checked_sub(self.window_start.elapsed()) else {
                break;
            };
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
    }
}

/// The cleaner gives up its CPU after working through this many bytes of batches.
///
/// At nice 19 it still runs until the scheduler preempts it, which can be most of a slice
/// (milliseconds) after a socket thread woke behind it on the same CPU. A yield every few
/// tens of microseconds of work bounds that wait.
const YIELD_EVERY_BYTES: usize = 64 << 10;

/// The I/O of one pass: its limits, its throttle, its counts and the stop flag.
struct Io<'a> {
    limits: &'a PassLimits,
    throttle: &'a mut Throttle,
    stop: &'a AtomicBool,
    stats: PassStats,
    /// Bytes of batches worked through since the last yield.
    since_yield_bytes: usize,
}

impl Io<'_> {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Counts `bytes` of work; yields the CPU every [`YIELD_EVERY_BYTES`].
    fn pace(&mut self, bytes: usize) {
        self.since_yield_bytes += bytes;
        if self.since_yield_bytes >= YIELD_EVERY_BYTES {
            self.since_yield_bytes = 0;
            std::thread::yield_now();
        }
    }
}

/// The batches of one segment, in order, read a buffer at a time.
struct SegmentBatches<'a> {
    seg: &'a Segment,
    pos: u64,
    end: u64,
    buf: Vec<u8>,
    buf_pos: u64,
}

impl<'a> SegmentBatches<'a> {
    fn new(seg: &'a Segment) -> Self {
        SegmentBatches {
            seg,
            pos: 0,
            end: seg.end_pos().0,
            buf: Vec::new(),
            buf_pos: 0,
        }
    }

    /// The next batch: its position in the segment and its bytes' range in `self.buf`.
    fn next(&mut self, io: &mut Io) -> Result<Option<(u64, Range<usize>)>> {
        if self.pos >= self.end {
            return Ok(None);
        }
        let at = self.fill(BATCH_HEADER_BYTES, io)?;
        let header = BatchHeader::parse(&self.buf[at..at + BATCH_HEADER_BYTES])?;
        let total = header.total_bytes() as u64;
        // The log wrote this segment and it is sealed: a batch that does not fit is a bug
        // or a disk that lies.
        if header.batch_length < (BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES) as i32
            || self.pos + total > self.end
        {
            return Err(StorageError::Corrupt {
                what: "batch header",
                path: self.seg.data_path.clone(),
                reason: format!(
                    "batch at {} claims {total} bytes; segment ends at {}",
                    self.pos, self.end
                ),
            });
        }
        let at = self.fill(total as usize, io)?;
        // A batch damaged on the disk is not copied into a cleaned segment (whose batches
        // this process vouches for, and whose emptied or filtered batches get new CRCs).
        if let Err(e) = laminar_records::validate_stored_batch(&self.buf[at..at + total as usize]) {
            return Err(StorageError::Corrupt {
                what: "batch",
                path: self.seg.data_path.clone(),
                reason: format!("at position {}: {e}", self.pos),
            });
        }
        let pos = self.pos;
        self.pos += total;
        // The caller works through the batch before asking for the next one.
        io.pace(total as usize);
        Ok(Some((pos, at..at + total as usize)))
    }

    /// Makes `[pos, pos+len)` available in `buf` and returns its start within it.
    fn fill(&mut self, len: usize, io: &mut Io) -> Result<usize> {
        let have = self.buf_pos + self.buf.len() as u64;
        if self.pos >= self.buf_pos && self.pos + len as u64 <= have {
            return Ok((self.pos - self.buf_pos) as usize);
        }
        let want = len
            .max(io.limits.io_buffer_bytes)
            .min((self.end - self.pos) as usize);
        assert!(want >= len, "reads stay inside the segment");
        self.buf.resize(want, 0);
        read_exact_at(self.seg.file.as_ref(), &mut self.buf, self.pos).ctx("read", &self.seg.data_path)?;
        self.buf_pos = self.pos;
        io.stats.bytes_read += want as u64;
        io.throttle.spend(want as u64, io.stop);
        Ok(0)
    }
}

/// A cleaned segment's data file, written a buffer at a time.
struct Output {
    file: Arc<dyn StorageFile>,
    path: PathBuf,
    buf: Vec<u8>,
    /// The file position of `buf[0]`.
    buf_pos: u64,
}

impl Output {
    /// Adds one batch; returns its position in the file.
    fn push(&mut self, batch: &[u8], io: &mut Io) -> Result<u64> {
        let at = self.buf_pos + self.buf.len() as u64;
        self.buf.extend_from_slice(batch);
        if self.buf.len() >= io.limits.io_buffer_bytes {
            self.write(io)?;
        }
        Ok(at)
    }

    fn write(&mut self, io: &mut Io) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.file
            .write_all_at(&self.buf, self.buf_pos)
            .ctx("write", &self.path)?;
        io.stats.bytes_written += self.buf.len() as u64;
        io.throttle.spend(self.buf.len() as u64, io.stop);
        self.buf_pos += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Writes what is left and syncs the file; returns its length.
    fn finish(mut self, io: &mut Io) -> Result<u64> {
        self.write(io)?;
        self.file.sync_data().ctx("fdatasync", &self.path)?;
        let len = self.file.len().ctx("stat", &self.path)?;
        assert_eq!(
            len, self.buf_pos,
            "the cleaned file holds exactly what was written"
        );
        Ok(len)
    }
}

/// Runs one pass over the part of `log` that `cleanable` describes. Returns `None` if
/// `stop` was set before it finished (what it had swapped in stays, and is sound).
pub fn clean(
    log: &Log,
    cleanable: Cleanable,
    limits: &PassLimits,
    throttle: &mut Throttle,
    now_ms: i64,
    stop: &AtomicBool,
) -> Result<Option<PassStats>> {
    let started = Instant::now();
    let mut io = Io {
        limits,
        throttle,
        stop,
        stats: PassStats {
            first_dirty: cleanable.first_dirty,
            segments_before: cleanable.segments.len(),
            delete_horizon_ms: i64::MAX,
            ..Default::default()
        },
        since_yield_bytes: 0,
    };
    let first_dirty = cleanable.first_dirty;
    let txns = Txns::new(log.aborted_txns(log.log_start(), cleanable.end));
    let mut map = OffsetMap::with_memory(limits.dedupe_buffer_bytes);
    let mut map_end = cleanable.end;
    'map: for seg in cleanable
        .segments
        .iter()
        .filter(|s| s.next_offset() > first_dirty)
    {
        let mut batches = SegmentBatches::new(seg);
        while let Some((_, range)) = batches.next(&mut io)? {
            if io.stopped() {
                return Ok(None);
            }
            let batch = &batches.buf[range];
            let header = BatchHeader::parse(batch)?;
            // Markers have no key to keep; aborted records never count as a key's newest.
            if header.last_offset() < first_dirty.0 || header.is_control() || txns.aborted(&header) {
                continue;
            }
            for record in decode_records(batch, DECOMPRESSED_BYTES_MAX)? {
                let offset = header.base_offset + record.offset_delta as i64;
                let Some(key) = record.key.as_deref().filter(|_| offset >= first_dirty.0) else {
                    continue;
                };
                if !map.put(key, offset) {
                    map_end = Offset(offset);
                    break 'map;
                }
            }
        }
    }
    assert!(map_end > first_dirty || cleanable.dirty_bytes == 0);

    let to_clean: Vec<Arc<Segment>> = cleanable
        .segments
        .iter()
        .filter(|s| s.base < map_end)
        .cloned()
        .collect();
    let segment_bytes = log.config().segment_bytes;
    let delete_retention_ms = log.config().delete_retention_ms;
    let mut swapped = 0;
    let mut ends = TxnEnds::default();
    for group in groups(&to_clean, segment_bytes) {
        let pass = Pass {
            map: &map,
            map_end,
            now_ms,
            delete_retention_ms,
            txns: &txns,
        };
        if clean_group(log, group, &pass, &mut ends, &mut io)? {
            swapped += group.len() - 1;
        }
        if io.stopped() {
            return Ok(None);
        }
    }
    checkpoint::write(log.storage().as_ref(), log.dir(), map_end)?;
    // Every segment below the end was read, so this is every horizon there is.
    log.set_delete_horizon_ms(io.stats.delete_horizon_ms);
    io.stats.end = map_end;
    io.stats.segments_after = io.stats.segments_before - swapped;
    io.stats.elapsed = started.elapsed();
    Ok(Some(io.stats))
}

/// Consecutive segments whose bytes together fit one segment, and whose offsets fit one
/// segment's 32-bit relative offsets.
fn groups(segments: &[Arc<Segment>], segment_bytes: u64) -> Vec<&[Arc<Segment>]> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < segments.len() {
        let base = segments[start].base;
        let mut bytes = segments[start].end_pos().0;
        let mut end = start + 1;
        while end < segments.len()
            && bytes + segments[end].end_pos().0 <= segment_bytes
            && segments[end].next_offset().0 - base.0 <= u32::MAX as i64
        {
            bytes += segments[end].end_pos().0;
            end += 1;
        }
        out.push(&segments[start..end]);
        start = end;
    }
    out
}

/// Rewrites one group into one segment and swaps it in. Returns whether it did: a group in
/// which no batch changes is left as it is.
fn clean_group(
    log: &Log,
    group: &[Arc<Segment>],
    pass: &Pass,
    ends: &mut TxnEnds,
    io: &mut Io,
) -> Result<bool> {
    let Pass {
        map,
        map_end,
        now_ms,
        delete_retention_ms,
        txns,
    } = *pass;
    let storage = log.storage().clone();
    let base = group[0].base;
    let path = log.dir().join(segment::file_name(base, CLEANED_SUFFIX));
    match storage.remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(StorageError::io("remove", &path, e)),
    }
    let file = storage.open(&path, true).ctx("create", &path)?;
    let cleaned = Segment::with_file(log.dir(), base, file.clone(), group[0].created_ms);
    let mut out = Output {
        file,
        path: path.clone(),
        buf: Vec::new(),
        buf_pos: 0,
    };
    let interval = log.config().index_interval_bytes;
    let horizon = now_ms.saturating_add(delete_retention_ms);
    let (mut changed, mut next) = (false, base);
    // The markers this group keeps: their aborted-transaction entries stay in its index.
    let mut kept_markers = std::collections::HashSet::new();
    let abandon = |storage: &dyn crate::backend::Storage| storage.remove_file(&path).ctx("remove", &path);
    for (i, old) in group.iter().enumerate() {
        let last_segment = i == group.len() - 1;
        let mut batches = SegmentBatches::new(old);
        while let Some((pos, range)) = batches.next(io)? {
            if io.stopped() {
                abandon(storage.as_ref())?;
                return Ok(false);
            }
            let batch = &batches.buf[range];
            let header = BatchHeader::parse(batch)?;
            let last = last_segment && pos + batch.len() as u64 == old.end_pos().0;
            let tombstones_expired =
                header.attributes & DELETE_HORIZON_FLAG != 0 && now_ms >= header.base_timestamp;
            // Whether the batch keeps a tombstone: only those keep a pass due at their horizon.
            let mut keeps_tombstone = false;
            let filtered = if header.is_control() {
                let (filtered, keeps_horizon) = ends.marker(batch, &header, last, now_ms, horizon);
                keeps_tombstone = keeps_horizon;
                filtered
            } else if txns.aborted(&header) {
                // An aborted transaction's records: read_committed readers drop them, and
                // read_uncommitted ones may too once compacted (as Kafka's cleaner does).
                if last {
                    filter_batch(batch, DECOMPRESSED_BYTES_MAX, None, true, |_, _| false)?
                } else {
                    Filtered::Removed
                }
            } else if header.records_count == 0 {
                // Kept by an earlier pass as its group's last batch.
                if last {
                    Filtered::Unchanged
                } else {
                    Filtered::Removed
                }
            } else {
                filter_batch(batch, DECOMPRESSED_BYTES_MAX, Some(horizon), last, |offset, r| {
                    let keep = offset >= map_end.0
                        || r.key.as_deref().is_some_and(|key| {
                            // A compacted log has no place for a record without a key.
                            let newest = map.get(key).is_none_or(|m| offset >= m);
                            newest && !(r.value.is_none() && tombstones_expired)
                        });
                    keeps_tombstone |= keep && r.value.is_none();
                    keep
                })?
            };
            let kept: &[u8] = match &filtered {
                Filtered::Unchanged => batch,
                Filtered::Rewritten(b) => b,
                Filtered::Removed => {
                    changed = true;
                    io.stats.records_removed += header.records_count as u64;
                    continue;
                }
            };
            let kept_header = BatchHeader::parse(kept)?;
            if keeps_tombstone && kept_header.attributes & DELETE_HORIZON_FLAG != 0 {
                io.stats.delete_horizon_ms = io.stats.delete_horizon_ms.min(kept_header.base_timestamp);
            }
            if let Filtered::Rewritten(_) = filtered {
                changed = true;
                io.stats.records_removed += (header.records_count - kept_header.records_count) as u64;
            }
            if kept_header.is_transactional() && !kept_header.is_control() && kept_header.records_count > 0 {
                ends.kept_records(kept_header.producer_id);
            }
            if kept_header.is_control() {
                kept_markers.insert(kept_header.base_offset);
            }
            debug_assert_eq!(kept_header.base_offset, header.base_offset);
            debug_assert!(kept_header.base_offset >= next.0, "offsets only grow");
            let at = out.push(kept, io)?;
            cleaned.indexes.lock().unwrap().on_batch(
                cleaned.relative(Offset(kept_header.base_offset)),
                u32::try_from(at).expect("a group fits one segment"),
                kept.len() as u64,
                kept_header.max_timestamp,
                interval,
            );
            next = Offset(kept_header.next_offset());
        }
    }
    if !changed {
        abandon(storage.as_ref())?;
        return Ok(false);
    }
    let len = out.finish(io)?;
    assert_eq!(
        next,
        group.last().unwrap().next_offset(),
        "the group's last batch was kept"
    );
    cleaned.set_end(FilePos(len), next);
    cleaned.seal();
    let aborted: Vec<AbortedTxn> = group
        .iter()
        .flat_map(|s| s.txns.lock().unwrap().entries.clone())
        .filter(|e| kept_markers.contains(&e.last_offset.0))
        .collect();
    log.swap_cleaned(group, Arc::new(cleaned), &path, aborted)
}

/// What one pass cleans with.
#[derive(Clone, Copy)]
struct Pass<'a> {
    map: &'a OffsetMap,
    map_end: Offset,
    now_ms: i64,
    delete_retention_ms: i64,
    txns: &'a Txns,
}

/// The aborted transactions of the part of the log being cleaned, by producer.
struct Txns {
    aborted: std::collections::HashMap<i64, Vec<(i64, i64)>>,
}

impl Txns {
    fn new(entries: Vec<AbortedTxn>) -> Txns {
        let mut aborted: std::collections::HashMap<i64, Vec<(i64, i64)>> = Default::default();
        for e in entries {
            aborted
                .entry(e.producer_id)
                .or_default()
                .push((e.first_offset.0, e.last_offset.0));
        }
        Txns { aborted }
    }

    /// Is this a data batch of an aborted transaction?
    fn aborted(&self, h: &BatchHeader) -> bool {
        h.is_transactional()
            && !h.is_control()
            && self.aborted.get(&h.producer_id).is_some_and(|ranges| {
                ranges
                    .iter()
                    .any(|(first, last)| *first <= h.base_offset && h.base_offset < *last)
            })
    }
}

/// Which producers' transactions still have records, followed through the batches of a pass
/// in offset order: a transaction's records come before its marker. A marker whose
/// transaction has no records left is given a delete horizon, and removed once it passed.
#[derive(Default)]
struct TxnEnds {
    with_records: std::collections::HashSet<i64>,
}

impl TxnEnds {
    fn kept_records(&mut self, producer_id: i64) {
        self.with_records.insert(producer_id);
    }

    /// What becomes of a marker; and whether it keeps a delete horizon (a pass is due then).
    fn marker(
        &mut self,
        batch: &[u8],
        h: &BatchHeader,
        last: bool,
        now_ms: i64,
        horizon_ms: i64,
    ) -> (Filtered, bool) {
        let has_records = self.with_records.remove(&h.producer_id);
        if has_records || last {
            return (Filtered::Unchanged, false);
        }
        if h.attributes & DELETE_HORIZON_FLAG == 0 {
            return (Filtered::Rewritten(with_delete_horizon(batch, horizon_ms)), true);
        }
        if now_ms >= h.base_timestamp {
            (Filtered::Removed, false)
        } else {
            (Filtered::Unchanged, true)
        }
    }
}
