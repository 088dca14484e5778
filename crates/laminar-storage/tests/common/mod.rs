//! Helpers shared by the storage tests.
#![allow(dead_code)]

use std::sync::Arc;

use laminar_records::{validate_batches, BatchBuilder, BatchHeader, Compression, RecordSpec};
use laminar_storage::backend::{read_exact_at, Storage};
use laminar_storage::{Log, LogConfig, Offset, StorageMetrics};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A batch of `records` records whose values are derived from `seed`, with timestamps
/// `ts, ts+1, ...`.
pub fn batch(records: usize, value_bytes: usize, ts: i64, seed: u64) -> Vec<u8> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut b = BatchBuilder::new(Compression::None, ts);
    for i in 0..records {
        let mut value = vec![0u8; value_bytes];
        rng.fill(&mut value[..]);
        b.push(RecordSpec {
            timestamp_ms: ts + i as i64,
            key: Some(format!("k{seed}-{i}").into_bytes()),
            value: Some(value),
            headers: vec![],
        });
    }
    b.build().unwrap()
}

/// Reads every batch of the log from its start, validating each (CRC included) and
/// checking that offsets are contiguous. Returns `(header, bytes)` per batch.
pub fn read_all(log: &Log) -> Vec<(BatchHeader, Vec<u8>)> {
    let mut out = Vec::new();
    let mut next = log.log_start();
    loop {
        let read = log.read(next, 64 << 10, true).expect("read");
        let Some(range) = read.range else { break };
        let mut buf = vec![0u8; range.len as usize];
        read_exact_at(range.file.as_ref(), &mut buf, range.position.0).unwrap();
        let batches =
            validate_batches(&buf).unwrap_or_else(|e| panic!("read returned a corrupt batch at {next}: {e}"));
        assert!(!batches.is_empty());
        for (h, s, e) in batches {
            assert_eq!(Offset(h.base_offset), next, "offsets are contiguous");
            next = Offset(h.next_offset());
            out.push((h, buf[s..e].to_vec()));
        }
        assert_eq!(next, range.next_offset);
    }
    assert_eq!(next, log.log_end());
    out
}

pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 32 << 10,
        segment_ms: None,
        preallocate_bytes: 8 << 10,
        index_interval_bytes: 512,
        retention_ms: None,
        retention_bytes: None,
        flush_interval_ms: None,
        flush_messages: None,
        checkpoint_interval_ms: 1000,
        ..LogConfig::default()
    }
}

pub fn open_log(storage: Arc<dyn Storage>, dir: &str, config: LogConfig, clean: bool) -> Arc<Log> {
    Log::open(
        "t-0",
        std::path::Path::new(dir),
        storage,
        config,
        Arc::new(StorageMetrics::default()),
        clean,
    )
    .expect("open log")
}

/// The same batch with its log-assigned fields (base offset, leader epoch) cleared, to
/// compare what was produced with what was stored.
pub fn payload(batch: &[u8]) -> &[u8] {
    &batch[16..]
}
