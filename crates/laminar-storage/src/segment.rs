//! One segment: a data file of record batches, its offset index and its time index.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use laminar_records::{BatchHeader, BATCH_HEADER_BYTES};

use crate::backend::{read_exact_at, Storage, StorageFile};
use crate::error::{IoContext, Result};
use crate::index::{encode_entries, Index, OffsetEntry, TimeEntry};
use crate::types::{FilePos, Offset};

pub const DATA_SUFFIX: &str = ".log";
pub const INDEX_SUFFIX: &str = ".index";
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";
/// A cleaning pass's output while it is written: removed by recovery.
pub const CLEANED_SUFFIX: &str = ".log.cleaned";
/// A cleaning pass's output once committed: recovery finishes its swap.
pub const SWAP_SUFFIX: &str = ".log.swap";
/// A data file created (and allocated) ahead of a roll, under a name of its own until the
/// flusher renames it to its base offset's: see `Log::roll`. Recovery adopts one that
/// holds batches and removes one that does not.
pub const PREPARED_SUFFIX: &str = ".prepared";

/// Segment file names are the base offset in 20 digits, as Kafka names them, so that a
/// directory listing sorts in offset order.
pub fn file_name(base: Offset, suffix: &str) -> String {
    format!("{:020}{suffix}", base.0)
}

pub fn parse_file_name(name: &str, suffix: &str) -> Option<Offset> {
    let digits = name.strip_suffix(suffix)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<i64>().ok().map(Offset)
}

#[derive(Debug, Default)]
pub struct SegmentIndexes {
    pub offsets: Index<OffsetEntry>,
    pub times: Index<TimeEntry>,
    /// Data bytes appended since the last offset-index entry.
    pub bytes_since_entry: u64,
    /// The largest timestamp so far, and the relative offset of the batch that holds it.
    pub max_timestamp_ms: i64,
    pub max_timestamp_relative_offset: u32,
}

impl SegmentIndexes {
    /// Accounts for one batch at `position`, adding index entries every
    /// `index_interval_bytes`. Entries always point at the start of a batch.
    pub fn on_batch(
        &mut self,
        relative_offset: u32,
        position: u32,
        bytes: u64,
        max_timestamp_ms: i64,
        index_interval_bytes: u64,
    ) {
        if max_timestamp_ms > self.max_timestamp_ms {
            self.max_timestamp_ms = max_timestamp_ms;
            self.max_timestamp_relative_offset = relative_offset;
        }
        if position > 0 && self.bytes_since_entry >= index_interval_bytes {
            if self.offsets.push(OffsetEntry {
                relative_offset,
                position,
            }) {
                self.bytes_since_entry = 0;
            }
            self.add_time_entry();
        }
        self.bytes_since_entry += bytes;
    }

    /// Records the current maximum in the time index if it has grown since the last entry.
    pub fn add_time_entry(&mut self) {
        if self.max_timestamp_ms != i64::MIN {
            self.times.push(TimeEntry {
                timestamp_ms: self.max_timestamp_ms,
                relative_offset: self.max_timestamp_relative_offset,
            });
        }
    }
}

#[derive(Debug)]
pub struct Segment {
    pub base: Offset,
    pub data_path: PathBuf,
    pub index_path: PathBuf,
    pub time_index_path: PathBuf,
    pub txn_index_path: PathBuf,
    pub file: Arc<dyn StorageFile>,
    /// Exclusive end of the valid data. Bytes after it are preallocated zeros or garbage.
    end_pos: AtomicU64,
    /// The offset after the last batch.
    next_offset: AtomicI64,
    pub created_ms: i64,
    pub indexes: Mutex<SegmentIndexes>,
    /// The transactions aborted by a marker in this segment (see `crate::txn`).
    pub txns: Mutex<crate::txn::TxnIndex>,
    /// No more appends: the file is trimmed and its indexes are final.
    sealed: AtomicBool,
    /// Sealed, and its index files are written and synced.
    indexes_durable: AtomicBool,
    /// The name the data file still has, if it was prepared under a temporary one and not
    /// yet renamed to `data_path`. Taken by whoever renames or removes the file.
    pending_name: Mutex<Option<PathBuf>>,
    /// Sealed with preallocated bytes past its end, which the flusher trims.
    untrimmed: AtomicBool,
    /// Which of its bytes this process has checked against their batches' CRCs.
    checked: Mutex<Checked>,
}

/// What a segment's reader may send without checking it again. A CRC covers a batch from
/// its attributes on; `Segment::check` also checks what it leaves out (offsets, length,
/// magic) against the batches around it.
#[derive(Debug, Default)]
struct Checked {
    /// Bytes below this were on disk when this process opened the segment, and recovery
    /// trusted them to the checkpoint without reading them; bytes from here on were
    /// appended by this process or validated by recovery.
    unchecked_end: u64,
    /// Spans below `unchecked_end` checked since, start to end, each from one batch's start
    /// to another's.
    spans: BTreeMap<u64, u64>,
    /// The first batch found damaged here.
    damage: Option<Damage>,
}

/// A batch whose bytes on disk are not what was written: a CRC that does not match, or a
/// length or offsets that do not fit the batches around it.
#[derive(Debug, Clone)]
pub struct Damage {
    /// Where the batch starts in the data file.
    pub position: u64,
    /// The offset it should start at (after the last sound batch before it, or the
    /// segment's base).
    pub offset: Offset,
    pub reason: String,
}

/// Bytes read at once by `Segment::check`.
const CHECK_READ_BYTES: usize = 1 << 20;

impl Segment {
    pub fn new(
        storage: &dyn Storage,
        dir: &Path,
        base: Offset,
        create: bool,
        created_ms: i64,
    ) -> Result<Segment> {
        let data_path = dir.join(file_name(base, DATA_SUFFIX));
        let file = storage.open(&data_path, create).ctx("open", &data_path)?;
        Ok(Segment::with_file(dir, base, file, created_ms))
    }

    /// A segment over an open `file` (a cleaning pass's output), to be found at
    /// `dir/<base>.log` once swapped in.
    pub(crate) fn with_file(
        dir: &Path,
        base: Offset,
        file: Arc<dyn StorageFile>,
        created_ms: i64,
    ) -> Segment {
        Segment {
            base,
            index_path: dir.join(file_name(base, INDEX_SUFFIX)),
            time_index_path: dir.join(file_name(base, TIME_INDEX_SUFFIX)),
            txn_index_path: crate::txn::txn_index_path(dir, base),
            data_path: dir.join(file_name(base, DATA_SUFFIX)),
            file,
            end_pos: AtomicU64::new(0),
            next_offset: AtomicI64::new(base.0),
            created_ms,
            indexes: Mutex::new(SegmentIndexes {
                max_timestamp_ms: i64::MIN,
                ..Default::default()
            }),
            txns: Mutex::new(Default::default()),
            sealed: AtomicBool::new(false),
            indexes_durable: AtomicBool::new(false),
            pending_name: Mutex::new(None),
            untrimmed: AtomicBool::new(false),
            checked: Mutex::new(Checked::default()),
        }
    }

    /// Says that bytes below `end` were trusted without being read (recovery, from the
    /// checkpoint): [`Segment::check`] reads them before they are sent.
    pub(crate) fn set_unchecked_below(&self, end: u64) {
        self.checked.lock().unwrap().unchecked_end = end;
    }

    /// The first batch found damaged in this segment, if one was.
    pub fn damage(&self) -> Option<Damage> {
        self.checked.lock().unwrap().damage.clone()
    }

    /// Checks `[from, to)` (from a batch's start to another's, inside the segment's end)
    /// before it is sent: every batch this process has not checked yet is read and its CRC,
    /// length and offsets checked. Returns `None` when all of it is sound, else the first
    /// damaged batch, which is remembered. Reads the disk: on an I/O or storage thread.
    /// (What was checked is not checked again: a byte that changes on the disk after its
    /// check is found only if the page cache has dropped it and it is read again through a
    /// later process.)
    pub fn check(&self, from: u64, to: u64, compacted: bool) -> Result<Option<Damage>> {
        debug_assert!(from <= to && to <= self.end_pos().0);
        let (gaps, known) = {
            let c = self.checked.lock().unwrap();
            let known = c.damage.clone().filter(|d| (from..to).contains(&d.position));
            let upto = known.as_ref().map_or(to, |d| d.position).min(c.unchecked_end);
            (c.gaps(from, upto), known)
        };
        for (start, end) in gaps {
            // From the index entry at or before the gap (an entry has a checksum of its own),
            // so that the first batch's offset is checked too.
            let (walk_from, first) = {
                let idx = self.indexes.lock().unwrap();
                match idx.offsets.floor_by_position(start.min(u32::MAX as u64) as u32) {
                    Some(e) => (e.position as u64, Offset(self.base.0 + e.relative_offset as i64)),
                    None => (0, self.base),
                }
            };
            let mut walked = self.check_span(walk_from, end, first, true, compacted)?;
            self.checked.lock().unwrap().add_span(walk_from, walked.sound_to);
            if let Some(d) = walked.damage.take_if(|d| d.position < start) {
                // Damage before the gap, in a batch this read does not send: the gap is
                // checked from its own start, whose batch starts past the damaged one.
                self.found(&d);
                let lowest = Offset(d.offset.0 + 1);
                walked = self.check_span(start, end, lowest, false, compacted)?;
                self.checked.lock().unwrap().add_span(start, walked.sound_to);
            }
            if let Some(d) = walked.damage {
                self.found(&d);
                return Ok(Some(d));
            }
        }
        Ok(known)
    }

    /// Counts, logs and remembers a damaged batch.
    pub(crate) fn found(&self, d: &Damage) {
        crate::metrics::DAMAGED_BATCHES_FOUND.fetch_add(1, Ordering::Relaxed);
        laminar_metrics::warn!(
            "{}: damaged batch at position {} (offset {}): {}; it is not served",
            self.data_path.display(),
            d.position,
            d.offset,
            d.reason
        );
        let mut c = self.checked.lock().unwrap();
        if c.damage.as_ref().is_none_or(|old| d.position < old.position) {
            c.damage = Some(d.clone());
        }
    }

    /// Reads `[start, end)` batch by batch and checks each; the batch at `start` holds
    /// offset `first` if `exact` (and the log is not compacted), else starts at or after it.
    fn check_span(
        &self,
        start: u64,
        end: u64,
        first: Offset,
        exact: bool,
        compacted: bool,
    ) -> Result<Walked> {
        let mut buf: Vec<u8> = Vec::new();
        let mut buf_pos = start;
        let mut pos = start;
        // The offset the next batch starts at (or, compacted, its lowest).
        let mut next = first;
        let damaged = |pos: u64, next: Offset, reason: String| Walked {
            sound_to: pos,
            damage: Some(Damage {
                position: pos,
                offset: next,
                reason,
            }),
        };
        while pos < end {
            let have = buf_pos + buf.len() as u64;
            if pos + BATCH_HEADER_BYTES as u64 > have {
                let want = (CHECK_READ_BYTES as u64).min(end - pos) as usize;
                if want < BATCH_HEADER_BYTES {
                    return Ok(damaged(
                        pos,
                        next,
                        format!("{want} bytes left, too few for a batch"),
                    ));
                }
                buf.resize(want, 0);
                read_exact_at(self.file.as_ref(), &mut buf, pos).ctx("read", &self.data_path)?;
                buf_pos = pos;
            }
            let at = (pos - buf_pos) as usize;
            let total = laminar_records::peek_total_bytes(&buf[at..]).unwrap_or(0);
            if total < BATCH_HEADER_BYTES as i64 || pos + total as u64 > end {
                return Ok(damaged(
                    pos,
                    next,
                    format!("a batch length of {total} bytes does not fit"),
                ));
            }
            let total = total as usize;
            if at + total > buf.len() {
                let want = ((CHECK_READ_BYTES as u64).min(end - pos) as usize).max(total);
                buf.resize(want, 0);
                read_exact_at(self.file.as_ref(), &mut buf, pos).ctx("read", &self.data_path)?;
                buf_pos = pos;
            }
            let at = (pos - buf_pos) as usize;
            let h = match laminar_records::validate_stored_batch(&buf[at..at + total]) {
                Ok(h) => h,
                Err(e) => return Ok(damaged(pos, next, e.to_string())),
            };
            let base = Offset(h.base_offset);
            let lower_bound = compacted || (!exact && pos == start);
            let fits =
                (base == next || lower_bound && base > next) && h.next_offset() <= self.next_offset().0;
            if !fits {
                return Ok(damaged(
                    pos,
                    next,
                    format!("base offset {base} does not follow the batches before it"),
                ));
            }
            pos += total as u64;
            next = Offset(h.next_offset());
        }
        Ok(Walked {
            sound_to: pos,
            damage: None,
        })
    }

    /// A segment over a file prepared ahead under the temporary name `temp_path`, which
    /// [`Segment::finish_name`] later renames to `dir/<base>.log`.
    pub(crate) fn prepared(
        dir: &Path,
        base: Offset,
        file: Arc<dyn StorageFile>,
        temp_path: PathBuf,
        created_ms: i64,
    ) -> Segment {
        let seg = Segment::with_file(dir, base, file, created_ms);
        *seg.pending_name.lock().unwrap() = Some(temp_path);
        seg
    }

    /// Whether the data file still has its temporary name.
    pub fn name_pending(&self) -> bool {
        self.pending_name.lock().unwrap().is_some()
    }

    /// Renames a prepared data file to `data_path`; returns whether it did (the directory
    /// then needs a sync). Runs on the flusher, never on the append path.
    pub(crate) fn finish_name(&self, storage: &dyn Storage) -> Result<bool> {
        let mut pending = self.pending_name.lock().unwrap();
        let Some(temp) = pending.as_ref() else {
            return Ok(false);
        };
        storage.rename(temp, &self.data_path).ctx("rename", temp)?;
        *pending = None;
        Ok(true)
    }

    /// Removes the segment's files, its data file under whichever name it has. Files that
    /// are already gone are not an error. The caller syncs the directory.
    pub(crate) fn remove_files(&self, storage: &dyn Storage) -> Result<()> {
        let mut pending = self.pending_name.lock().unwrap();
        let data = pending.clone().unwrap_or_else(|| self.data_path.clone());
        for path in [
            &data,
            &self.index_path,
            &self.time_index_path,
            &self.txn_index_path,
        ] {
            match storage.remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(crate::StorageError::io("remove", path, e)),
            }
        }
        *pending = None;
        Ok(())
    }

    /// Marks a sealed segment as having preallocated bytes past its end.
    pub(crate) fn mark_untrimmed(&self) {
        self.untrimmed.store(true, Ordering::Release);
    }

    /// Cuts the preallocated bytes past the end of a sealed segment, if it has any; returns
    /// whether it did. Recovery must not meet them in a segment that has a successor
    /// (see `recover`), so the flusher does this before it syncs the segment.
    pub(crate) fn trim(&self) -> Result<bool> {
        if !self.untrimmed.load(Ordering::Acquire) {
            return Ok(false);
        }
        debug_assert!(self.is_sealed(), "only a sealed segment is trimmed");
        self.file
            .set_len(self.end_pos().0)
            .ctx("truncate", &self.data_path)?;
        self.untrimmed.store(false, Ordering::Release);
        Ok(true)
    }

    pub fn end_pos(&self) -> FilePos {
        FilePos(self.end_pos.load(Ordering::Acquire))
    }

    pub fn next_offset(&self) -> Offset {
        Offset(self.next_offset.load(Ordering::Acquire))
    }

    pub fn max_timestamp_ms(&self) -> i64 {
        self.indexes.lock().unwrap().max_timestamp_ms
    }

    /// Publishes a new end. Called with the log's view lock held for writing, so that readers
    /// see the end position and the end offset change together.
    pub(crate) fn set_end(&self, pos: FilePos, next: Offset) {
        self.next_offset.store(next.0, Ordering::Release);
        self.end_pos.store(pos.0, Ordering::Release);
    }

    pub fn is_empty(&self) -> bool {
        self.end_pos().0 == 0
    }

    pub fn is_sealed(&self) -> bool {
        self.sealed.load(Ordering::Acquire)
    }

    pub(crate) fn seal(&self) {
        self.indexes.lock().unwrap().add_time_entry();
        self.sealed.store(true, Ordering::Release);
    }

    pub fn has_unpersisted_indexes(&self) -> bool {
        let idx = self.indexes.lock().unwrap();
        idx.offsets.persisted < idx.offsets.entries.len() || idx.times.persisted < idx.times.entries.len()
    }

    pub(crate) fn mark_indexes_durable(&self) {
        self.indexes_durable.store(true, Ordering::Release);
    }

    pub fn indexes_durable(&self) -> bool {
        self.indexes_durable.load(Ordering::Acquire)
    }

    pub fn relative(&self, offset: Offset) -> u32 {
        debug_assert!(offset >= self.base && offset.0 - self.base.0 <= u32::MAX as i64);
        (offset.0 - self.base.0) as u32
    }

    /// Writes index entries that are not yet in the index files; with `sync`, fsyncs them.
    /// A sealed segment whose indexes were synced is marked durable.
    pub fn persist_indexes(&self, storage: &dyn Storage, sync: bool) -> Result<()> {
        let sealed = self.is_sealed();
        let (off_at, offs, time_at, times, n_off, n_time) = {
            let idx = self.indexes.lock().unwrap();
            let (a, b) = idx.offsets.unpersisted();
            let (c, d) = idx.times.unpersisted();
            (a, b, c, d, idx.offsets.entries.len(), idx.times.entries.len())
        };
        let (off_bytes, time_bytes) = (encode_entries(&offs), encode_entries(&times));
        write_index(storage, &self.index_path, off_at, &off_bytes, sync)?;
        write_index(storage, &self.time_index_path, time_at, &time_bytes, sync)?;
        {
            let mut idx = self.indexes.lock().unwrap();
            idx.offsets.persisted = idx.offsets.persisted.max(n_off.min(idx.offsets.entries.len()));
            idx.times.persisted = idx.times.persisted.max(n_time.min(idx.times.entries.len()));
        }
        if sealed && sync {
            self.indexes_durable.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Reads the fixed header of the batch at `pos`, which must end at or before `end`.
    pub fn read_header(&self, pos: u64, end: u64) -> Result<Option<BatchHeader>> {
        if pos + BATCH_HEADER_BYTES as u64 > end {
            return Ok(None);
        }
        let mut buf = [0u8; BATCH_HEADER_BYTES];
        read_exact_at(self.file.as_ref(), &mut buf, pos).ctx("read", &self.data_path)?;
        let header = BatchHeader::parse(&buf).expect("buffer holds a whole header");
        // The log wrote this batch itself: a header that disagrees with the file is a bug or
        // a disk that lies, not bad input.
        if header.batch_length < (BATCH_HEADER_BYTES - laminar_records::LOG_OVERHEAD_BYTES) as i32
            || pos + header.total_bytes() as u64 > end
        {
            return Err(crate::StorageError::Corrupt {
                what: "batch header",
                path: self.data_path.clone(),
                reason: format!(
                    "batch at {pos} claims {} bytes; segment ends at {end}",
                    header.batch_length
                ),
            });
        }
        Ok(Some(header))
    }
}

/// What `Segment::check_span` found.
struct Walked {
    /// Where the sound batches it read end.
    sound_to: u64,
    damage: Option<Damage>,
}

impl Checked {
    /// The parts of `[from, to)` not checked yet.
    fn gaps(&self, from: u64, to: u64) -> Vec<(u64, u64)> {
        let mut gaps = Vec::new();
        if from >= to {
            return gaps;
        }
        let mut at = from;
        // A span that starts before `from` may cover it.
        if let Some((_, e)) = self.spans.range(..=from).next_back() {
            at = at.max(*e);
        }
        for (s, e) in self.spans.range(from..to) {
            if *s > at {
                gaps.push((at, *s));
            }
            at = at.max(*e);
        }
        if at < to {
            gaps.push((at, to));
        }
        gaps
    }

    /// Adds `[start, end)`, merged with the spans it touches.
    fn add_span(&mut self, mut start: u64, mut end: u64) {
        if start >= end {
            return;
        }
        if let Some((s, e)) = self.spans.range(..=start).next_back().map(|(s, e)| (*s, *e)) {
            if e >= start {
                start = s;
                end = end.max(e);
                self.spans.remove(&s);
            }
        }
        let touching: Vec<(u64, u64)> = self.spans.range(start..=end).map(|(s, e)| (*s, *e)).collect();
        for (s, e) in touching {
            end = end.max(e);
            self.spans.remove(&s);
        }
        self.spans.insert(start, end);
    }
}

fn write_index(storage: &dyn Storage, path: &Path, at: u64, bytes: &[u8], sync: bool) -> Result<()> {
    let file = storage.open(path, true).ctx("open", path)?;
    if !bytes.is_empty() {
        file.write_all_at(bytes, at).ctx("write", path)?;
    }
    let end = at + bytes.len() as u64;
    if file.len().ctx("stat", path)? != end {
        file.set_len(end).ctx("truncate", path)?;
    }
    if sync {
        file.sync_data().ctx("fdatasync", path)?;
    }
    Ok(())
}
