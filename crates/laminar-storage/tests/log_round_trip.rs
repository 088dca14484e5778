//! Acceptance 1: append, read, roll, retention and timestamp lookup round-trip.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use laminar_records::BatchHeader;
use laminar_storage::backend::{Fault, FaultyStorage, RealStorage, SimStorage, Storage};
use laminar_storage::{LogConfig, LogId, Offset, StorageError, Store, StoreConfig};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn fill(log: &laminar_storage::Log, batches: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut appended = Vec::new();
    for i in 0..batches {
        let mut b = batch(
            rng.gen_range(1..20),
            rng.gen_range(0..300),
            1_000_000 + 100 * i as i64,
            seed ^ i as u64,
        );
        let info = log.append(&mut b).unwrap();
        assert_eq!(info.records, BatchHeader::parse(&b).unwrap().records_count as u64);
        appended.push(b);
    }
    appended
}

fn check_round_trip(storage: Arc<dyn Storage>, dir: &str) {
    let log = open_log(storage.clone(), dir, small_config(), false);
    let appended = fill(&log, 400, 7);
    assert!(
        log.segment_count() > 3,
        "segments rolled: {}",
        log.segment_count()
    );
    let stored = read_all(&log);
    assert_eq!(stored.len(), appended.len());
    for (a, (_, s)) in appended.iter().zip(&stored) {
        assert_eq!(
            a, s,
            "stored bytes are exactly the appended batch, offsets included"
        );
    }

    // A read from the middle of a batch starts with the batch that holds the offset.
    let (h, _) = &stored[123];
    let inside = Offset(h.base_offset + h.last_offset_delta as i64);
    let read = log.read(inside, 1, true).unwrap();
    let range = read.range.unwrap();
    assert_eq!(range.first_offset, Offset(h.base_offset));
    assert_eq!(
        range.len,
        h.total_bytes() as u64,
        "min_one_batch returns the first batch whole"
    );
    assert!(log.read(inside, 1, false).unwrap().range.is_none());

    // Out of range, and at the end.
    let end = log.log_end();
    assert!(matches!(
        log.read(Offset(end.0 + 1), 1000, true),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    assert!(log.read(end, 1000, true).unwrap().range.is_none());

    // Timestamps: the first record at or after each target, compared with a brute force.
    let mut all: Vec<(i64, i64)> = Vec::new();
    for (h, _) in &stored {
        for d in 0..=h.last_offset_delta as i64 {
            all.push((h.base_offset + d, h.base_timestamp + d));
        }
    }
    for target in [
        0, 1_000_000, 1_000_005, 1_013_350, 1_020_000, 1_039_900, 1_039_919, 5_000_000,
    ] {
        let want = all
            .iter()
            .find(|(_, ts)| *ts >= target)
            .map(|&(o, ts)| (Offset(o), ts));
        assert_eq!(log.offset_for_timestamp(target).unwrap(), want, "target {target}");
    }

    // Clean close, reopen: identical.
    log.close().unwrap();
    drop(log);
    let log = open_log(storage.clone(), dir, small_config(), true);
    assert_eq!(read_all(&log).len(), appended.len());
    assert!(log.recovery_report().truncated_at.is_none());
    assert_eq!(
        log.offset_for_timestamp(1_020_000).unwrap(),
        all.iter()
            .find(|(_, ts)| *ts >= 1_020_000)
            .map(|&(o, ts)| (Offset(o), ts))
    );
    // Appends continue where the log ended.
    let mut b = batch(3, 10, 2_000_000, 99);
    let info = log.append(&mut b).unwrap();
    assert_eq!(info.base_offset, end);

    // Retention by size keeps at least `retention_bytes`, deleting whole old segments.
    let before = log.size_bytes();
    let mut config = small_config();
    config.retention_bytes = Some(before / 2);
    log.set_config(config).unwrap();
    let deleted = log.apply_retention(laminar_storage::now_ms()).unwrap();
    assert!(deleted > 0);
    assert!(log.size_bytes() >= before / 2);
    let start = log.log_start();
    assert!(start > Offset(0));
    assert!(matches!(
        log.read(Offset(start.0 - 1), 1000, true),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    let rest = read_all(&log);
    assert_eq!(Offset(rest[0].0.base_offset), start);

    // Retention by time: every record is from 1970, so all but the active segment go.
    let mut config = small_config();
    config.retention_ms = Some(1000);
    log.set_config(config).unwrap();
    log.apply_retention(laminar_storage::now_ms()).unwrap();
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.log_end(), info.log_end);
    read_all(&log);
}

#[test]
fn round_trip_in_memory() {
    check_round_trip(SimStorage::new(), "/data/t-0");
}

#[test]
fn round_trip_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    check_round_trip(RealStorage::new(), path.to_str().unwrap());
}

#[test]
fn preallocation_keeps_file_size_and_close_trims_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let config = LogConfig {
        segment_bytes: 1 << 20,
        preallocate_bytes: 64 << 10,
        ..small_config()
    };
    let log = open_log(RealStorage::new(), path.to_str().unwrap(), config.clone(), false);
    let mut b = batch(10, 100, 0, 1);
    log.append(&mut b).unwrap();
    let data = path.join(format!("{:020}.log", 0));
    assert_eq!(std::fs::metadata(&data).unwrap().len(), 64 << 10);
    log.close().unwrap();
    assert_eq!(std::fs::metadata(&data).unwrap().len(), b.len() as u64);
}

/// With `log.preallocate.bytes=0` the preparer still makes the next segment's file, empty:
/// appends grow the active one, and it rolls at `segment.bytes`, not at every append once a
/// file is ready (which made a segment per append until the broker ran out of descriptors).
#[test]
fn without_preallocation_a_segment_rolls_only_when_full() {
    let config = StoreConfig {
        default_log: LogConfig {
            segment_bytes: 1 << 20,
            preallocate_bytes: 0,
            ..small_config()
        },
        ..StoreConfig::default()
    };
    let store = Store::open(std::path::Path::new("/d"), SimStorage::new(), config.clone()).unwrap();
    let log = store.create_log(&LogId::new("t", 0), config.default_log).unwrap();
    for i in 0..200 {
        log.append(&mut batch(2, 500, 0, i)).unwrap();
        // Time for the preparer to make the next file, as on a real broker.
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(log.segment_count(), 1, "200 KiB in a 1 MiB segment");
    store.close().unwrap();
}

#[test]
fn invalid_batches_leave_nothing_behind() {
    let log = open_log(SimStorage::new(), "/d/t-0", small_config(), false);
    let mut good = batch(5, 10, 0, 1);
    log.append(&mut good).unwrap();
    let end = log.log_end();
    // Two batches, the second with a flipped byte inside its CRC range.
    let mut two = batch(5, 10, 0, 2);
    let mut bad = batch(5, 10, 0, 3);
    let n = bad.len();
    bad[n - 3] ^= 0xff;
    two.extend_from_slice(&bad);
    assert!(matches!(log.append(&mut two), Err(StorageError::InvalidBatch(_))));
    // Truncated, and an empty append.
    let mut cut = batch(5, 10, 0, 4);
    cut.truncate(cut.len() - 1);
    assert!(log.append(&mut cut).is_err());
    assert!(log.append(&mut []).is_err());
    assert_eq!(log.log_end(), end);
    assert_eq!(read_all(&log).len(), 1);
}

#[test]
fn torn_write_is_invisible_and_overwritten() {
    let faulty = FaultyStorage::new(SimStorage::new());
    let log = open_log(faulty.clone(), "/d/t-0", small_config(), false);
    let mut a = batch(5, 50, 0, 1);
    log.append(&mut a).unwrap();
    let end = log.log_end();
    faulty.inject("/d", Fault::TearNextWrite { keep_bytes: 40 });
    let mut b = batch(5, 50, 0, 2);
    assert!(log.append(&mut b).is_err());
    assert_eq!(log.log_end(), end);
    let mut c = batch(5, 50, 0, 3);
    log.append(&mut c).unwrap();
    let all = read_all(&log);
    assert_eq!(all.len(), 2);
    assert_eq!(all[1].1, c);
}

#[test]
fn failed_fsync_takes_the_log_offline() {
    let faulty = FaultyStorage::new(SimStorage::new());
    let log = open_log(faulty.clone(), "/d/t-0", small_config(), false);
    let mut a = batch(5, 50, 0, 1);
    let info = log.append(&mut a).unwrap();
    faulty.inject("/d/t-0/", Fault::FailSyncs);
    let wait = log.wait_flushed(info.last_offset);
    assert!(log.flush().is_err());
    assert!(matches!(
        wait.wait_timeout(Duration::from_secs(5)),
        Some(Err(StorageError::Offline { .. }))
    ));
    // Never retried: even with the disk healthy again the log stays offline.
    faulty.clear();
    assert!(matches!(log.flush(), Err(StorageError::Offline { .. })));
    let mut b = batch(5, 50, 0, 2);
    assert!(matches!(log.append(&mut b), Err(StorageError::Offline { .. })));
    assert!(log.offline_reason().unwrap().contains("fdatasync"));
}

#[test]
fn stalled_write_does_not_block_reads() {
    let faulty = FaultyStorage::new(SimStorage::new());
    let log = open_log(faulty.clone(), "/d/t-0", small_config(), false);
    let mut a = batch(5, 50, 0, 1);
    log.append(&mut a).unwrap();
    faulty.inject("/d/t-0/", Fault::WriteLatency(Duration::from_millis(1500)));
    let writer = {
        let log = log.clone();
        std::thread::spawn(move || {
            let mut b = batch(5, 50, 0, 2);
            log.append(&mut b).unwrap();
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    // The appender holds the append lock inside a 1.5 s write; a read must not wait for it.
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = {
        let log = log.clone();
        std::thread::spawn(move || {
            tx.send(log.read(Offset(0), 1 << 20, true).map(|r| r.range.is_some()))
                .unwrap()
        })
    };
    let got = rx
        .recv_timeout(Duration::from_millis(1000))
        .expect("read finished while the write stalled");
    assert!(got.unwrap());
    writer.join().unwrap();
    reader.join().unwrap();
}

/// Issue 29, item 3: after a failed fsync the page cache still shows what was written,
/// though the disk may never get it (and an fsync on a new descriptor reports no error). A
/// log reopened by a new process, on the same kernel, ends where its last successful fsync
/// reached, not where the page cache does; and a waiter that comes after the failure is
/// answered at once, never left to hang.
#[test]
fn a_log_reopened_after_a_failed_fsync_ends_at_its_last_successful_one() {
    let faulty = FaultyStorage::new(SimStorage::new());
    let log = open_log(faulty.clone(), "/d/t-0", small_config(), false);
    let mut a = batch(5, 50, 0, 1);
    log.append(&mut a).unwrap();
    log.flush().unwrap();
    let durable = log.log_end();
    let mut b = batch(5, 50, 0, 2);
    let info = log.append(&mut b).unwrap();
    faulty.inject("/d/t-0/", Fault::FailSyncs);
    assert!(log.flush().is_err());
    assert!(matches!(
        log.wait_flushed(info.last_offset)
            .wait_timeout(Duration::from_secs(5)),
        Some(Err(StorageError::Offline { .. }))
    ));
    drop(log);
    faulty.clear();
    let log = open_log(faulty.clone(), "/d/t-0", small_config(), false);
    assert_eq!(
        log.log_end(),
        durable,
        "cut where the last successful fsync reached"
    );
    assert_eq!(read_all(&log).len(), 1);
    let mut c = batch(5, 50, 0, 3);
    log.append(&mut c).unwrap();
    log.flush().unwrap();
    drop(log);
    // The failure is forgotten once the log is cut: it opens whole again.
    let log = open_log(faulty, "/d/t-0", small_config(), false);
    assert_eq!(read_all(&log).len(), 2);
}
