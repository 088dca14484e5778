//! DeleteRecords: the log start offset moves into a segment, the segments wholly below it
//! go, reads below it fail, and the new start survives a crash (it is durable before
//! `delete_records` returns); retention never moves it back.

mod common;

use common::*;
use laminar_storage::backend::{SimStorage, Storage};
use laminar_storage::{Offset, StorageError};

#[test]
fn delete_records_moves_the_start_durably_and_drops_whole_segments() {
    let sim = SimStorage::new();
    let storage: std::sync::Arc<dyn Storage> = sim.clone();
    let log = open_log(storage.clone(), "/data/t-0", small_config(), false);
    for i in 0..200u64 {
        let mut b = batch(1, 500, i as i64, i);
        log.append(&mut b).unwrap();
    }
    let segments_before = log.segment_count();
    assert!(segments_before > 3, "the test spans several segments");
    let end = log.log_end();

    assert!(matches!(
        log.delete_records(Offset(end.0 + 1)),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    assert_eq!(
        log.delete_records(Offset(0)).unwrap(),
        Offset(0),
        "nothing below 0"
    );

    // 137 is inside a segment: the segments wholly below it go, the one holding it stays.
    assert_eq!(log.delete_records(Offset(137)).unwrap(), Offset(137));
    assert_eq!(log.log_start(), Offset(137));
    assert!(
        log.segment_count() < segments_before,
        "whole segments below 137 were removed"
    );
    assert!(matches!(
        log.read(Offset(136), 1 << 20, true),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    let read = log.read(Offset(137), 1 << 20, true).unwrap();
    assert!(read.range.is_some(), "137 and after are still read");
    assert_eq!(
        log.delete_records(Offset(100)).unwrap(),
        Offset(137),
        "the start never moves back"
    );

    // The data is flushed; the crash then keeps exactly what was made durable, and the start
    // is where DeleteRecords put it, not the first remaining segment's base.
    log.flush().unwrap();
    sim.crash(None);
    drop(log);
    let log = open_log(storage.clone(), "/data/t-0", small_config(), false);
    assert_eq!(log.log_start(), Offset(137), "the new start survived the crash");
    assert_eq!(log.log_end(), end);

    // Retention that drops a segment keeps the start where DeleteRecords put it, or moves it
    // on to the next segment's base, never back.
    let config = laminar_storage::LogConfig {
        retention_bytes: Some(1),
        ..small_config()
    };
    log.set_config(config).unwrap();
    log.apply_retention(laminar_storage::now_ms()).unwrap();
    assert!(log.log_start() >= Offset(137));
    assert_eq!(log.segment_count(), 1, "retention left only the active segment");
}

/// A scan of the recent history (a new leader rebuilding its producers' state) starts at the
/// log start when DeleteRecords moved it into the active segment, not at the segment's base,
/// which is out of range then: a leader that read from there could not lead.
#[test]
fn the_recent_history_starts_at_the_log_start() {
    let storage: std::sync::Arc<dyn Storage> = SimStorage::new();
    let log = open_log(storage, "/data/t-0", small_config(), false);
    for i in 0..5u64 {
        let mut b = batch(1, 100, i as i64, i);
        log.append(&mut b).unwrap();
    }
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.recent_offset(u64::MAX), Offset(0));
    log.delete_records(Offset(3)).unwrap();
    let from = log.recent_offset(u64::MAX);
    assert_eq!(from, Offset(3));
    assert!(log.read(from, 1 << 20, true).unwrap().range.is_some());
}

/// The recent history reaches back across a roll: a leader that rebuilds its producers'
/// state from it right after a roll must see the batches of the segment before (from the
/// active segment alone, it saw none of a producer whose last batches were there, answered
/// its retry UNKNOWN_PRODUCER_ID, and librdkafka re-sent the batch under a bumped epoch).
#[test]
fn the_recent_history_reaches_back_across_a_roll() {
    let storage: std::sync::Arc<dyn Storage> = SimStorage::new();
    let log = three_segments(storage, "/data/t-0", small_config());
    let active_base = *log.segment_bases().last().unwrap();
    // A little more than the active segment holds: the scan starts in the segment before.
    let recent = log.recent_offset(48 << 10);
    assert!(
        recent < active_base,
        "{recent:?} is in an earlier segment than the active one at {active_base:?}"
    );
    assert_eq!(log.recent_offset(u64::MAX), Offset(0));

    // A compacted log keeps to its active segment: the cleaner may have taken a producer's
    // last batches out of the ones before.
    let storage: std::sync::Arc<dyn Storage> = SimStorage::new();
    let compacted = laminar_storage::LogConfig {
        cleanup_compact: true,
        ..small_config()
    };
    let log = three_segments(storage, "/data/c-0", compacted);
    let active_base = *log.segment_bases().last().unwrap();
    assert_eq!(log.recent_offset(48 << 10), active_base);
}

/// A log in `dir` with small batches appended until it has three segments.
fn three_segments(
    storage: std::sync::Arc<dyn Storage>,
    dir: &str,
    config: laminar_storage::LogConfig,
) -> std::sync::Arc<laminar_storage::Log> {
    let log = open_log(storage, dir, config, false);
    let mut i = 0u64;
    while log.segment_count() < 3 {
        let mut b = batch(1, 100, i as i64, i);
        log.append(&mut b).unwrap();
        i += 1;
    }
    log
}
