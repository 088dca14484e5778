//! Builds v2 batches: used by the perf suite, by tests, and by the broker's own internal logs.

use crate::varint::{write_varint, write_varlong};
use crate::*;

#[derive(Debug, Clone, Default)]
pub struct RecordSpec {
    pub timestamp_ms: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

pub struct BatchBuilder {
    compression: Compression,
    base_timestamp_ms: i64,
    max_timestamp_ms: i64,
    count: i32,
    records: Vec<u8>,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
}

fn write_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => write_varint(out, -1),
        Some(b) => {
            write_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
    }
}

/// Appends one v2 record (its length prefix first) to `out`.
pub(crate) fn encode_record(
    out: &mut Vec<u8>,
    attributes: i8,
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[(&[u8], Option<&[u8]>)],
) {
    let mut body = Vec::with_capacity(32 + value.map_or(0, |v| v.len()));
    body.push(attributes as u8);
    write_varlong(&mut body, timestamp_delta);
    write_varint(&mut body, offset_delta);
    write_bytes(&mut body, key);
    write_bytes(&mut body, value);
    write_varint(&mut body, headers.len() as i32);
    for (k, v) in headers {
        write_bytes(&mut body, Some(k));
        write_bytes(&mut body, *v);
    }
    write_varint(out, body.len() as i32);
    out.extend_from_slice(&body);
}

impl BatchBuilder {
    pub fn new(compression: Compression, base_timestamp_ms: i64) -> BatchBuilder {
        BatchBuilder {
            compression,
            base_timestamp_ms,
            max_timestamp_ms: base_timestamp_ms,
            count: 0,
            records: Vec::new(),
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
        }
    }

    /// Marks the batch as part of a transaction of its producer.
    pub fn transactional(mut self) -> Self {
        self.transactional = true;
        self
    }

    pub fn producer(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn push(&mut self, r: RecordSpec) {
        let headers: Vec<(&[u8], Option<&[u8]>)> = r
            .headers
            .iter()
            .map(|(k, v)| (k.as_bytes(), v.as_deref()))
            .collect();
        encode_record(
            &mut self.records,
            0,
            r.timestamp_ms - self.base_timestamp_ms,
            self.count,
            r.key.as_deref(),
            r.value.as_deref(),
            &headers,
        );
        self.max_timestamp_ms = self.max_timestamp_ms.max(r.timestamp_ms);
        self.count += 1;
    }

    /// Returns the finished batch with base offset 0 and a correct CRC.
    pub fn build(self) -> Result<Vec<u8>> {
        let body = compress(self.compression, &self.records);
        self.finish(&body)
    }

    /// A batch of `count` records that the caller has encoded and compressed with this
    /// builder's codec (records pushed before are ignored). For crafted input too large to
    /// build in memory, such as a benchmark's decompression bomb.
    pub fn build_precompressed(mut self, count: i32, compressed_records: &[u8]) -> Result<Vec<u8>> {
        self.count = count;
        self.finish(compressed_records)
    }

    fn finish(self, body: &[u8]) -> Result<Vec<u8>> {
        let header = BatchHeader {
            base_offset: 0,
            batch_length: 0,
            partition_leader_epoch: -1,
            magic: MAGIC_V2,
            crc: 0,
            attributes: self.compression.attribute_bits()
                | if self.transactional { ATTR_TRANSACTIONAL } else { 0 },
            last_offset_delta: (self.count - 1).max(0),
            base_timestamp: self.base_timestamp_ms,
            max_timestamp: self.max_timestamp_ms,
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            base_sequence: self.base_sequence,
            records_count: self.count,
        };
        Ok(write_batch(&header, body))
    }
}

/// A whole v2 batch: `header`'s fields (but its length and CRC, which are computed) and the
/// record section `body`, already compressed as `header.attributes` says.
pub(crate) fn write_batch(header: &BatchHeader, body: &[u8]) -> Vec<u8> {
    let total = BATCH_HEADER_BYTES + body.len();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&header.base_offset.to_be_bytes());
    out.extend_from_slice(&((total - LOG_OVERHEAD_BYTES) as i32).to_be_bytes());
    out.extend_from_slice(&header.partition_leader_epoch.to_be_bytes());
    out.push(MAGIC_V2 as u8);
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&header.attributes.to_be_bytes());
    out.extend_from_slice(&header.last_offset_delta.to_be_bytes());
    out.extend_from_slice(&header.base_timestamp.to_be_bytes());
    out.extend_from_slice(&header.max_timestamp.to_be_bytes());
    out.extend_from_slice(&header.producer_id.to_be_bytes());
    out.extend_from_slice(&header.producer_epoch.to_be_bytes());
    out.extend_from_slice(&header.base_sequence.to_be_bytes());
    out.extend_from_slice(&header.records_count.to_be_bytes());
    debug_assert_eq!(out.len(), BATCH_HEADER_BYTES);
    out.extend_from_slice(body);
    let crc = crc_of(&out);
    out[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

/// A transaction marker: the control batch a transaction coordinator writes into each
/// partition of a transaction when it ends, as Kafka writes it (one record, key
/// `[version 0, type]`, value `[version 0, coordinator epoch]`, uncompressed).
pub fn control_batch(
    marker: ControlType,
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    timestamp_ms: i64,
) -> Vec<u8> {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&(marker as i16).to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    let mut records = Vec::new();
    encode_record(&mut records, 0, 0, 0, Some(&key), Some(&value), &[]);
    let header = BatchHeader {
        base_offset: 0,
        batch_length: 0,
        partition_leader_epoch: -1,
        magic: MAGIC_V2,
        crc: 0,
        attributes: ATTR_TRANSACTIONAL | ATTR_CONTROL,
        last_offset_delta: 0,
        base_timestamp: timestamp_ms,
        max_timestamp: timestamp_ms,
        producer_id,
        producer_epoch,
        base_sequence: -1,
        records_count: 1,
    };
    write_batch(&header, &records)
}
