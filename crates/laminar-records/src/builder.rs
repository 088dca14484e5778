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
        }
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
        let mut body = Vec::with_capacity(32 + r.value.as_ref().map_or(0, |v| v.len()));
        body.push(0); // attributes: unused in v2
        write_varlong(&mut body, r.timestamp_ms - self.base_timestamp_ms);
        write_varint(&mut body, self.count);
        write_bytes(&mut body, r.key.as_deref());
        write_bytes(&mut body, r.value.as_deref());
        write_varint(&mut body, r.headers.len() as i32);
        for (k, v) in &r.headers {
            write_bytes(&mut body, Some(k.as_bytes()));
            write_bytes(&mut body, v.as_deref());
        }
        write_varint(&mut self.records, body.len() as i32);
        self.records.extend_from_slice(&body);
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
        let total = BATCH_HEADER_BYTES + body.len();
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&0i64.to_be_bytes());
        out.extend_from_slice(&((total - LOG_OVERHEAD_BYTES) as i32).to_be_bytes());
        out.extend_from_slice(&(-1i32).to_be_bytes());
        out.push(MAGIC_V2 as u8);
        out.extend_from_slice(&0u32.to_be_bytes());
        out.extend_from_slice(&self.compression.attribute_bits().to_be_bytes());
        out.extend_from_slice(&(self.count - 1).max(0).to_be_bytes());
        out.extend_from_slice(&self.base_timestamp_ms.to_be_bytes());
        out.extend_from_slice(&self.max_timestamp_ms.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.count.to_be_bytes());
        debug_assert_eq!(out.len(), BATCH_HEADER_BYTES);
        out.extend_from_slice(body);
        let crc = crc_of(&out);
        out[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
        Ok(out)
    }
}
