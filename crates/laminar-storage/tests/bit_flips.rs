//! Bytes that change on the disk after they were written (a bit flip, a bad sector read as
//! something else): seeded cases flip bytes of one batch, anywhere in the log and in any
//! field a check covers, then reopen the log as a new process would. Every read must return
//! only batches exactly as written, and the damaged one never: a read that starts at it
//! fails, a read that reaches it stops before it, and reads after it go on. Each failure
//! prints its seed.

mod common;

use std::path::PathBuf;

use common::*;
use laminar_storage::backend::{SimStorage, Storage};
use laminar_storage::{Offset, StorageError};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const CASES: u64 = 200;

/// The bytes of a batch no check covers: the partition leader epoch (12..16) is outside
/// the CRC, as Kafka's is, and no offset or length depends on it.
const UNCHECKED: std::ops::Range<usize> = 12..16;
/// The batch length: where it is damaged, the next batch's start is not known either, and
/// a read of the offsets after it fails up to the next offset-index entry.
const LENGTH: std::ops::Range<usize> = 8..12;

fn run_case(seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let sim = SimStorage::new();
    let dir = "/data/t-0";
    let config = small_config();
    let log = open_log(sim.clone(), dir, config.clone(), false);
    for i in 0..rng.gen_range(20..200) {
        let mut b = batch(
            rng.gen_range(1..12),
            rng.gen_range(0..400),
            1000 + i,
            seed * 1000 + i as u64,
        );
        log.append(&mut b).unwrap();
    }
    // Synced (and the active segment's file renamed to its base offset's name).
    log.flush().unwrap();
    let written = read_all(&log);
    let victim = rng.gen_range(0..written.len());
    let (h, bytes) = &written[victim];
    let range = log.read(Offset(h.base_offset), 1, true).unwrap().range.unwrap();
    assert_eq!(range.first_offset, Offset(h.base_offset));
    let (path, position) = (PathBuf::from(&range.path), range.position.0 as usize);
    let clean = rng.gen_bool(0.5);
    if clean {
        log.close().unwrap();
    }
    drop(log);

    // A rolled segment's file keeps the name it was prepared under until the flusher
    // renames it: the prepared file whose first batch starts at the segment's base.
    let seg_base = path
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse::<i64>()
        .unwrap();
    let path = if sim.read_file(&path).is_some() {
        path
    } else {
        let dir = std::path::Path::new(dir);
        sim.list_dir(dir)
            .unwrap()
            .into_iter()
            .map(|n| dir.join(n))
            .find(|p| {
                p.extension().is_some_and(|e| e == "prepared")
                    && sim
                        .read_file(p)
                        .is_some_and(|d| d.len() >= 8 && d[..8] == seg_base.to_be_bytes())
            })
            .unwrap_or_else(|| panic!("seed {seed}: no file for segment {seg_base}"))
    };
    let mut data = sim.read_file(&path).unwrap();
    assert_eq!(&data[position..position + bytes.len()], &bytes[..]);
    let flips = rng.gen_range(1..=3);
    let mut length_flipped = false;
    for _ in 0..flips {
        let at = loop {
            let at = rng.gen_range(0..bytes.len());
            if !UNCHECKED.contains(&at) {
                length_flipped |= LENGTH.contains(&at);
                break at;
            }
        };
        data[position + at] ^= 1 << rng.gen_range(0..8);
    }
    sim.write_file_durably(&path, &data);

    let log = open_log(sim.clone(), dir, config, clean);
    // The damaged batch may have been validated by recovery (after the recovery point) and
    // cut off with everything after it, as a torn tail is; otherwise it is all still there.
    let end = log.log_end();
    let mut next = log.log_start();
    let mut refused = 0;
    let mut returned = 0;
    while next < end {
        let r = log.read(next, rng.gen_range(1..64 << 10), true);
        match r {
            Ok(read) => {
                let range = read.range.unwrap_or_else(|| panic!("seed {seed}: a read from {next} below the end {end} returns batches (victim {victim} at {})", written[victim].0.base_offset));
                let mut buf = vec![0u8; range.len as usize];
                laminar_storage::backend::read_exact_at(range.file.as_ref(), &mut buf, range.position.0)
                    .unwrap();
                let mut at = 0;
                while at < buf.len() {
                    let (h, bytes) = &written[returned];
                    assert_eq!(Offset(h.base_offset), next, "seed {seed}: offsets go on in order");
                    assert_eq!(
                        &buf[at..at + bytes.len()],
                        &bytes[..],
                        "seed {seed}: batch {returned} (offset {next}) is returned as written (victim {victim})"
                    );
                    at += bytes.len();
                    next = Offset(h.next_offset());
                    returned += 1;
                }
                assert_eq!(next, range.next_offset);
            }
            Err(StorageError::Corrupt { .. }) => {
                assert_eq!(
                    returned,
                    victim + refused,
                    "seed {seed}: only the damaged batch is refused, and those after it up to an index entry if its length is damaged"
                );
                assert!(
                    refused == 0 || length_flipped,
                    "seed {seed}: batch {returned} refused"
                );
                refused += 1;
                returned += 1;
                next = Offset(written[returned - 1].0.next_offset());
            }
            Err(e) => panic!("seed {seed}: {e}"),
        }
    }
    if end == Offset(written[victim].0.base_offset) {
        // Recovery cut the log at the damaged batch.
        assert!(!clean, "seed {seed}: a clean log is trusted to its end");
        assert_eq!(refused, 0);
    } else {
        assert_eq!(end, Offset(written.last().unwrap().0.next_offset()));
        assert!(refused >= 1, "seed {seed}: the damaged batch {victim} is refused");
    }
}

#[test]
fn flipped_bytes_are_never_read_back() {
    for seed in 9..CASES {
        run_case(seed);
    }
}
