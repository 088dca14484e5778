//! Filtering one batch's records, as log compaction does (Kafka's `MemoryRecords.filterTo`):
//! the records a cleaner keeps are written back into a batch with the same base offset, last
//! offset delta, producer id, epoch and base sequence, so every kept record keeps its offset
//! and the batch still covers the same offset range (the idempotent producer's sequence
//! checks, and a consumer's next fetch offset, do not change). Record timestamps are kept; the
//! base timestamp becomes the delete horizon when one is given (attribute bit 6, KIP-534), so
//! that tombstones can later be removed once it has passed.

use crate::builder::{encode_record, write_batch};
use crate::*;

/// Bit 6 of a v2 batch's attributes: its base timestamp is the delete horizon (KIP-534).
pub const DELETE_HORIZON_FLAG: i16 = 1 << 6;
/// Bit 3: the timestamps are the broker's (LogAppendTime).
const LOG_APPEND_TIME_FLAG: i16 = 1 << 3;

/// What became of one batch.
#[derive(Debug, PartialEq, Eq)]
pub enum Filtered {
    /// Every record kept and nothing to add: the batch as it was.
    Unchanged,
    /// Some records removed (or a delete horizon added): the batch to write instead.
    Rewritten(Vec<u8>),
    /// Every record removed, and `keep_empty` was false: nothing to write.
    Removed,
}

/// Filters the records of one validated v2 `batch` with `keep(offset, record)`. With
/// `delete_horizon_ms`, a batch without a horizon that keeps a tombstone gets it, as Kafka
/// sets it the first time it cleans a tombstone. With `keep_empty`, a batch
/// whose every record is removed is written with no records (its header only), which a
/// cleaner does for the last batch of an idempotent producer, so that its sequence state
/// survives. Control batches are never filtered.
pub fn filter_batch(
    batch: &[u8],
    decompressed_bytes_max: usize,
    delete_horizon_ms: Option<i64>,
    keep_empty: bool,
    mut keep: impl FnMut(i64, &Record) -> bool,
) -> Result<Filtered> {
    let header = validate_stored_batch(batch)?;
    if header.is_control() {
        return Ok(Filtered::Unchanged);
    }
    let records = decode_records(batch, decompressed_bytes_max)?;
    let all = records.len();
    let kept: Vec<Record> = records
        .into_iter()
        .filter(|r| keep(header.base_offset + r.offset_delta as i64, r))
        .collect();
    let has_horizon = header.attributes & DELETE_HORIZON_FLAG != 0;
    let add_horizon = delete_horizon_ms.is_some() && !has_horizon && kept.iter().any(|r| r.value.is_none());
    if kept.len() == all && !add_horizon {
        return Ok(Filtered::Unchanged);
    }
    if kept.is_empty() && !keep_empty {
        return Ok(Filtered::Removed);
    }
    let base_timestamp = match (has_horizon, delete_horizon_ms) {
        (true, _) => header.base_timestamp,
        (false, Some(horizon)) if add_horizon => horizon,
        (false, _) => kept.first().map_or(header.base_timestamp, |r| r.timestamp_ms),
    };
    let max_timestamp = if header.attributes & LOG_APPEND_TIME_FLAG != 0 || kept.is_empty() {
        header.max_timestamp
    } else {
        kept.iter().map(|r| r.timestamp_ms).max().expect("not empty")
    };
    let mut records = Vec::new();
    for r in &kept {
        let headers: Vec<(&[u8], Option<&[u8]>)> = r
            .headers
            .iter()
            .map(|h| (h.key.as_bytes(), h.value.as_deref()))
            .collect();
        encode_record(
            &mut records,
            r.attributes,
            r.timestamp_ms - base_timestamp,
            r.offset_delta,
            r.key.as_deref(),
            r.value.as_deref(),
            &headers,
        );
    }
    let body = compress(header.compression()?, &records);
    let out = BatchHeader {
        attributes: header.attributes | if add_horizon { DELETE_HORIZON_FLAG } else { 0 },
        base_timestamp,
        max_timestamp,
        records_count: kept.len() as i32,
        ..header
    };
    let rewritten = write_batch(&out, &body);
    debug_assert!(
        validate_stored_batch(&rewritten).is_ok(),
        "a rewritten batch is valid"
    );
    Ok(Filtered::Rewritten(rewritten))
}

/// A control batch (a transaction marker) with a delete horizon: bit 6 set and its base
/// timestamp the horizon, as Kafka's cleaner marks a marker whose transaction has no records
/// left, to remove it once the horizon has passed (KIP-534). The CRC is recomputed.
pub fn with_delete_horizon(batch: &[u8], horizon_ms: i64) -> Vec<u8> {
    let mut out = batch.to_vec();
    let attributes = be_i16(&out, ATTRIBUTES_POS) | DELETE_HORIZON_FLAG;
    out[ATTRIBUTES_POS..ATTRIBUTES_POS + 2].copy_from_slice(&attributes.to_be_bytes());
    out[BASE_TIMESTAMP_POS..BASE_TIMESTAMP_POS + 8].copy_from_slice(&horizon_ms.to_be_bytes());
    let crc = crc_of(&out);
    out[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A small deterministic generator: the tests' workloads are seeded.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    type Seen = (i64, i64, Option<Vec<u8>>, Option<Vec<u8>>, Vec<Header>);

    fn with_base_offset(mut batch: Vec<u8>, base: i64) -> Vec<u8> {
        batch[BASE_OFFSET_POS..BASE_OFFSET_POS + 8].copy_from_slice(&base.to_be_bytes());
        batch
    }

    /// Seeded workloads of keyed records and tombstones in batches of every codec: keeping
    /// the newest record per key (the reference model) leaves exactly those records, at their
    /// offsets, with their timestamps, keys, values and headers, in batches that cover the
    /// same offsets as before.
    #[test]
    fn keeping_the_newest_record_per_key_matches_the_model() {
        for seed in 1..=40u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let codec = [
                Compression::None,
                Compression::Gzip,
                Compression::Snappy,
                Compression::Lz4,
                Compression::Zstd,
            ][seed as usize % 5];
            let mut batches = Vec::new();
            let mut written: Vec<(i64, Record)> = Vec::new();
            let mut offset = 0i64;
            for _ in 0..(1 + rng.below(8)) {
                let base_ts = 1_700_000_000_000 + offset * 10;
                let mut b = BatchBuilder::new(codec, base_ts).producer(7, 1, offset as i32);
                let n = 1 + rng.below(20);
                for i in 0..n {
                    let key = format!("k{}", rng.below(6)).into_bytes();
                    let value = (rng.below(5) != 0).then(|| vec![b'v'; rng.below(40) as usize]);
                    b.push(RecordSpec {
                        timestamp_ms: base_ts + i as i64 * 3,
                        key: Some(key),
                        value,
                        headers: vec![("h".into(), Some(format!("{offset}-{i}").into_bytes()))],
                    });
                }
                let batch = with_base_offset(b.build().unwrap(), offset);
                for r in decode_records(&batch, 1 << 20).unwrap() {
                    written.push((offset + r.offset_delta as i64, r));
                }
                batches.push(batch);
                offset += n as i64;
            }
            let newest: BTreeMap<Vec<u8>, i64> = written
                .iter()
                .map(|(o, r)| (r.key.clone().unwrap(), *o))
                .collect();
            let expected: Vec<(i64, Record)> = written
                .iter()
                .filter(|(o, r)| newest[r.key.as_ref().unwrap()] == *o)
                .cloned()
                .collect();

            let mut got = Vec::new();
            for batch in &batches {
                let before = BatchHeader::parse(batch).unwrap();
                let out = match filter_batch(batch, 1 << 20, None, false, |o, r| {
                    newest[r.key.as_ref().unwrap()] == o
                })
                .unwrap()
                {
                    Filtered::Unchanged => batch.clone(),
                    Filtered::Rewritten(b) => b,
                    Filtered::Removed => continue,
                };
                let after = validate_stored_batch(&out).unwrap();
                assert_eq!(after.base_offset, before.base_offset, "seed {seed}");
                assert_eq!(after.last_offset(), before.last_offset(), "seed {seed}");
                assert_eq!(after.base_sequence, before.base_sequence, "seed {seed}");
                assert_eq!(after.compression().unwrap(), codec);
                for r in decode_records(&out, 1 << 20).unwrap() {
                    got.push((after.base_offset + r.offset_delta as i64, r));
                }
            }
            // What a consumer sees of each record (its attributes byte aside).
            let strip = |v: &[(i64, Record)]| -> Vec<Seen> {
                v.iter()
                    .map(|(o, r)| {
                        (
                            *o,
                            r.timestamp_ms,
                            r.key.clone(),
                            r.value.clone(),
                            r.headers.clone(),
                        )
                    })
                    .collect()
            };
            assert_eq!(strip(&got), strip(&expected), "seed {seed}");
        }
    }

    #[test]
    fn a_delete_horizon_is_set_once_and_empty_batches_are_kept_when_asked() {
        let mut b = BatchBuilder::new(Compression::None, 1_000).producer(3, 0, 10);
        for i in 0..3 {
            b.push(RecordSpec {
                timestamp_ms: 1_000 + i,
                key: Some(b"k".to_vec()),
                value: None,
                headers: vec![],
            });
        }
        let batch = with_base_offset(b.build().unwrap(), 100);
        let Filtered::Rewritten(h) = filter_batch(&batch, 1 << 20, Some(9_999), false, |_, _| true).unwrap()
        else {
            panic!("a horizon rewrites the batch")
        };
        let header = validate_stored_batch(&h).unwrap();
        assert_ne!(header.attributes & DELETE_HORIZON_FLAG, 0);
        assert_eq!(header.base_timestamp, 9_999);
        let ts: Vec<i64> = decode_records(&h, 1 << 20)
            .unwrap()
            .iter()
            .map(|r| r.timestamp_ms)
            .collect();
        assert_eq!(ts, [1_000, 1_001, 1_002], "record timestamps kept");
        // A batch without tombstones gets no horizon.
        let mut plain = BatchBuilder::new(Compression::None, 1_000);
        plain.push(RecordSpec {
            timestamp_ms: 1_000,
            key: Some(b"k".to_vec()),
            value: Some(b"v".to_vec()),
            headers: vec![],
        });
        let plain = plain.build().unwrap();
        assert_eq!(
            filter_batch(&plain, 1 << 20, Some(9_999), false, |_, _| true).unwrap(),
            Filtered::Unchanged
        );
        // A second pass keeps the first horizon.
        assert_eq!(
            filter_batch(&h, 1 << 20, Some(20_000), false, |_, _| true).unwrap(),
            Filtered::Unchanged
        );

        assert_eq!(
            filter_batch(&batch, 1 << 20, None, false, |_, _| false).unwrap(),
            Filtered::Removed
        );
        let Filtered::Rewritten(empty) = filter_batch(&batch, 1 << 20, None, true, |_, _| false).unwrap()
        else {
            panic!("an empty batch kept")
        };
        let header = validate_stored_batch(&empty).unwrap();
        assert_eq!(
            (header.base_offset, header.last_offset(), header.records_count),
            (100, 102, 0)
        );
        assert_eq!((header.producer_id, header.base_sequence), (3, 10));
    }
}
