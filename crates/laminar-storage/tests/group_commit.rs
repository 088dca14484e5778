//! Group commit: a durability waiter completes only when an fsync that started after its
//! append has finished, and by then its bytes are durable. Appends go on while an fsync
//! runs, and the next fsync covers them.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use laminar_storage::backend::{Fault, FaultyStorage, SimStorage};
use laminar_storage::{Log, LogConfig, LogId, Store, StoreConfig};

const TIMEOUT: Duration = Duration::from_secs(20);

/// Opens every gate when the test ends, passing or failing, so that the store's flusher
/// threads (joined when it drops) are never left waiting at one.
struct OpenGatesAtEnd(Arc<FaultyStorage>);

impl Drop for OpenGatesAtEnd {
    fn drop(&mut self) {
        self.0.clear();
        self.0.release_syncs(u64::MAX / 2);
    }
}

/// A simulated store with one log, `t-0`, whose files are wrapped by a fault injector, and
/// no checkpoint during the test (its writes would be fsyncs the test did not expect).
fn gated_store(
    flush_threads: usize,
) -> (
    Arc<SimStorage>,
    Arc<FaultyStorage>,
    Store,
    OpenGatesAtEnd,
    Arc<Log>,
) {
    let sim = SimStorage::new();
    let faulty = FaultyStorage::new(sim.clone());
    let config = StoreConfig {
        flush_threads,
        default_log: LogConfig {
            checkpoint_interval_ms: 3_600_000,
            ..small_config()
        },
        ..StoreConfig::default()
    };
    let store = Store::open(Path::new("/data"), faulty.clone(), config.clone()).unwrap();
    let gates = OpenGatesAtEnd(faulty.clone());
    let log = store.create_log(&LogId::new("t", 0), config.default_log).unwrap();
    (sim, faulty, store, gates, log)
}

#[test]
fn waiters_complete_only_after_an_fsync_that_covers_them() {
    let (sim, faulty, store, gates, log) = gated_store(2);
    let data_file = Path::new("/data/t-0/00000000000000000000.log");
    faulty.inject(data_file, Fault::GatedSyncs);

    let mut a = batch(3, 100, 1_000, 1);
    let a_info = log.append(&mut a).unwrap();
    let wait_a = log.wait_flushed(a_info.last_offset);
    // The fsync that covers A is now in flight, held at the gate.
    assert!(
        faulty.wait_syncs_started(1, TIMEOUT),
        "a durability waiter starts an fsync"
    );

    // B is appended while that fsync runs: appends never wait for a flush.
    let mut b = batch(2, 100, 2_000, 2);
    let b_info = log.append(&mut b).unwrap();
    let wait_b = log.wait_flushed(b_info.last_offset);
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        wait_a.wait_timeout(Duration::ZERO).is_none(),
        "A completed before its fsync returned"
    );
    assert!(
        wait_b.wait_timeout(Duration::ZERO).is_none(),
        "B completed with no fsync at all"
    );

    faulty.release_syncs(1);
    wait_a.wait_timeout(TIMEOUT).expect("A completes").unwrap();
    let durable = sim.read_durable_file(data_file).unwrap();
    assert!(
        durable.len() >= a.len() && durable[..a.len()] == a[..],
        "A is durable when it completes"
    );
    // The fsync that just returned started before B was appended, so it cannot cover B.
    assert!(
        wait_b.wait_timeout(Duration::from_millis(100)).is_none(),
        "B completed by an fsync that started before its append"
    );

    // The waiter that arrived during the first fsync gets the next one at once.
    assert!(
        faulty.wait_syncs_started(2, TIMEOUT),
        "a second fsync starts for B"
    );
    faulty.release_syncs(1);
    wait_b.wait_timeout(TIMEOUT).expect("B completes").unwrap();
    let durable = sim.read_durable_file(data_file).unwrap();
    let both = [&a[..], &b[..]].concat();
    assert!(
        durable.len() >= both.len() && durable[..both.len()] == both[..],
        "B is durable when it completes"
    );

    drop(gates);
    store.close().unwrap();
}

#[test]
fn one_fsync_completes_every_waiter_it_covers() {
    let (_sim, faulty, store, gates, log) = gated_store(1);
    faulty.inject("/data/t-0/00000000000000000000.log", Fault::GatedSyncs);

    let mut first = batch(1, 10, 1, 0);
    let first_wait = log.wait_flushed(log.append(&mut first).unwrap().last_offset);
    assert!(faulty.wait_syncs_started(1, TIMEOUT));
    // Ten appends while the first fsync is held: the next single fsync covers all of them.
    let waits: Vec<_> = (0..10)
        .map(|i| {
            let mut b = batch(2, 50, 10 + i, 10 + i as u64);
            let info = log.append(&mut b).unwrap();
            log.wait_flushed(info.last_offset)
        })
        .collect();
    faulty.release_syncs(1);
    first_wait
        .wait_timeout(TIMEOUT)
        .expect("first completes")
        .unwrap();
    assert!(faulty.wait_syncs_started(2, TIMEOUT));
    faulty.release_syncs(1);
    for w in &waits {
        w.wait_timeout(TIMEOUT).expect("completes").unwrap();
    }
    // Two data fsyncs in all: group commit, not one per append.
    assert!(
        !faulty.wait_syncs_started(3, Duration::from_millis(200)),
        "the ten waiters took more than one fsync"
    );
    drop(gates);
    store.close().unwrap();
}

/// Requests for a flush made while a flusher thread is flushing the log wake no other
/// thread: the flushing one looks again when its fsync is done. None of them is left for the
/// idle pass (200 ms later): with 1 ms fsyncs and three writers each waiting for its own
/// append to be durable, nine in ten waits end within 60 ms (a lost request waits ~200 ms).
#[test]
fn requests_made_during_a_flush_are_taken_by_the_flushing_thread() {
    let (_sim, faulty, store, gates, log) = gated_store(2);
    faulty.inject(
        "/data/t-0/00000000000000000000.log",
        Fault::SyncLatency(Duration::from_millis(1)),
    );
    let writers: Vec<_> = (0..3u64)
        .map(|w| {
            let log = log.clone();
            std::thread::spawn(move || {
                (0..150u64)
                    .map(|i| {
                        let mut b = batch(1, 20, 1, w * 1_000 + i);
                        let info = log.append(&mut b).unwrap();
                        let started = std::time::Instant::now();
                        log.wait_flushed(info.last_offset)
                            .wait_timeout(TIMEOUT)
                            .expect("durable")
                            .unwrap();
                        started.elapsed()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut waits: Vec<Duration> = writers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    waits.sort();
    let p90 = waits[waits.len() * 9 / 10];
    assert!(
        p90 < Duration::from_millis(60),
        "p90 of the waits {p90:?} (max {:?}): flush requests left for the idle pass",
        waits.last().unwrap()
    );
    drop(gates);
    store.close().unwrap();
}

/// The checkpoint file lags the fsyncs (it is rewritten at most every
/// `checkpoint_interval_ms`), and the active segment's index is written only with it. A crash
/// then finds data durable past the checkpoint, index files behind the data, and a torn
/// unsynced tail: recovery keeps every acknowledged record, rebuilds the index, and cuts the
/// torn end.
#[test]
fn recovery_after_fsyncs_past_a_stale_checkpoint_keeps_every_acknowledged_record() {
    for seed in 0..8u64 {
        let sim = SimStorage::new();
        let config = StoreConfig {
            flush_threads: 2,
            default_log: LogConfig {
                segment_bytes: 16 << 10,
                checkpoint_interval_ms: 3_600_000,
                ..small_config()
            },
            ..StoreConfig::default()
        };
        let store = Store::open(Path::new("/data"), sim.clone(), config.clone()).unwrap();
        let log = store
            .create_log(&LogId::new("t", 0), config.default_log.clone())
            .unwrap();
        let mut acked = Vec::new();
        // At least 60 batches, and on until the log has rolled twice: a preparer starved of
        // CPU lets the active segment grow past `segment_bytes` for a while (append.rs).
        for i in 0u64.. {
            if i >= 60 && log.segment_count() > 2 {
                break;
            }
            assert!(i < 5_000, "the log never rolled twice");
            let mut b = batch(1 + (i % 4) as usize, 200, i as i64, seed * 1000 + i);
            let info = log.append(&mut b).unwrap();
            log.wait_flushed(info.last_offset)
                .wait_timeout(TIMEOUT)
                .expect("flushed")
                .unwrap();
            acked.push((info.base_offset, b));
        }
        assert!(log.segment_count() > 2, "the test spans rolled segments");
        // Not acknowledged: may be torn or lost.
        for i in 0..5u64 {
            let mut b = batch(3, 300, 100 + i as i64, seed * 1000 + 500 + i);
            log.append(&mut b).unwrap();
        }
        let checkpoint = laminar_storage::checkpoint::read(sim.as_ref(), Path::new("/data/t-0"))
            .map(|c| c.point)
            .expect("a checkpoint was written at open");
        assert!(
            checkpoint.next_offset < acked.last().unwrap().0,
            "the checkpoint lags the fsyncs in this test"
        );
        sim.crash(Some(seed));
        drop(log);
        drop(store);

        let store = Store::open(Path::new("/data"), sim.clone(), config).unwrap();
        let log = store.log(&LogId::new("t", 0)).unwrap();
        assert!(
            log.recovery_report().validated_bytes > 0,
            "recovery scanned past the checkpoint"
        );
        let all = read_all(&log);
        for (base, bytes) in &acked {
            let found = all
                .iter()
                .find(|(h, _)| h.base_offset == base.0)
                .unwrap_or_else(|| panic!("seed {seed}: acknowledged batch at {base} lost"));
            assert_eq!(&found.1, bytes, "seed {seed}: batch at {base} changed");
        }
        store.close().unwrap();
    }
}
