//! Acceptance 3 and 4: every offset a durability waiter was told is flushed survives a
//! crash. First with the simulated backend, whose crash drops everything not synced (and
//! keeps a random torn part of the rest); then with a real child process killed by SIGKILL.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use laminar_storage::backend::{Fault, FaultyStorage, RealStorage, SimStorage, Storage};
use laminar_storage::{LogConfig, LogId, Offset, Store, StoreConfig};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn store_config() -> StoreConfig {
    StoreConfig {
        flush_threads: 2,
        default_log: LogConfig {
            segment_bytes: 64 << 10,
            ..small_config()
        },
        ..StoreConfig::default()
    }
}

/// Batches are derived from their partition and base offset, so a reader can check any
/// batch it finds without having been told about it.
fn batch_for(partition: u32, base: i64) -> Vec<u8> {
    batch(
        1 + (base % 7) as usize,
        50 + (base % 97) as usize,
        base,
        (partition as u64) << 40 | base as u64,
    )
}

fn check_batches(store: &Store, partitions: u32, acked: &[(u32, Offset)], what: &str) {
    for p in 0..partitions {
        let log = store.log(&LogId::new("t", p)).unwrap();
        let all = read_all(&log);
        for (h, bytes) in &all {
            let expect = batch_for(p, h.base_offset);
            assert_eq!(
                payload(bytes),
                payload(&expect),
                "{what}: partition {p} batch {} corrupt",
                h.base_offset
            );
        }
        let end = log.log_end();
        for (_, o) in acked.iter().filter(|(ap, _)| *ap == p) {
            assert!(
                *o < end,
                "{what}: acknowledged offset {o} of partition {p} lost (log end {end})"
            );
        }
    }
}

#[test]
fn acknowledged_flushes_survive_simulated_crashes() {
    let partitions = 3u32;
    for round in 0..12u64 {
        let sim = SimStorage::new();
        // Slow syncs widen the window in which appends race with a flush.
        let faulty = FaultyStorage::new(sim.clone());
        faulty.inject("/data", Fault::SyncLatency(Duration::from_micros(300)));
        let store = Store::open(Path::new("/data"), faulty.clone(), store_config()).unwrap();
        for p in 0..partitions {
            store
                .create_log(&LogId::new("t", p), store_config().default_log)
                .unwrap();
        }
        let store = Arc::new(store);
        let acked = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..partitions)
            .map(|p| {
                let (store, acked, stop) = (store.clone(), acked.clone(), stop.clone());
                std::thread::spawn(move || {
                    let log = store.log(&LogId::new("t", p)).unwrap();
                    let mut rng = SmallRng::seed_from_u64(round * 31 + p as u64);
                    while !stop.load(Ordering::Relaxed) {
                        let mut b = batch_for(p, log.log_end().0);
                        let Ok(info) = log.append(&mut b) else { return };
                        if rng.gen_bool(0.3) {
                            // Told flushed only if the wait returns Ok before the crash.
                            if let Ok(end) = log.wait_flushed(info.last_offset).wait() {
                                assert!(end > info.last_offset);
                                acked.lock().unwrap().push((p, info.last_offset));
                            }
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(150 + 20 * round));
        sim.crash(Some(round));
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
        let acked = acked.lock().unwrap().clone();
        assert!(!acked.is_empty(), "round {round}: the test acknowledged nothing");
        drop(store);
        let store = Store::open(Path::new("/data"), sim.clone(), store_config()).unwrap();
        assert!(!store.opened_clean());
        check_batches(&store, partitions, &acked, &format!("round {round}"));
    }
}

const CHILD_ENV: &str = "LAMINAR_SIGKILL_CHILD_DIR";

/// The child: appends forever to a real store, printing each offset a waiter was told is
/// flushed. It never returns; the parent kills it.
fn child(dir: &str) -> ! {
    let store = Store::open(Path::new(dir), RealStorage::new(), store_config()).unwrap();
    let id = LogId::new("t", 0);
    let log = match store.log(&id) {
        Some(l) => l,
        None => store.create_log(&id, store_config().default_log).unwrap(),
    };
    println!("ready {}", log.log_end());
    let mut n = 0u64;
    loop {
        let mut b = batch_for(0, log.log_end().0);
        let info = log.append(&mut b).unwrap();
        n += 1;
        if n.is_multiple_of(5) {
            log.wait_flushed(info.last_offset).wait().unwrap();
            println!("flushed {}", info.last_offset);
        }
    }
}

#[test]
fn sigkill_during_appends_keeps_everything_reported_flushed() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        child(&dir);
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir: PathBuf = tmp.path().join("data");
    let mut acked = Vec::new();
    for round in 0..3 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "sigkill_during_appends_keeps_everything_reported_flushed",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let started = Instant::now();
        let mut flushed_here = 0;
        while let Some(Ok(line)) = lines.next() {
            if let Some(o) = line.strip_prefix("flushed ") {
                acked.push((0u32, Offset(o.trim().parse().unwrap())));
                flushed_here += 1;
            }
            if flushed_here >= 200 || started.elapsed() > Duration::from_secs(20) {
                break;
            }
        }
        // SIGKILL mid-append: no chance to flush, close or write the clean marker.
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(flushed_here > 0, "round {round}: the child reported nothing");
        let store = Store::open(&dir, RealStorage::new() as Arc<dyn Storage>, store_config()).unwrap();
        assert!(!store.opened_clean());
        check_batches(&store, 1, &acked, &format!("sigkill round {round}"));
        drop(store);
    }
}
