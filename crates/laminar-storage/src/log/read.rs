//! Reads: the batches to send for a fetch, and lookups by offset and by timestamp.

use crate::backend::read_exact_at;
use crate::error::{IoContext, Result, StorageError};
use crate::segment::{Damage, Segment};
use crate::types::{FilePos, Offset};
use laminar_records::{validate_stored_batch, BatchHeader, Compression, RecordIter, BATCH_HEADER_BYTES};
use std::sync::Arc;
use std::time::Instant;

use super::{FileRange, Log, LogRead};

/// Record bodies decoded for a timestamp lookup are bounded by this.
const TIMESTAMP_LOOKUP_DECOMPRESSED_BYTES_MAX: usize = 256 << 20;
/// Segments one read looks through for a batch that holds records (see `Log::read`).
const READ_SEGMENTS_MAX: usize = 16;

/// The error a read gets for a damaged batch (a client gets KAFKA_STORAGE_ERROR).
fn damaged(seg: &Segment, d: &Damage) -> StorageError {
    StorageError::Corrupt {
        what: "batch",
        path: seg.data_path.clone(),
        reason: format!(
            "damaged at position {} (offset {}): {}",
            d.position, d.offset, d.reason
        ),
    }
}

impl Log {
    /// The start of a batch roughly `bytes_back` bytes before the log's end, across
    /// segments unless the log is compacted (or the first segment's start), never below the
    /// log start: where a scan of the log's recent history can begin (a new leader's rebuild
    /// of its producers' state). (DeleteRecords moves the log start into a segment, past its base;
    /// a read from below the log start is out of range.)
    pub fn recent_offset(&self, bytes_back: u64) -> Offset {
        // Back across segments, not only in the active one: a producer's last batches may
        // sit in the segment before a roll that happened just now. Not in a compacted log:
        // the cleaner may have removed a producer's last batches from a sealed segment (it
        // does not keep them, as Kafka's does), and an older batch there would set the
        // producer's sequence back (OUT_OF_ORDER_SEQUENCE_NUMBER for its next batch, where
        // no state gives UNKNOWN_PRODUCER_ID, which it recovers from).
        let compacted = self.config().cleanup_compact;
        let (segment, back, log_start) = {
            let view = self.view.read().unwrap();
            let mut back = bytes_back;
            let mut at = view.segments.len() - 1;
            while !compacted && at > 0 && back > view.segments[at].end_pos().0 {
                back -= view.segments[at].end_pos().0;
                at -= 1;
            }
            (view.segments[at].clone(), back, view.log_start)
        };
        let target = segment.end_pos().0.saturating_sub(back).min(u32::MAX as u64) as u32;
        let idx = segment.indexes.lock().unwrap();
        idx.offsets
            .floor_by_position(target)
            .map_or(segment.base, |e| {
                Offset(segment.base.0 + e.relative_offset as i64)
            })
            .max(log_start)
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
            // A damaged batch's offsets are not believed: a read from past where it starts
            // steps over it by its length, and fails if the next batch starts past `start`
            // (which the damaged batch then holds).
            let damage = seg.damage().filter(|d| start > d.offset);
            let mut stepped_over = None;
            let first = loop {
                let Some(h) = seg.read_header(pos, end_pos)? else {
                    break None;
                };
                if let Some(d) = damage.as_ref().filter(|d| d.position == pos) {
                    stepped_over = Some(d.clone());
                    pos += h.total_bytes() as u64;
                    continue;
                }
                if let Some(d) = stepped_over.take().filter(|_| Offset(h.base_offset) > start) {
                    return Err(damaged(seg, &d));
                }
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
                // Its offsets decide what is read: checked before they are believed.
                let compacted = self.config().cleanup_compact;
                if let Some(damage) = seg.check(pos, pos + first.total_bytes() as u64, compacted)? {
                    return Err(damaged(seg, &damage));
                }
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
            // A header that does not fit (damaged) ends the range before it: a read that
            // starts there gets the error.
            let Ok(Some(h)) = seg.read_header(end, end_pos) else {
                break;
            };
            if end + h.total_bytes() as u64 > limit || h.base_offset >= upper.0 {
                break;
            }
            end += h.total_bytes() as u64;
            next = Offset(h.next_offset());
        }
        // Nothing is sent that this process has not checked: what recovery trusted to the
        // checkpoint is read and checked here the first time (on this I/O thread, which
        // may wait for the disk). A damaged batch ends the range before it, or fails the
        // read when the range starts with it.
        if let Some(damage) = seg.check(pos, end, self.config().cleanup_compact)? {
            if damage.position == pos {
                return Err(damaged(seg, &damage));
            }
            return self.range_from(seg, pos, first, damage.position - pos, false, upper);
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

    /// Where reading can go on after the damaged batch that a read from `at` met (it failed
    /// with `Corrupt`): the first sound batch after it, if the damaged batch's length still
    /// leads there (or to its segment's end, where the next segment begins). For a reader of
    /// the log's history (a new leader's producer-state rebuild) that passes over it.
    pub fn past_damage(&self, at: Offset) -> Result<Option<Offset>> {
        let segments = self.view.read().unwrap().segments.clone();
        let i = segments.partition_point(|s| s.base <= at).saturating_sub(1);
        for (j, seg) in segments.iter().enumerate().skip(i) {
            let Some(d) = seg.damage() else { continue };
            let end_pos = seg.end_pos().0;
            let Ok(Some(h)) = seg.read_header(d.position, end_pos) else {
                return Ok(None);
            };
            let after = d.position + h.total_bytes() as u64;
            if after == end_pos {
                return Ok(segments.get(j + 1).map(|s| s.base));
            }
            let Ok(Some(next)) = seg.read_header(after, end_pos) else {
                return Ok(None);
            };
            let sound = seg
                .check(
                    after,
                    after + next.total_bytes() as u64,
                    self.config().cleanup_compact,
                )?
                .is_none();
            return Ok((sound && Offset(next.base_offset) > at).then_some(Offset(next.base_offset)));
        }
        Ok(None)
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
}
