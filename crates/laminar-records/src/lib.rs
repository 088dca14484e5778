//! Kafka record batches, format v2 (magic 2), the only format Laminar stores.
//!
//! The byte layout (all integers big-endian) is:
//!
//! ```text
//!  0  base_offset            i64   rewritten by the log on append
//!  8  batch_length           i32   bytes after this field
//! 12  partition_leader_epoch i32   rewritten by the log on append
//! 16  magic                  i8    always 2
//! 17  crc                    u32   CRC-32C of bytes 21..end
//! 21  attributes             i16   bits 0-2 compression, 3 timestamp type, 4 transactional, 5 control
//! 23  last_offset_delta      i32
//! 27  base_timestamp         i64
//! 35  max_timestamp          i64
//! 43  producer_id            i64
//! 51  producer_epoch         i16
//! 53  base_sequence          i32
//! 57  records_count          i32
//! 61  records...
//! ```
//!
//! Because the CRC starts at byte 21, the log can assign offsets and the leader epoch without
//! recomputing it. This crate never allocates from a length it has not checked against the
//! bytes that remain.

mod builder;
pub mod clean;
mod compression;
mod record;
mod stream;
mod valid;
pub mod varint;

pub use builder::{control_batch, BatchBuilder, RecordSpec};
pub use compression::{compress, decompress, Compression};
pub use record::{Header, Record, RecordIter};
pub use stream::validate_compressed;
pub use valid::ValidBatches;

/// Bytes before `batch_length` ends: base offset (8) and the length itself (4).
pub const LOG_OVERHEAD_BYTES: usize = 12;
/// The fixed header of a v2 batch, up to the first record.
pub const BATCH_HEADER_BYTES: usize = 61;
/// The only record batch format Laminar accepts (Kafka 4 dropped v0 and v1).
pub const MAGIC_V2: i8 = 2;

pub const BASE_OFFSET_POS: usize = 0;
pub const BATCH_LENGTH_POS: usize = 8;
pub const PARTITION_LEADER_EPOCH_POS: usize = 12;
pub const MAGIC_POS: usize = 16;
pub const CRC_POS: usize = 17;
pub const ATTRIBUTES_POS: usize = 21;
pub const LAST_OFFSET_DELTA_POS: usize = 23;
pub const BASE_TIMESTAMP_POS: usize = 27;
pub const MAX_TIMESTAMP_POS: usize = 35;
pub const PRODUCER_ID_POS: usize = 43;
pub const PRODUCER_EPOCH_POS: usize = 51;
pub const BASE_SEQUENCE_POS: usize = 53;
pub const RECORDS_COUNT_POS: usize = 57;

const ATTR_COMPRESSION_MASK: i16 = 0x07;
const ATTR_TIMESTAMP_TYPE: i16 = 0x08;
pub const ATTR_TRANSACTIONAL: i16 = 0x10;
pub const ATTR_CONTROL: i16 = 0x20;

/// The kind of a control record: the type field of its key. Kafka defines 0 and 1 as the
/// transaction markers; later types (KRaft's) never appear in a partition's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i16)]
pub enum ControlType {
    Abort = 0,
    Commit = 1,
}

/// The marker a control batch holds, read from its first record's key. `None` for a batch
/// that is not a control batch, or a control record of another type. The batch must have
/// been validated (control batches are never compressed).
pub fn control_type(batch: &[u8]) -> Option<ControlType> {
    let h = BatchHeader::parse(batch).ok()?;
    if !h.is_control() || h.records_count < 1 || h.compression().ok()? != Compression::None {
        return None;
    }
    let record = RecordIter::new(&batch[BATCH_HEADER_BYTES..], h.records_count)
        .next()?
        .ok()?;
    let key = record.key?;
    if key.len() < 4 {
        return None;
    }
    match i16::from_be_bytes([key[2], key[3]]) {
        0 => Some(ControlType::Abort),
        1 => Some(ControlType::Commit),
        _ => None,
    }
}

/// The coordinator epoch a transaction marker carries (its value: version, then the epoch),
/// or `None` if `batch` holds no readable marker.
pub fn marker_coordinator_epoch(batch: &[u8]) -> Option<i32> {
    control_type(batch)?;
    let h = BatchHeader::parse(batch).ok()?;
    let record = RecordIter::new(&batch[BATCH_HEADER_BYTES..], h.records_count)
        .next()?
        .ok()?;
    let value = record.value?;
    Some(i32::from_be_bytes(value.get(2..6)?.try_into().ok()?))
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum RecordsError {
    #[error("record batch truncated: {have} bytes, need {need}")]
    Truncated { have: usize, need: usize },
    #[error("record batch length {length} is invalid (minimum {min}, maximum {max})")]
    BadLength { length: i64, min: usize, max: usize },
    #[error("record batch magic {magic} is not supported (only v2)")]
    BadMagic { magic: i8 },
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc { stored: u32, computed: u32 },
    #[error("record batch has {count} records but last_offset_delta {last_offset_delta}")]
    BadCount { count: i32, last_offset_delta: i32 },
    #[error("record {index} of the batch is malformed: {reason}")]
    BadRecord { index: usize, reason: &'static str },
    #[error("unknown compression codec {codec}")]
    UnknownCompression { codec: i16 },
    #[error("decompressed size exceeds the limit of {limit_bytes} bytes")]
    DecompressedTooLarge { limit_bytes: usize },
    #[error("{codec:?} data is corrupt: {reason}")]
    CorruptCompressed { codec: Compression, reason: String },
}

pub type Result<T, E = RecordsError> = std::result::Result<T, E>;

fn be_i16(buf: &[u8], pos: usize) -> i16 {
    i16::from_be_bytes(buf[pos..pos + 2].try_into().unwrap())
}
fn be_i32(buf: &[u8], pos: usize) -> i32 {
    i32::from_be_bytes(buf[pos..pos + 4].try_into().unwrap())
}
fn be_u32(buf: &[u8], pos: usize) -> u32 {
    u32::from_be_bytes(buf[pos..pos + 4].try_into().unwrap())
}
fn be_i64(buf: &[u8], pos: usize) -> i64 {
    i64::from_be_bytes(buf[pos..pos + 8].try_into().unwrap())
}

/// The fixed fields of one batch, read without checking its CRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Reads the fixed header. `buf` must hold at least [`BATCH_HEADER_BYTES`].
    pub fn parse(buf: &[u8]) -> Result<BatchHeader> {
        if buf.len() < BATCH_HEADER_BYTES {
            return Err(RecordsError::Truncated {
                have: buf.len(),
                need: BATCH_HEADER_BYTES,
            });
        }
        Ok(BatchHeader {
            base_offset: be_i64(buf, BASE_OFFSET_POS),
            batch_length: be_i32(buf, BATCH_LENGTH_POS),
            partition_leader_epoch: be_i32(buf, PARTITION_LEADER_EPOCH_POS),
            magic: buf[MAGIC_POS] as i8,
            crc: be_u32(buf, CRC_POS),
            attributes: be_i16(buf, ATTRIBUTES_POS),
            last_offset_delta: be_i32(buf, LAST_OFFSET_DELTA_POS),
            base_timestamp: be_i64(buf, BASE_TIMESTAMP_POS),
            max_timestamp: be_i64(buf, MAX_TIMESTAMP_POS),
            producer_id: be_i64(buf, PRODUCER_ID_POS),
            producer_epoch: be_i16(buf, PRODUCER_EPOCH_POS),
            base_sequence: be_i32(buf, BASE_SEQUENCE_POS),
            records_count: be_i32(buf, RECORDS_COUNT_POS),
        })
    }

    /// Total bytes of the batch on disk, including the 12-byte log overhead.
    pub fn total_bytes(&self) -> usize {
        self.batch_length as usize + LOG_OVERHEAD_BYTES
    }

    /// The offset of the last record in the batch.
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }

    /// The offset after the batch: where the next batch starts.
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }

    pub fn compression(&self) -> Result<Compression> {
        Compression::from_attributes(self.attributes)
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }

    pub fn is_log_append_time(&self) -> bool {
        self.attributes & ATTR_TIMESTAMP_TYPE != 0
    }
}

/// Reads only the total length of the batch that starts `buf`, from its first 12 bytes.
/// Returns `None` when fewer than 12 bytes are given.
pub fn peek_total_bytes(buf: &[u8]) -> Option<i64> {
    if buf.len() < LOG_OVERHEAD_BYTES {
        return None;
    }
    Some(be_i32(buf, BATCH_LENGTH_POS) as i64 + LOG_OVERHEAD_BYTES as i64)
}

pub fn crc_of(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[ATTRIBUTES_POS..])
}

/// Checks one whole batch as a producer must send it: its length field matches
/// `batch.len()`, magic 2, the CRC, and a record count that agrees with `last_offset_delta`
/// (one record per offset). For an uncompressed batch it also walks every record and checks
/// that the records fill the batch exactly.
pub fn validate_batch(batch: &[u8]) -> Result<BatchHeader> {
    validate(batch, true)
}

/// Checks one whole batch as a log may hold it: as [`validate_batch`], except that a batch
/// compaction has filtered may hold fewer records than the offsets it covers (even none).
pub fn validate_stored_batch(batch: &[u8]) -> Result<BatchHeader> {
    validate(batch, false)
}

fn validate(batch: &[u8], dense: bool) -> Result<BatchHeader> {
    let header = BatchHeader::parse(batch)?;
    let total = header.batch_length as i64 + LOG_OVERHEAD_BYTES as i64;
    if total != batch.len() as i64 || total < BATCH_HEADER_BYTES as i64 {
        return Err(RecordsError::BadLength {
            length: total,
            min: BATCH_HEADER_BYTES,
            max: batch.len(),
        });
    }
    if header.magic != MAGIC_V2 {
        return Err(RecordsError::BadMagic { magic: header.magic });
    }
    let computed = crc_of(batch);
    if computed != header.crc {
        return Err(RecordsError::BadCrc {
            stored: header.crc,
            computed,
        });
    }
    let count_fits = if dense {
        header.records_count == 0 || header.records_count - 1 == header.last_offset_delta
    } else {
        header.records_count as i64 <= header.last_offset_delta as i64 + 1
    };
    if header.records_count < 0 || header.last_offset_delta < 0 || !count_fits {
        return Err(RecordsError::BadCount {
            count: header.records_count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    let compression = header.compression()?;
    if compression == Compression::None {
        RecordIter::new(&batch[BATCH_HEADER_BYTES..], header.records_count).validate()?;
    }
    Ok(header)
}

/// Splits a buffer holding consecutive batches (a produce request's records, or a stretch of
/// a segment) into `(header, start, end)` triples, validating each batch fully.
pub fn validate_batches(buf: &[u8]) -> Result<Vec<(BatchHeader, usize, usize)>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < buf.len() {
        let rest = &buf[pos..];
        let total = peek_total_bytes(rest).ok_or(RecordsError::Truncated {
            have: rest.len(),
            need: LOG_OVERHEAD_BYTES,
        })?;
        if total < BATCH_HEADER_BYTES as i64 || total > rest.len() as i64 {
            return Err(RecordsError::BadLength {
                length: total,
                min: BATCH_HEADER_BYTES,
                max: rest.len(),
            });
        }
        let end = pos + total as usize;
        let header = validate_batch(&buf[pos..end])?;
        out.push((header, pos, end));
        pos = end;
    }
    Ok(out)
}

/// Decodes every record of one validated batch, decompressing at most `decompressed_bytes_max`.
pub fn decode_records(batch: &[u8], decompressed_bytes_max: usize) -> Result<Vec<Record>> {
    let header = BatchHeader::parse(batch)?;
    let body = &batch[BATCH_HEADER_BYTES..];
    let owned;
    let records = match header.compression()? {
        Compression::None => body,
        c => {
            owned = decompress(c, body, decompressed_bytes_max)?;
            &owned[..]
        }
    };
    RecordIter::new(records, header.records_count)
        .with_base_timestamp(header.base_timestamp)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(compression: Compression) -> Vec<u8> {
        let mut b = BatchBuilder::new(compression, 1_700_000_000_000);
        for i in 0..50u32 {
            b.push(RecordSpec {
                timestamp_ms: 1_700_000_000_000 + i as i64,
                key: Some(format!("key-{i}").into_bytes()),
                value: Some(vec![i as u8; 100 + i as usize]),
                headers: vec![("h".into(), Some(b"v".to_vec()))],
            });
        }
        b.build().unwrap()
    }

    #[test]
    fn round_trip_every_codec() {
        for c in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let batch = sample(c);
            let h = validate_batch(&batch).unwrap();
            assert_eq!(h.records_count, 50);
            assert_eq!(h.compression().unwrap(), c);
            let records = decode_records(&batch, 1 << 20).unwrap();
            assert_eq!(records.len(), 50);
            assert_eq!(records[7].key.as_deref(), Some(&b"key-7"[..]));
            assert_eq!(records[7].value.as_ref().unwrap().len(), 107);
            assert_eq!(records[7].timestamp_ms, 1_700_000_000_007);
            assert_eq!(records[7].offset_delta, 7);
            assert_eq!(records[7].headers[0].key, "h");
        }
    }

    #[test]
    fn corruption_is_caught() {
        let batch = sample(Compression::None);
        let mut rng = 12345u64;
        for _ in 0..2000 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let pos = (rng >> 33) as usize % batch.len();
            let mut bad = batch.clone();
            bad[pos] ^= 1 + (rng >> 20) as u8 % 255;
            // Bytes 0..8 (base offset) and 12..16 (epoch) are outside the CRC by design.
            if pos < 8 || (12..16).contains(&pos) {
                assert!(validate_batch(&bad).is_ok());
            } else {
                assert!(validate_batch(&bad).is_err(), "flip at {pos} not caught");
            }
            let cut = (rng >> 40) as usize % batch.len();
            assert!(validate_batches(&batch[..cut]).is_err() || cut == 0);
        }
    }

    #[test]
    fn decompression_is_bounded() {
        let mut b = BatchBuilder::new(Compression::Gzip, 0);
        b.push(RecordSpec {
            timestamp_ms: 0,
            key: None,
            value: Some(vec![0u8; 4 << 20]),
            headers: vec![],
        });
        let batch = b.build().unwrap();
        assert!(batch.len() < 64 << 10, "a 4 MiB zero value compresses small");
        assert!(matches!(
            decode_records(&batch, 1 << 20),
            Err(RecordsError::DecompressedTooLarge { .. })
        ));
    }
}

#[cfg(test)]
mod control_tests {
    use super::*;

    #[test]
    fn control_batches_round_trip() {
        for marker in [ControlType::Abort, ControlType::Commit] {
            let batch = control_batch(marker, 42, 3, 7, 1_700_000_000_000);
            let h = validate_batch(&batch).unwrap();
            assert!(h.is_control() && h.is_transactional());
            assert_eq!((h.producer_id, h.producer_epoch, h.records_count), (42, 3, 1));
            assert_eq!(control_type(&batch), Some(marker));
            assert_eq!(marker_coordinator_epoch(&batch), Some(7));
        }
        let mut b = BatchBuilder::new(Compression::None, 0)
            .producer(42, 3, 0)
            .transactional();
        b.push(RecordSpec {
            key: Some(vec![0, 0, 0, 1]),
            ..Default::default()
        });
        let data = b.build().unwrap();
        let h = validate_batch(&data).unwrap();
        assert!(h.is_transactional() && !h.is_control());
        assert_eq!(
            control_type(&data),
            None,
            "a data batch is no marker, whatever its key"
        );
    }
}
