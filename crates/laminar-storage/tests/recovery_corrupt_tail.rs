//! Acceptance 2, after Kafka's `LogLoaderTest.testCorruptLog`: 1,000 seeded cases that
//! truncate or garble the tail of the active segment and of its indexes, then reopen the
//! log as after a crash. Recovery must keep every batch before the first damaged byte and
//! must never return a damaged batch. Each failure prints its seed.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use laminar_storage::backend::{SimStorage, Storage};
use laminar_storage::{LogConfig, Offset};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const CASES: u64 = 1000;

#[derive(Debug, Clone, Copy)]
enum DataDamage {
    Truncate,
    Garble,
    AppendGarbage,
    ZeroTail,
}

fn segment_files(sim: &SimStorage, dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = sim
        .list_dir(dir)
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(suffix))
        .map(|n| dir.join(n))
        .collect();
    v.sort();
    v
}

fn run_case(seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let sim = SimStorage::new();
    let dir = PathBuf::from("/data/t-0");
    let config = LogConfig {
        preallocate_bytes: if rng.gen_bool(0.5) { 4 << 10 } else { 0 },
        index_interval_bytes: rng.gen_range(64..2048),
        ..small_config()
    };
    let log = open_log(sim.clone(), "/data/t-0", config.clone(), false);

    // Append, flushing at a random point so the recovery point can fall anywhere.
    let batches = rng.gen_range(5..120);
    let flush_after = rng.gen_range(0..=batches);
    let mut appended = Vec::new();
    for i in 0..batches {
        let mut b = batch(
            rng.gen_range(1..12),
            rng.gen_range(0..400),
            1000 + 10 * i as i64,
            seed * 1000 + i as u64,
        );
        log.append(&mut b).unwrap();
        appended.push(b);
        if i + 1 == flush_after {
            log.flush().unwrap();
        }
    }
    let flushed_end = log.flushed_end();
    let active_base = log.segment_bases().last().unwrap().0;
    // The active segment's file, under its base offset's name or, if the flusher has not
    // renamed it since its roll, under the name it was prepared with.
    let active = segment_files(&sim, &dir, ".log")
        .into_iter()
        .chain(segment_files(&sim, &dir, ".prepared"))
        .find(|p| {
            p.file_stem().unwrap().to_str().unwrap().parse() == Ok(active_base)
                || sim
                    .read_file(p)
                    .is_some_and(|d| d.len() >= 8 && d[..8] == active_base.to_be_bytes())
        })
        .unwrap();
    // The recovery point's position in the active segment, if it lies there: damage is only
    // ever done after it, as a crash only ever damages what was not yet synced.
    let rp = laminar_storage::checkpoint::read(sim.as_ref(), &dir).map(|c| c.point);
    let protected = match rp {
        Some(rp) if rp.segment_base.0 == active_base => rp.position.0 as usize,
        _ => 0,
    };
    drop(log); // no close: this is a crash

    let mut data = sim.read_file(&active).unwrap();
    let real_end: usize = {
        // Where the appended batches of the active segment end.
        let mut end = 0;
        for b in &appended {
            let base = i64::from_be_bytes(b[0..8].try_into().unwrap());
            if base >= active_base {
                end += b.len();
            }
        }
        end
    };
    let damage = [
        DataDamage::Truncate,
        DataDamage::Garble,
        DataDamage::AppendGarbage,
        DataDamage::ZeroTail,
    ][rng.gen_range(0..4)];
    let mut first_bad = usize::MAX;
    let lo = protected.min(real_end);
    match damage {
        DataDamage::Truncate => {
            let at = rng.gen_range(lo..=real_end);
            data.truncate(at);
            first_bad = at;
        }
        DataDamage::Garble => {
            if real_end > lo {
                let at = rng.gen_range(lo..real_end);
                let n = rng.gen_range(1..=16).min(real_end - at);
                for i in 0..n {
                    data[at + i] ^= rng.gen_range(1..=255u8);
                }
                first_bad = at;
            }
        }
        DataDamage::AppendGarbage => {
            data.truncate(real_end);
            let n = rng.gen_range(1..300);
            data.extend((0..n).map(|_| rng.gen::<u8>()));
        }
        DataDamage::ZeroTail => {
            data.truncate(real_end);
            data.resize(real_end + rng.gen_range(1..9000), 0);
        }
    }
    sim.write_file_durably(&active, &data);

    // Damage the active segment's indexes too: truncate, garble, or remove.
    for suffix in [".index", ".timeindex"] {
        let path = active.with_extension(&suffix[1..]);
        if let Some(mut bytes) = sim.read_file(&path) {
            match rng.gen_range(0..4) {
                0 if !bytes.is_empty() => bytes.truncate(rng.gen_range(0..bytes.len())),
                1 if !bytes.is_empty() => {
                    let at = rng.gen_range(0..bytes.len());
                    bytes[at] ^= rng.gen_range(1..=255u8);
                }
                2 => {
                    sim.remove_file(&path).unwrap();
                    continue;
                }
                _ => {}
            }
            sim.write_file_durably(&path, &bytes);
        }
    }

    let log = open_log(sim.clone(), "/data/t-0", config, false);
    let stored = read_all(&log); // panics if any returned batch is damaged
    assert!(log.log_end() >= flushed_end, "seed {seed}: flushed data was lost");

    // Every batch that ends before the first damaged byte survives unchanged; any batch
    // after it that survived differs at most in fields outside the CRC (the leader epoch),
    // and is otherwise the batch that was appended.
    let mut pos_in_active = 0usize;
    for (i, b) in appended.iter().enumerate() {
        let base = i64::from_be_bytes(b[0..8].try_into().unwrap());
        let intact_before_damage = base < active_base || pos_in_active + b.len() <= first_bad;
        if base >= active_base {
            pos_in_active += b.len();
        }
        match stored.get(i) {
            Some((_, s)) => {
                assert_eq!(payload(s), payload(b), "seed {seed}: batch {i} changed");
                assert_eq!(s[0..8], b[0..8], "seed {seed}: batch {i} moved");
            }
            None => assert!(
                !intact_before_damage,
                "seed {seed} {damage:?}: batch {i} at offset {base} was lost"
            ),
        }
    }
    assert!(
        stored.len() <= appended.len(),
        "seed {seed}: recovery invented batches"
    );

    // The recovered log keeps working, and reopening it again changes nothing.
    let mut b = batch(3, 20, 99_999, seed);
    let info = log.append(&mut b).unwrap();
    assert_eq!(
        info.base_offset,
        Offset(stored.last().map_or(0, |(h, _)| h.next_offset()))
    );
    log.close().unwrap();
    drop(log);
    let log = open_log(sim, "/data/t-0", small_config(), true);
    assert_eq!(read_all(&log).len(), stored.len() + 1, "seed {seed}");
}

#[test]
fn corrupted_tails_recover_without_loss_or_corruption() {
    let base = std::env::var("LAMINAR_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_0000u64);
    for seed in base..base + CASES {
        let r = std::panic::catch_unwind(|| run_case(seed));
        if r.is_err() {
            panic!("case failed; reproduce with LAMINAR_TEST_SEED={seed}");
        }
    }
}

#[test]
fn recovery_scans_only_from_the_recovery_point() {
    let sim = SimStorage::new();
    let log = open_log(
        sim.clone(),
        "/d/t-0",
        LogConfig {
            segment_bytes: 1 << 20,
            ..small_config()
        },
        false,
    );
    for i in 0..200 {
        let mut b = batch(4, 200, i, i as u64);
        log.append(&mut b).unwrap();
    }
    log.flush().unwrap();
    let mut tail = 0u64;
    for i in 0..10 {
        let mut b = batch(4, 200, 1000 + i, 1000 + i as u64);
        tail += b.len() as u64;
        log.append(&mut b).unwrap();
    }
    drop(log);
    let log = open_log(sim as Arc<dyn Storage>, "/d/t-0", small_config(), false);
    let report = log.recovery_report();
    assert_eq!(
        report.validated_bytes, tail,
        "only the unflushed tail is validated"
    );
    assert_eq!(read_all(&log).len(), 210);
}
