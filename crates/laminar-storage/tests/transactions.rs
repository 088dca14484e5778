//! Transactions in the log: the last stable offset, `read_committed` reads, and the
//! aborted-transaction index, checked against a model of the log's contents after random
//! appends, and again after crashes (torn unsynced tails) and clean restarts.

mod common;

use common::*;
use laminar_records::{
    control_batch, control_type, validate_batches, BatchBuilder, Compression, ControlType, RecordSpec,
};
use laminar_storage::backend::{read_exact_at, SimStorage};
use laminar_storage::txn::{AbortedTxn, OpenTxns};
use laminar_storage::{Log, Offset};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const CASES: u64 = 200;

fn txn_batch(pid: i64, records: usize, value_bytes: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None, 1000)
        .producer(pid, 0, 0)
        .transactional();
    for _ in 0..records {
        b.push(RecordSpec {
            timestamp_ms: 1000,
            key: Some(b"k".to_vec()),
            value: Some(vec![7u8; value_bytes]),
            headers: vec![],
        });
    }
    b.build().unwrap()
}

/// What the log's batches say: open transactions, and the aborted ones (without their last
/// stable offsets, which depend on how batches were grouped into appends).
fn model(log: &Log) -> (OpenTxns, Vec<(i64, Offset, Offset)>) {
    let mut open = OpenTxns::default();
    let mut aborted = Vec::new();
    for (h, bytes) in read_all(log) {
        let marker = control_type(&bytes);
        aborted.extend(
            open.on_batch(&h, marker, Offset(h.next_offset()))
                .map(|a| (a.producer_id, a.first_offset, a.last_offset)),
        );
    }
    (open, aborted)
}

fn strip(v: Vec<AbortedTxn>) -> Vec<(i64, Offset, Offset)> {
    v.into_iter()
        .map(|a| (a.producer_id, a.first_offset, a.last_offset))
        .collect()
}

/// Every batch `read_committed` returns from `from` on lies below the last stable offset,
/// and it returns everything below it.
fn check_committed_reads(log: &Log, seed: u64) {
    let lso = log.last_stable_offset();
    let mut next = log.log_start();
    loop {
        let read = log.read_committed(next, 4 << 10, true).unwrap();
        assert_eq!(read.last_stable, lso, "seed {seed}");
        let Some(range) = read.range else { break };
        let mut buf = vec![0u8; range.len as usize];
        read_exact_at(range.file.as_ref(), &mut buf, range.position.0).unwrap();
        for (h, _, _) in validate_batches(&buf).unwrap() {
            assert!(
                Offset(h.last_offset()) < lso,
                "seed {seed}: batch at {} past the LSO {lso}",
                h.base_offset
            );
            next = Offset(h.next_offset());
        }
    }
    assert_eq!(next, lso, "seed {seed}: read_committed reaches the LSO");
}

fn check(log: &Log, seed: u64, what: &str) {
    let (open, aborted) = model(log);
    let open_entries: Vec<(i64, Offset)> = open.entries().collect();
    assert_eq!(
        log.open_txns(),
        open_entries,
        "seed {seed} {what}: open transactions"
    );
    let lso = open.first_unstable().unwrap_or(log.log_end());
    assert_eq!(log.last_stable_offset(), lso, "seed {seed} {what}: LSO");
    assert_eq!(
        strip(log.aborted_txns(log.log_start(), log.log_end())),
        aborted,
        "seed {seed} {what}: aborted transactions"
    );
    // A range in the middle gets exactly the transactions that reach into it.
    let (from, upper) = (Offset(log.log_end().0 / 3), Offset(2 * log.log_end().0 / 3));
    let want: Vec<_> = aborted
        .iter()
        .copied()
        .filter(|(_, first, last)| *last >= from && *first < upper)
        .collect();
    assert_eq!(
        strip(log.aborted_txns(from, upper)),
        want,
        "seed {seed} {what}: a middle range"
    );
    check_committed_reads(log, seed);
}

fn run_case(seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let sim = SimStorage::new();
    let dir = "/data/t-0";
    let config = small_config();
    let mut log = open_log(sim.clone(), dir, config.clone(), false);
    let producers = rng.gen_range(1..5i64);
    for round in 0..3 {
        for _ in 0..rng.gen_range(10..120) {
            let pid = rng.gen_range(1..=producers) * 1000;
            let mut b = match rng.gen_range(0..10) {
                0 => batch(2, 50, 1000, seed),
                1 => control_batch(ControlType::Commit, pid, 0, 0, 1000),
                2 => control_batch(ControlType::Abort, pid, 0, 0, 1000),
                _ => txn_batch(pid, rng.gen_range(1..5), rng.gen_range(10..600)),
            };
            log.append(&mut b).unwrap();
            if rng.gen_bool(0.05) {
                log.flush().unwrap();
            }
        }
        check(&log, seed, &format!("round {round}, before restart"));
        if rng.gen_bool(0.5) {
            log.close().unwrap();
            drop(log);
            log = open_log(sim.clone(), dir, config.clone(), true);
            check(&log, seed, &format!("round {round}, after a clean restart"));
        } else {
            let flushed = log.flushed_end();
            drop(log);
            sim.crash(Some(seed + round));
            log = open_log(sim.clone(), dir, config.clone(), false);
            assert!(log.log_end() >= flushed, "seed {seed}: flushed data survives");
            check(&log, seed, &format!("round {round}, after a crash"));
        }
    }
}

#[test]
fn transactions_survive_crashes_and_restarts() {
    for seed in 0..CASES {
        run_case(seed);
    }
}

/// An abort whose index entry was written but never synced when the process died: recovery
/// finds the same entry again from the marker, and must sync it before the checkpoint it
/// writes vouches for it, or a power cut after that loses it for good (the marker then lies
/// below the recovery point, where nothing is rebuilt).
#[test]
fn rebuilt_aborted_entries_are_synced_before_the_checkpoint_passes_them() {
    let sim = SimStorage::new();
    let dir = "/data/t-0";
    let log = open_log(sim.clone(), dir, small_config(), false);
    log.append(&mut txn_batch(7, 3, 10)).unwrap();
    log.append(&mut control_batch(ControlType::Abort, 7, 0, 0, 1000))
        .unwrap();
    // Killed: the page cache (the simulated files' unsynced bytes) survives.
    drop(log);
    let log = open_log(sim.clone(), dir, small_config(), false);
    assert_eq!(log.aborted_txns(Offset(0), log.log_end()).len(), 1);
    drop(log);
    // Then the power goes: only what was synced is left.
    sim.crash(None);
    let log = open_log(sim.clone(), dir, small_config(), false);
    assert_eq!(log.log_end(), Offset(4), "recovery synced the data");
    assert_eq!(
        log.aborted_txns(Offset(0), log.log_end()).len(),
        1,
        "and the aborted transaction's entry"
    );
    assert_eq!(log.last_stable_offset(), log.log_end());
}

/// The last stable offset never lies below the log start: DeleteRecords past an open
/// transaction's first record leaves nothing there to read.
#[test]
fn the_stable_offset_is_never_below_the_log_start() {
    let sim = SimStorage::new();
    let log = open_log(sim.clone(), "/data/t-0", small_config(), false);
    log.append(&mut txn_batch(7, 3, 10)).unwrap();
    log.append(&mut batch(2, 10, 1000, 1)).unwrap();
    assert_eq!(log.last_stable_offset(), Offset(0));
    log.delete_records(Offset(4)).unwrap();
    assert_eq!(log.last_stable_offset(), Offset(4));
}
