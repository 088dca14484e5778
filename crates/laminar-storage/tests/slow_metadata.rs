//! Issue 27: nothing on the append path waits for a file's creation, allocation, rename or
//! truncation. A roll swaps in a file the preparer made; the flusher names it and trims the
//! sealed segment; recovery adopts a rolled file a crash left unnamed.

mod common;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{batch, open_log, read_all, small_config};
use laminar_storage::backend::{Fault, FaultyStorage, SimStorage, Storage};
use laminar_storage::{LogConfig, LogId, Store, StoreConfig};

/// How long the slow directory takes for each create, allocate, truncate, rename and remove.
const METADATA_STALL: Duration = Duration::from_millis(1500);
/// The most any append may take meanwhile. Appends to the in-memory storage take
/// microseconds; the bound leaves room for a loaded CI machine, far below the stall.
const APPEND_BOUND: Duration = Duration::from_millis(300);

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 32 << 10,
        preallocate_bytes: 8 << 10,
        ..small_config()
    }
}

#[test]
fn appends_and_rolls_do_not_wait_for_a_slow_directory() {
    let sim = SimStorage::new();
    let faulty = FaultyStorage::new(sim.clone());
    let store_config = StoreConfig {
        default_log: config(),
        ..StoreConfig::default()
    };
    let store = Store::open(Path::new("/data"), faulty.clone(), store_config.clone()).unwrap();
    let slow = store.create_log(&LogId::new("slow", 0), config()).unwrap();
    let other = store.create_log(&LogId::new("other", 0), config()).unwrap();
    faulty.inject("/data/slow-0", Fault::MetadataLatency(METADATA_STALL));

    // About ten segments' worth to each log, while every metadata call of one of them stalls.
    let mut worst = Duration::ZERO;
    let mut written = 0;
    for i in 0..300u64 {
        for log in [&slow, &other] {
            let mut b = batch(2, 400, 1_000 + i as i64, i);
            let t = Instant::now();
            log.append(&mut b).unwrap();
            worst = worst.max(t.elapsed());
        }
        written += 1;
        // A producer's pace, not a memory copy's: the other log's preparer keeps up.
        std::thread::sleep(Duration::from_millis(3));
    }
    let deferred = store.metrics().rolls_deferred.load(Ordering::Relaxed);
    assert!(deferred > 0, "the stalled preparer made rolls wait");
    assert_eq!(store.metrics().rolls_inline.load(Ordering::Relaxed), 0);
    assert!(
        worst < APPEND_BOUND,
        "an append waited {worst:?} while the directory stalled {METADATA_STALL:?}"
    );
    assert!(other.segment_count() >= 5, "the other log rolled on time");
    assert!(
        slow.segment_count() <= 2,
        "the slow log's rolls waited for its preparer ({} segments)",
        slow.segment_count()
    );

    // Once the directory is fast again, the slow log rolls with its appends.
    faulty.clear();
    let deadline = Instant::now() + Duration::from_secs(20);
    while slow.segment_count() < 3 {
        assert!(Instant::now() < deadline, "the slow log never rolled again");
        let mut b = batch(2, 400, 5_000 + written, 10_000 + written as u64);
        slow.append(&mut b).unwrap();
        written += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    let slow_batches = read_all(&slow);
    let other_batches = read_all(&other);
    store.close().unwrap();
    drop((slow, other));

    // A clean restart finds every batch, every segment under its own name, no leftovers.
    let store = Store::open(Path::new("/data"), faulty.clone(), store_config).unwrap();
    let slow = store.log(&LogId::new("slow", 0)).unwrap();
    let other = store.log(&LogId::new("other", 0)).unwrap();
    assert_eq!(read_all(&slow), slow_batches);
    assert_eq!(read_all(&other), other_batches);
    for dir in ["/data/slow-0", "/data/other-0"] {
        let names = sim.list_dir(Path::new(dir)).unwrap();
        assert!(
            !names.iter().any(|n| n.ends_with(".prepared")),
            "{dir} holds a prepared file after a clean close: {names:?}"
        );
    }
    store.close().unwrap();
}

/// A log that rolled into a prepared file whose allocation the segment did not fill, and
/// was killed before the flusher named the new file and trimmed the old one: recovery
/// adopts the new file and trims the old segment's zeros, losing nothing.
#[test]
fn a_kill_between_a_roll_and_its_flush_loses_nothing() {
    let sim = SimStorage::new();
    // Allocated whole: the sealed segment keeps zeros past its end until it is trimmed.
    let config = LogConfig {
        segment_bytes: 32 << 10,
        preallocate_bytes: 32 << 10,
        ..small_config()
    };
    let log = open_log(sim.clone(), "/data/t-0", config.clone(), false);
    let mut i = 0u64;
    while log.segment_count() < 3 {
        let mut b = batch(3, 300, 1_000 + i as i64, i);
        log.append(&mut b).unwrap();
        i += 1;
    }
    let before = read_all(&log);
    let names = sim.list_dir(Path::new("/data/t-0")).unwrap();
    assert!(
        names.iter().filter(|n| n.ends_with(".prepared")).count() >= 2,
        "the rolled files are not named yet: {names:?}"
    );
    drop(log); // killed: the page cache survives, nothing was flushed

    let log = open_log(sim.clone(), "/data/t-0", config.clone(), false);
    assert_eq!(read_all(&log), before, "every batch is back");
    assert_eq!(log.segment_count(), 3);
    let report = log.recovery_report();
    assert_eq!(report.segments_deleted, 0, "{report:?}");
    // Only the active segment's preallocated zeros are cut, at its end.
    assert!(
        report.truncated_at.as_ref().is_none_or(|t| t.0 == log.log_end()),
        "{report:?}"
    );
    let names = sim.list_dir(Path::new("/data/t-0")).unwrap();
    assert!(!names.iter().any(|n| n.ends_with(".prepared")), "{names:?}");
    // The sealed segments lost their zeros.
    let bases = log.segment_bases();
    for base in &bases[..bases.len() - 1] {
        let path = Path::new("/data/t-0").join(format!("{:020}.log", base.0));
        let data = sim.read_file(&path).unwrap();
        let mut pos = 0;
        while pos < data.len() {
            let total = laminar_records::peek_total_bytes(&data[pos..]).unwrap();
            assert!(total > 12, "{path:?} holds zeros at {pos} of {}", data.len());
            pos += total as usize;
        }
        assert_eq!(pos, data.len(), "{path:?} ends with its last batch");
    }

    // A power cut after a flush keeps everything flushed, and the rolled files under the
    // names the flusher gave them before it reported them durable.
    let mut j = 0u64;
    while log.segment_count() < 5 {
        let mut b = batch(3, 300, 9_000 + j as i64, 9_000 + j);
        log.append(&mut b).unwrap();
        j += 1;
    }
    log.flush().unwrap();
    let flushed = read_all(&log);
    drop(log);
    sim.crash(None);
    let log = open_log(sim.clone(), "/data/t-0", config, false);
    assert_eq!(read_all(&log), flushed);
    assert_eq!(log.segment_count(), 5);
}

/// An unused prepared file (made ahead, never rolled into) is removed by recovery, and one
/// whose first batch is damaged is not adopted among the older segments.
#[test]
fn recovery_removes_prepared_files_that_hold_no_batch() {
    let sim = SimStorage::new();
    let log = open_log(sim.clone(), "/data/t-0", config(), false);
    for i in 0..10u64 {
        let mut b = batch(2, 100, 1_000 + i as i64, i);
        log.append(&mut b).unwrap();
    }
    log.flush().unwrap();
    let before = read_all(&log);
    drop(log);
    let storage: Arc<dyn Storage> = sim.clone();
    // Made ahead and never used; and one whose first batch claims a base below the log's.
    storage
        .open(Path::new("/data/t-0/00000000000000000007.prepared"), true)
        .unwrap();
    let mut garbage = batch(1, 10, 5, 99);
    garbage[0..8].copy_from_slice(&3i64.to_be_bytes());
    sim.write_file_durably(Path::new("/data/t-0/00000000000000000008.prepared"), &garbage);
    let log = open_log(sim.clone(), "/data/t-0", config(), false);
    assert_eq!(read_all(&log), before);
    let names = sim.list_dir(Path::new("/data/t-0")).unwrap();
    assert!(!names.iter().any(|n| n.ends_with(".prepared")), "{names:?}");
}

/// DeleteRecords writes the new log start durably (a file, fsyncs and a rename) while the
/// log's appends go on: Kafka Streams deletes records of its repartition topics every 30 s
/// while it produces to them.
#[test]
fn delete_records_does_not_hold_up_appends() {
    let sim = SimStorage::new();
    let faulty = FaultyStorage::new(sim.clone());
    let log = open_log(faulty.clone(), "/data/t-0", config(), false);
    for i in 0..50u64 {
        let mut b = batch(2, 100, 1_000 + i as i64, i);
        log.append(&mut b).unwrap();
    }
    faulty.inject("/data/t-0", Fault::MetadataLatency(METADATA_STALL));
    let deleting = {
        let log = log.clone();
        std::thread::spawn(move || log.delete_records(laminar_storage::Offset(10)))
    };
    std::thread::sleep(Duration::from_millis(200));
    let mut worst = Duration::ZERO;
    for i in 0..20u64 {
        let mut b = batch(2, 100, 2_000 + i as i64, 100 + i);
        let t = Instant::now();
        log.append(&mut b).unwrap();
        worst = worst.max(t.elapsed());
    }
    let started = Instant::now();
    assert_eq!(deleting.join().unwrap().unwrap(), laminar_storage::Offset(10));
    faulty.clear();
    assert!(
        started.elapsed() > Duration::from_millis(500),
        "DeleteRecords was still writing the log start while the appends ran"
    );
    assert!(
        worst < APPEND_BOUND,
        "an append waited {worst:?} behind DeleteRecords"
    );
    assert_eq!(log.log_start(), laminar_storage::Offset(10));
}

/// A busy log's segments are allocated whole once its rate is known, and stay so: the file a
/// roll asks for at once is sized from the segment just sealed, not from the empty new one.
#[test]
fn a_busy_log_keeps_whole_segments() {
    let sim = SimStorage::new();
    // Segments of 1 MiB: one batch (about 850 B) in the new segment would look like a
    // gigabyte a minute to a rate measured over that segment alone.
    let config = LogConfig {
        segment_bytes: 1 << 20,
        preallocate_bytes: 16 << 10,
        ..small_config()
    };
    let store_config = StoreConfig {
        default_log: config.clone(),
        ..StoreConfig::default()
    };
    let store = Store::open(Path::new("/data"), sim.clone(), store_config).unwrap();
    let log = store.create_log(&LogId::new("busy", 0), config).unwrap();
    let mut i = 0u64;
    let mut segments = 1;
    while segments < 5 {
        let mut b = batch(2, 400, 1_000 + i as i64, i);
        log.append(&mut b).unwrap();
        i += 1;
        if i.is_multiple_of(8) {
            // Time for the preparer: a producer's pace, not a memory copy's.
            std::thread::sleep(Duration::from_millis(2));
        }
        if log.segment_count() > segments {
            // A roll asks for the next file at once: let the preparer make it while the new
            // segment is still empty, as it does at a producer's pace.
            segments = log.segment_count();
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(i < 100_000, "the log never rolled four times");
    }
    // The first segment held one 16 KiB step and rolled early; every later one but the
    // active segment was allocated whole and rolled at segment.bytes, none early.
    let bases = log.segment_bases();
    let sizes: Vec<u64> = bases.windows(2).map(|w| (w[1].0 - w[0].0) as u64).collect();
    let records_per_segment = sizes[1..].to_vec();
    assert!(
        records_per_segment.iter().all(|&n| n > sizes[0] * 4),
        "later segments are whole, not steps: records per segment {sizes:?}"
    );
    store.close().unwrap();
}
