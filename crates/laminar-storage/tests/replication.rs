//! What replication asks of a log: a follower's appends keep the leader's offsets and
//! epochs, the leader epoch cache answers as Kafka's does, and a log cut back to an offset
//! (a follower that diverged) loses exactly what follows it, also across a restart.

mod common;

use std::sync::Arc;

use common::*;
use laminar_records::{BatchBuilder, Compression, RecordSpec};
use laminar_storage::backend::{RealStorage, Storage};
use laminar_storage::{AppendMode, LogId, Offset, StorageError, Store, StoreConfig};

fn txn_batch(pid: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None, 1000)
        .producer(pid, 0, 0)
        .transactional();
    b.push(RecordSpec {
        timestamp_ms: 1000,
        key: Some(b"k".to_vec()),
        value: Some(vec![1u8; 50]),
        headers: vec![],
    });
    b.build().unwrap()
}

/// A store in a temporary directory with one log, `t-0`, of small segments.
fn store_with_one_log() -> (
    tempfile::TempDir,
    StoreConfig,
    LogId,
    Store,
    Arc<laminar_storage::Log>,
) {
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        default_log: small_config(),
        ..StoreConfig::default()
    };
    let id = LogId::new("t", 0);
    let store = Store::open(dir.path(), RealStorage::new(), config.clone()).unwrap();
    let log = store.create_log(&id, small_config()).unwrap();
    (dir, config, id, store, log)
}

#[test]
fn a_follower_keeps_its_leaders_offsets_and_epochs() {
    let storage: Arc<dyn Storage> = RealStorage::new();
    let dir = tempfile::tempdir().unwrap();
    let leader = open_log(
        storage.clone(),
        dir.path().join("leader").to_str().unwrap(),
        small_config(),
        false,
    );
    let follower = open_log(
        storage.clone(),
        dir.path().join("follower").to_str().unwrap(),
        small_config(),
        false,
    );
    for i in 0..30u64 {
        let epoch = if i < 12 { 3 } else { 5 };
        leader
            .append_as(&mut batch(3, 300, 1000, i), AppendMode::Leader { epoch })
            .unwrap();
    }
    assert_eq!(leader.epochs(), vec![(3, Offset(0)), (5, Offset(36))]);
    // What the leader sends, batch by batch, in two appends.
    let sent = read_all(&leader);
    for chunk in sent.chunks(17) {
        let mut bytes: Vec<u8> = chunk.iter().flat_map(|(_, b)| b.clone()).collect();
        let info = follower.append_as(&mut bytes, AppendMode::Replica).unwrap();
        assert_eq!(info.base_offset, Offset(chunk[0].0.base_offset));
    }
    let got = read_all(&follower);
    assert_eq!(got.len(), sent.len());
    for ((_, a), (_, b)) in sent.iter().zip(&got) {
        assert_eq!(a, b, "the follower's batches are the leader's, byte for byte");
    }
    assert_eq!(follower.epochs(), leader.epochs());
    assert_eq!(follower.end_offset_for_epoch(3), (3, 36));
    assert_eq!(follower.end_offset_for_epoch(4), (3, 36));
    assert_eq!(follower.end_offset_for_epoch(5), (5, 90));
    // A batch below the log end is refused, and the log is unchanged.
    let mut again = sent[3].1.clone();
    assert!(matches!(
        follower.append_as(&mut again, AppendMode::Replica),
        Err(StorageError::ReplicaOffsets { .. })
    ));
    assert_eq!(follower.log_end(), Offset(90));
    // A gap (compaction on the leader) is taken.
    let mut later = batch(2, 10, 1000, 99);
    later[..8].copy_from_slice(&95i64.to_be_bytes());
    later[12..16].copy_from_slice(&5i32.to_be_bytes());
    follower.append_as(&mut later, AppendMode::Replica).unwrap();
    assert_eq!(follower.log_end(), Offset(97));
}

#[test]
fn a_log_cut_back_loses_exactly_what_follows_and_stays_cut_after_a_restart() {
    let (dir, config, id, store, log) = store_with_one_log();
    let deferred = || {
        store
            .metrics()
            .rolls_deferred
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    for i in 0..40u64 {
        let epoch = if i < 25 { 1 } else { 2 };
        let before = deferred();
        log.append_as(&mut batch(2, 1200, 1000, i), AppendMode::Leader { epoch })
            .unwrap();
        // Under load the preparer can be behind: the roll is then deferred and the segment
        // grows (as it should), which would leave this test fewer segments than it cuts
        // across. Waiting for the next file puts the roll at the next append.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while deferred() > before && !log.next_segment_ready() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    // An open transaction past the cut: the stable offset stays below it until the cut.
    log.append_as(&mut txn_batch(9), AppendMode::Leader { epoch: 2 })
        .unwrap();
    log.flush().unwrap();
    assert!(
        log.segment_count() >= 3,
        "several segments: {}",
        log.segment_count()
    );
    assert_eq!(log.last_stable_offset(), Offset(80));
    let kept: Vec<Vec<u8>> = read_all(&log)
        .into_iter()
        .filter(|(h, _)| h.base_offset < 30)
        .map(|(_, b)| b)
        .collect();
    // Offset 31 is inside the batch at 30: the whole batch goes, as Kafka cuts.
    let cut = store.truncate_log(&id, Offset(31)).unwrap();
    assert_eq!(cut.log_end(), Offset(30));
    assert_eq!(
        cut.last_stable_offset(),
        Offset(30),
        "the open transaction went with its batch"
    );
    assert_eq!(cut.epochs(), vec![(1, Offset(0))], "epoch 2 began after the cut");
    let got: Vec<Vec<u8>> = read_all(&cut).into_iter().map(|(_, b)| b).collect();
    assert_eq!(got, kept);
    // The store serves the cut log, and appends go on from the cut.
    assert!(Arc::ptr_eq(&store.log(&id).unwrap(), &cut));
    let info = cut
        .append_as(&mut batch(1, 10, 1000, 77), AppendMode::Leader { epoch: 3 })
        .unwrap();
    assert_eq!(info.base_offset, Offset(30));
    store.close().unwrap();
    drop(store);
    let store = Store::open(dir.path(), RealStorage::new(), config).unwrap();
    let log = store.log(&id).unwrap();
    assert_eq!(log.log_end(), Offset(31));
    assert_eq!(log.epochs(), vec![(1, Offset(0)), (3, Offset(30))]);
    let got: Vec<Vec<u8>> = read_all(&log)
        .into_iter()
        .take(kept.len())
        .map(|(_, b)| b)
        .collect();
    assert_eq!(got, kept);
}

#[test]
fn a_log_emptied_to_start_again_at_its_leaders_start_takes_the_leaders_next_batch() {
    let (dir, config, id, store, log) = store_with_one_log();
    for i in 0..10u64 {
        log.append_as(&mut batch(2, 1200, 1000, i), AppendMode::Leader { epoch: 1 })
            .unwrap();
    }
    log.flush().unwrap();
    // The leader has deleted everything below 500 meanwhile: this follower starts there.
    let emptied = store.reset_log(&id, Offset(500)).unwrap();
    assert_eq!(
        (emptied.log_start(), emptied.log_end()),
        (Offset(500), Offset(500))
    );
    assert!(read_all(&emptied).is_empty());
    assert!(Arc::ptr_eq(&store.log(&id).unwrap(), &emptied));
    let mut next = batch(2, 10, 1000, 99);
    next[..8].copy_from_slice(&500i64.to_be_bytes());
    next[12..16].copy_from_slice(&4i32.to_be_bytes());
    let info = emptied.append_as(&mut next, AppendMode::Replica).unwrap();
    assert_eq!(info.base_offset, Offset(500));
    emptied.flush().unwrap();
    store.close().unwrap();
    drop(store);
    // And so it stays across a restart.
    let store = Store::open(dir.path(), RealStorage::new(), config).unwrap();
    let log = store.log(&id).unwrap();
    assert_eq!((log.log_start(), log.log_end()), (Offset(500), Offset(502)));
    assert_eq!(log.end_offset_for_epoch(4), (4, 502));
    assert_eq!(read_all(&log).len(), 1);
}

#[test]
fn an_epoch_begun_without_records_is_forgotten_and_one_with_records_is_kept() {
    let (_dir, _config, _id, _store, log) = store_with_one_log();
    for i in 0..3u64 {
        log.append_as(&mut batch(2, 100, 1000, i), AppendMode::Leader { epoch: 1 })
            .unwrap();
    }
    // Led at epoch 2 without appending (then it became a follower).
    log.begin_epoch(2).unwrap();
    assert_eq!(log.latest_epoch(), Some(2));
    assert!(log.forget_empty_epochs().unwrap());
    assert_eq!(log.epochs(), vec![(1, Offset(0))]);
    assert!(!log.forget_empty_epochs().unwrap(), "nothing more to forget");
    assert_eq!(log.end_offset_for_epoch(1), (1, 6));
}

/// Issue 29 (the whole rotation's loss after a power cut of all brokers): a follower that cut
/// its log back (it had led an epoch the new leader does not have) and replicated the new
/// leader's batches over the cut, with other batch boundaries, then was killed, restarted and
/// replicated more, keeps every record it flushed across a power cut. It did not: the close
/// before the cut synced the offset index of the old layout; the reopened log rewrote the
/// index without syncing it, and the power cut brought the old entries back, under a
/// checkpoint that vouched for bytes past them. Recovery walked from an old entry into the
/// middle of a new batch and cut the log there (45 of 185 records kept). The records'
/// timestamps rise, as a producer's do: only then is there a time index, and recovery starts
/// from the last offset entry instead of the segment's start.
#[test]
fn a_log_cut_back_and_replicated_over_keeps_what_it_flushed_across_a_power_cut() {
    use std::path::Path;
    let (sim, config, id, store, log) = sim_log(0);
    // Led epoch 1: single-record batches, flushed (and checkpointed) as they went.
    for i in 0..60u64 {
        log.append_as(
            &mut batch(1, 100, 1000 + i as i64, i),
            AppendMode::Leader { epoch: 1 },
        )
        .unwrap();
        if i % 10 == 9 {
            log.flush().unwrap();
        }
    }
    // The new leader's epoch 2 began at 25: cut back there, then replicate its batches,
    // twenty records each.
    let cut = store.truncate_log(&id, Offset(25)).unwrap();
    assert_eq!(cut.log_end(), Offset(25));
    let mut sent = Vec::new();
    for k in 0..5u64 {
        let mut b = batch(20, 100, 2000, 100 + k);
        b[..8].copy_from_slice(&(25 + 20 * k as i64).to_be_bytes());
        b[12..16].copy_from_slice(&2i32.to_be_bytes());
        sent.push(b.clone());
        cut.append_as(&mut b, AppendMode::Replica).unwrap();
        cut.flush().unwrap();
    }
    assert_eq!(cut.log_end(), Offset(125));
    // A SIGKILL (the page cache stays), a restart, and more of the leader's batches.
    drop(cut);
    drop(log);
    drop(store);
    let store = Store::open(Path::new("/data"), sim.clone(), config.clone()).unwrap();
    let cut = store.log(&id).unwrap();
    assert_eq!(cut.log_end(), Offset(125));
    for k in 0..3u64 {
        let mut b = batch(20, 100, 3000, 200 + k);
        b[..8].copy_from_slice(&(125 + 20 * k as i64).to_be_bytes());
        b[12..16].copy_from_slice(&2i32.to_be_bytes());
        cut.append_as(&mut b, AppendMode::Replica).unwrap();
        cut.flush().unwrap();
    }
    let kept_before: Vec<Vec<u8>> = read_all(&cut).into_iter().map(|(_, b)| b).collect();
    // The power goes: what was flushed must all be there again.
    sim.crash(None);
    drop(store);
    let store = Store::open(Path::new("/data"), sim.clone(), config).unwrap();
    let log = store.log(&id).unwrap();
    assert_eq!(log.log_end(), Offset(185), "every flushed record survives");
    let got: Vec<Vec<u8>> = read_all(&log).into_iter().map(|(_, b)| b).collect();
    assert_eq!(got, kept_before);
}

/// The index files of a cut segment hold, durably, no entry past the cut: recovery after
/// the cut rewrote them and synced the rewrite (mutation: not synced, and the entries of the
/// old layout stay on the disk).
#[test]
fn a_cut_leaves_no_index_entry_past_it_on_the_disk() {
    use laminar_storage::index::{decode_valid_prefix, OffsetEntry};
    use std::path::Path;
    let (sim, _, id, store, log) = sim_log(1000);
    for i in 0..60u64 {
        log.append_as(
            &mut batch(1, 100, 1000 + i as i64, i),
            AppendMode::Leader { epoch: 1 },
        )
        .unwrap();
    }
    let index = Path::new("/data")
        .join(id.dir_name())
        .join("00000000000000000000.index");
    let cut = store.truncate_log(&id, Offset(25)).unwrap();
    let cut_position = read_all(&cut).iter().map(|(_, b)| b.len() as u32).sum::<u32>();
    let durable = decode_valid_prefix::<OffsetEntry>(&sim.read_durable_file(&index).unwrap_or_default());
    assert!(!durable.is_empty(), "the entries below the cut are kept");
    assert!(
        durable
            .iter()
            .all(|e| e.relative_offset < 25 && e.position < cut_position),
        "no durable entry past the cut at {cut_position}: {durable:?}"
    );
}

/// Recovery never follows an index entry that does not name the batch at its position: an
/// index file that disagrees with its segment (here an entry moved into the middle of a
/// batch, synced, with a checkpoint past it) is rebuilt from the segment, and the log keeps
/// every record (mutation: without the check, the walk reads a record's bytes as a batch
/// header and cuts the log there).
#[test]
fn recovery_never_follows_an_index_entry_into_the_middle_of_a_batch() {
    use laminar_storage::index::{decode_valid_prefix, encode_entries, OffsetEntry};
    use std::path::Path;
    let (sim, config, id, store, log) = sim_log(0);
    for i in 0..40u64 {
        log.append_as(
            &mut batch(5, 100, 1000 + 10 * i as i64, i),
            AppendMode::Leader { epoch: 1 },
        )
        .unwrap();
        log.flush().unwrap();
    }
    let written: Vec<Vec<u8>> = read_all(&log).into_iter().map(|(_, b)| b).collect();
    let dir = Path::new("/data").join(id.dir_name());
    let index = dir.join("00000000000000000000.index");
    // The index as the disk keeps it, its last entry moved 40 bytes on: inside its batch.
    log.close().unwrap();
    let mut entries = decode_valid_prefix::<OffsetEntry>(&sim.read_file(&index).unwrap());
    assert!(entries.len() >= 2, "the log has index entries: {entries:?}");
    entries.last_mut().unwrap().position += 40;
    sim.write_file_durably(&index, &encode_entries(&entries));
    // The store is not closed: recovery trusts the recovery point, and the index with it.
    sim.crash(None);
    drop((log, store));
    let store = Store::open(Path::new("/data"), sim.clone(), config).unwrap();
    let log = store.log(&id).unwrap();
    let report = log.recovery_report();
    assert!(!report.clean, "{report:?}");
    assert_eq!(log.log_end(), Offset(200), "{report:?}");
    let got: Vec<Vec<u8>> = read_all(&log).into_iter().map(|(_, b)| b).collect();
    assert_eq!(got, written);
    assert_eq!(report.indexes_rebuilt, 1, "{report:?}");
}

/// A store on the simulated disk, with one log `t-0` of one big segment, checkpointed at
/// most every `checkpoint_interval_ms`.
fn sim_log(
    checkpoint_interval_ms: u64,
) -> (
    Arc<laminar_storage::backend::SimStorage>,
    StoreConfig,
    LogId,
    Store,
    Arc<laminar_storage::Log>,
) {
    let sim = laminar_storage::backend::SimStorage::new();
    let config = StoreConfig {
        default_log: laminar_storage::LogConfig {
            segment_bytes: 1 << 20,
            checkpoint_interval_ms,
            ..small_config()
        },
        ..StoreConfig::default()
    };
    let id = LogId::new("t", 0);
    let store = Store::open(std::path::Path::new("/data"), sim.clone(), config.clone()).unwrap();
    let log = store.create_log(&id, config.default_log.clone()).unwrap();
    (sim, config, id, store, log)
}
