//! Log compaction: a cleaning pass keeps the newest record of each key at its offset,
//! tombstones until their delete horizon, and everything it may not clean; and a crash at
//! any step of a pass leaves a log that recovery brings back to either side of each swap.

mod common;

use std::collections::BTreeMap;
use std::io;
use std::os::fd::RawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use common::*;
use laminar_records::{
    decode_records, validate_stored_batch, BatchBuilder, BatchHeader, Compression, RecordSpec,
};
use laminar_storage::backend::{read_exact_at, SimStorage, Storage, StorageFile};
use laminar_storage::cleaner::pass::{clean, examine, Throttle};
use laminar_storage::cleaner::{PassLimits, PassStats};
use laminar_storage::{Log, LogConfig, Offset};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

type Rec = (i64, Option<Vec<u8>>, Option<Vec<u8>>);

const T0_MS: i64 = 1_700_000_000_000;
const DELETE_RETENTION_MS: i64 = 60_000;

fn compact_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4 << 10,
        cleanup_compact: true,
        cleanup_delete: false,
        min_cleanable_dirty_ratio: 0.0,
        delete_retention_ms: DELETE_RETENTION_MS,
        ..small_config()
    }
}

fn limits() -> PassLimits {
    PassLimits {
        dedupe_buffer_bytes: 1 << 20,
        io_buffer_bytes: 4 << 10,
        io_max_bytes_per_s: None,
    }
}

/// Every record of the log, read as a consumer would: from the log start, batch by batch.
/// Offsets must grow, and may skip what compaction removed.
fn records(log: &Log) -> Vec<Rec> {
    let mut out = Vec::new();
    let mut next = log.log_start();
    while next < log.log_end() {
        let read = log.read(next, 64 << 10, true).expect("read");
        let range = read.range.expect("data below the log end");
        let mut buf = vec![0u8; range.len as usize];
        read_exact_at(range.file.as_ref(), &mut buf, range.position.0).unwrap();
        let mut at = 0;
        while at < buf.len() {
            let total = BatchHeader::parse(&buf[at..]).unwrap().total_bytes();
            let bytes = &buf[at..at + total];
            let h = validate_stored_batch(bytes).expect("a valid batch");
            assert!(
                h.base_offset >= next.0 || h.last_offset() >= next.0,
                "offsets grow"
            );
            for r in decode_records(bytes, 1 << 24).unwrap() {
                let o = h.base_offset + r.offset_delta as i64;
                if o >= next.0 {
                    assert!(out.last().is_none_or(|l: &Rec| l.0 < o), "offsets grow");
                    out.push((o, r.key, r.value));
                }
            }
            next = Offset(h.next_offset());
            at += h.total_bytes();
        }
        assert_eq!(next, range.next_offset);
    }
    assert_eq!(next, log.log_end());
    out
}

/// Appends `n` records over `keys` keys (about one in eight a tombstone), in batches of
/// one to nine records, in every codec. Returns what was written.
fn append_keyed(log: &Log, seed: u64, n: usize, keys: u64) -> Vec<Rec> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut written = Vec::new();
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    while written.len() < n {
        let count = rng.gen_range(1..10);
        let mut b = BatchBuilder::new(codecs[rng.gen_range(0..codecs.len())], T0_MS);
        let mut recs = Vec::new();
        for _ in 0..count {
            let key = format!("key-{}", rng.gen_range(0..keys)).into_bytes();
            let value = (!rng.gen_ratio(1, 8)).then(|| {
                let mut v = vec![0u8; rng.gen_range(10..200)];
                rng.fill(&mut v[..]);
                v
            });
            recs.push((Some(key.clone()), value.clone()));
            b.push(RecordSpec {
                timestamp_ms: T0_MS,
                key: Some(key),
                value,
                headers: vec![],
            });
        }
        let mut bytes = b.build().unwrap();
        let info = log.append(&mut bytes).unwrap();
        for (i, (k, v)) in recs.into_iter().enumerate() {
            written.push((info.base_offset.0 + i as i64, k, v));
        }
    }
    written
}

/// What a pass that mapped `[0, end)` leaves of `written`: below `end`, the newest record of
/// each key (a tombstone only while `tombstones` holds); from `end` on, everything.
fn model(written: &[Rec], end: i64, tombstones: bool) -> Vec<Rec> {
    let mut newest: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
    for (o, k, _) in written.iter().filter(|r| r.0 < end) {
        newest.insert(k.clone().unwrap(), *o);
    }
    written
        .iter()
        .filter(|(o, k, v)| *o >= end || (newest[k.as_ref().unwrap()] == *o && (v.is_some() || tombstones)))
        .cloned()
        .collect()
}

fn pass(log: &Log, now_ms: i64) -> PassStats {
    let cleanable = examine(log, now_ms).unwrap().expect("something to clean");
    clean(
        log,
        cleanable,
        &limits(),
        &mut Throttle::new(None),
        now_ms,
        &AtomicBool::new(false),
    )
    .unwrap()
    .expect("not stopped")
}

#[test]
fn a_pass_keeps_the_newest_record_of_each_key_and_tombstones_until_their_horizon() {
    let sim = SimStorage::new();
    let log = open_log(sim.clone(), "/data/t-0", compact_config(), false);
    let written = append_keyed(&log, 7, 3_000, 60);
    // The cleaner only rewrites segments the on-disk checkpoint has passed.
    log.flush().unwrap();
    let segments_before = log.segment_count();
    assert!(segments_before > 20, "{segments_before} segments");
    let end = log.segment_bases().last().unwrap().0;

    let first = pass(&log, T0_MS);
    assert_eq!((first.first_dirty, first.end), (Offset(0), Offset(end)));
    assert_eq!(records(&log), model(&written, end, true));
    assert!(first.records_removed > 2_000, "{first:?}");
    let size_before: usize = written.iter().map(|r| r.2.as_ref().map_or(0, |v| v.len())).sum();
    assert!(
        log.size_bytes() < size_before as u64 / 4,
        "{} bytes left",
        log.size_bytes()
    );
    assert_eq!(
        log.log_end(),
        Offset(written.len() as i64),
        "offsets never change"
    );

    // More records; the next pass, past the horizon, maps only the new dirty part and
    // drops the tombstones the first pass kept.
    let mut all = written.clone();
    all.extend(append_keyed(&log, 8, 1_000, 60));
    log.flush().unwrap();
    let end2 = log.segment_bases().last().unwrap().0;
    let second = pass(&log, T0_MS + DELETE_RETENTION_MS);
    assert_eq!((second.first_dirty, second.end), (Offset(end), Offset(end2)));
    let expected = {
        // Tombstones below the first end carry the first pass's horizon, which has come.
        let m = model(&all, end2, true);
        let first_tombstones: Vec<i64> = model(&written, end, true)
            .iter()
            .filter(|r| r.2.is_none())
            .map(|r| r.0)
            .collect();
        m.into_iter()
            .filter(|r| !first_tombstones.contains(&r.0))
            .collect::<Vec<_>>()
    };
    assert_eq!(records(&log), expected);
    // Groups are formed by their size before cleaning, as Kafka's are: the first pass
    // rewrote each segment alone, the second merged what the first had shrunk (and
    // rewrote the new segments alone).
    assert!(
        log.segment_count() < segments_before / 2,
        "{} segments of {segments_before}",
        log.segment_count()
    );

    // The same after a clean restart, and after a crash.
    log.close().unwrap();
    let log = open_log(sim.clone(), "/data/t-0", compact_config(), true);
    assert_eq!(records(&log), expected);
    drop(log);
    sim.crash(None);
    let log = open_log(sim.clone(), "/data/t-0", compact_config(), false);
    assert_eq!(records(&log), expected);
    assert!(
        log.recovery_report().truncated_at.is_none(),
        "{:?}",
        log.recovery_report()
    );
}

/// One record of the model: (offset, key, value, its batch's base offset).
type Modelled = (i64, Vec<u8>, Option<Vec<u8>>, i64);

/// The cleaner's semantics over a whole history: the records, and the delete horizon each
/// batch was given by the first pass that kept a tombstone of it.
#[derive(Default)]
struct Model {
    records: Vec<Modelled>,
    horizons: BTreeMap<i64, i64>,
}

impl Model {
    /// A pass at `now_ms` whose map covered everything below `end` (the map never fills here).
    fn pass(&mut self, end: i64, now_ms: i64) {
        let mut newest: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
        for (o, k, _, _) in self.records.iter().filter(|r| r.0 < end) {
            newest.insert(k.clone(), *o);
        }
        let horizons = self.horizons.clone();
        let mut kept_tombstone_of: Vec<i64> = Vec::new();
        self.records.retain(|(o, k, v, batch)| {
            if *o >= end {
                return true;
            }
            if newest[k] != *o {
                return false;
            }
            if v.is_none() {
                if horizons.get(batch).is_some_and(|h| now_ms >= *h) {
                    return false;
                }
                kept_tombstone_of.push(*batch);
            }
            true
        });
        for b in kept_tombstone_of {
            self.horizons.entry(b).or_insert(now_ms + DELETE_RETENTION_MS);
        }
    }

    fn visible(&self) -> Vec<Rec> {
        self.records
            .iter()
            .map(|(o, k, v, _)| (*o, Some(k.clone()), v.clone()))
            .collect()
    }
}

/// Seeded workloads: appends over few or many keys with tombstones, rolls at several segment
/// sizes, passes at times before and after the delete horizons, clean restarts and crashes
/// between them; after every pass and every restart the log reads as the model says.
#[test]
fn seeded_workloads_with_passes_and_restarts_match_the_model() {
    for seed in 1..=8u64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let config = LogConfig {
            segment_bytes: [2 << 10, 4 << 10, 16 << 10][seed as usize % 3],
            ..compact_config()
        };
        let sim = SimStorage::new();
        let mut log = open_log(sim.clone(), "/data/t-0", config.clone(), false);
        let mut model = Model::default();
        let mut now = T0_MS;
        for round in 0..5 {
            let keys = [5, 50, 500][rng.gen_range(0..3)];
            let n = rng.gen_range(50..400);
            let written = append_keyed(&log, seed * 100 + round, n, keys);
            // Batch bases: a record's batch starts at the first offset of its run of
            // consecutive offsets appended together; append_keyed returns them in order, so
            // read them back from the log's own batches instead.
            let bases = batch_bases(&log, written[0].0);
            for (o, k, v) in written {
                let base = *bases.range(..=o).next_back().unwrap();
                model.records.push((o, k.unwrap(), v, base));
            }
            log.flush().unwrap();
            now += rng.gen_range(0..2 * DELETE_RETENTION_MS);
            let end = log.segment_bases().last().unwrap().0;
            if let Some(c) = examine(&log, now).unwrap() {
                clean(
                    &log,
                    c,
                    &limits(),
                    &mut Throttle::new(None),
                    now,
                    &AtomicBool::new(false),
                )
                .unwrap()
                .expect("not stopped");
                model.pass(end, now);
            }
            assert_eq!(
                records(&log),
                model.visible(),
                "seed {seed} round {round}: after the pass"
            );
            match rng.gen_range(0..3) {
                0 => {}
                1 => {
                    log.close().unwrap();
                    log = open_log(sim.clone(), "/data/t-0", config.clone(), true);
                }
                _ => {
                    drop(log);
                    sim.crash(None);
                    log = open_log(sim.clone(), "/data/t-0", config.clone(), false);
                }
            }
            assert_eq!(
                records(&log),
                model.visible(),
                "seed {seed} round {round}: after a restart"
            );
        }
    }
}

/// The base offsets of the batches from `from` on.
fn batch_bases(log: &Log, from: i64) -> std::collections::BTreeSet<i64> {
    let mut out = std::collections::BTreeSet::new();
    let mut next = Offset(from);
    while next < log.log_end() {
        let range = log.read(next, 64 << 10, true).unwrap().range.unwrap();
        let mut buf = vec![0u8; range.len as usize];
        read_exact_at(range.file.as_ref(), &mut buf, range.position.0).unwrap();
        let mut at = 0;
        while at < buf.len() {
            let h = BatchHeader::parse(&buf[at..]).unwrap();
            out.insert(h.base_offset);
            at += h.total_bytes();
        }
        next = range.next_offset;
    }
    out
}

/// A storage that fails every change after a budget of them, as if the process died there:
/// the simulated crash that follows keeps only what was synced.
#[derive(Debug)]
struct DiesAfter {
    inner: Arc<SimStorage>,
    left: Arc<AtomicI64>,
}

fn spend(left: &AtomicI64) -> io::Result<()> {
    if left.fetch_sub(1, Ordering::SeqCst) <= 0 {
        Err(io::Error::other("the process is dead"))
    } else {
        Ok(())
    }
}

#[derive(Debug)]
struct DyingFile {
    inner: Arc<dyn StorageFile>,
    left: Arc<AtomicI64>,
}

impl StorageFile for DyingFile {
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn read_at(&self, buf: &mut [u8], pos: u64) -> io::Result<usize> {
        self.inner.read_at(buf, pos)
    }
    fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        spend(&self.left)?;
        self.inner.write_all_at(buf, pos)
    }
    fn sync_data(&self) -> io::Result<()> {
        spend(&self.left)?;
        self.inner.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        spend(&self.left)?;
        self.inner.set_len(len)
    }
    fn allocate(&self, len: u64) -> io::Result<()> {
        spend(&self.left)?;
        self.inner.allocate(len)
    }
    fn raw_fd(&self) -> Option<RawFd> {
        None
    }
}

impl Storage for DiesAfter {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        spend(&self.left)?;
        self.inner.create_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.inner.list_dir(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        if create && !self.inner.exists(path) {
            spend(&self.left)?;
        }
        Ok(Arc::new(DyingFile {
            inner: self.inner.open(path, create)?,
            left: self.left.clone(),
        }))
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        spend(&self.left)?;
        self.inner.remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        spend(&self.left)?;
        self.inner.remove_dir_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        spend(&self.left)?;
        self.inner.rename(from, to)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        spend(&self.left)?;
        self.inner.sync_dir(path)
    }
}

/// A compacted log on a simulated disk whose calls fail from the `left`-th on (the process
/// dies there); `left` starts unlimited.
fn dying_log() -> (Arc<SimStorage>, Arc<AtomicI64>, Arc<Log>) {
    let sim = SimStorage::new();
    let left = Arc::new(AtomicI64::new(i64::MAX));
    let storage = Arc::new(DiesAfter {
        inner: sim.clone(),
        left: left.clone(),
    });
    let log = open_log(storage, "/data/t-0", compact_config(), false);
    (sim, left, log)
}

/// Runs a pass that dies at its `step`-th storage call, then cuts the power. Returns whether
/// the pass finished first.
fn pass_then_crash(sim: &SimStorage, left: &AtomicI64, log: Arc<Log>, step: i64) -> bool {
    left.store(step, Ordering::SeqCst);
    let now = T0_MS;
    let outcome = examine(&log, now).and_then(|c| {
        clean(
            &log,
            c.expect("something to clean"),
            &limits(),
            &mut Throttle::new(None),
            now,
            &AtomicBool::new(false),
        )
    });
    drop(log);
    sim.crash(None);
    outcome.is_ok()
}

#[test]
fn a_crash_at_any_step_of_a_pass_recovers_to_either_side_of_each_swap() {
    let mut steps = 0;
    let mut finished = false;
    while !finished {
        let (sim, left, log) = dying_log();
        let written = append_keyed(&log, 11, 400, 20);
        log.flush().unwrap();
        let end = log.segment_bases().last().unwrap().0;
        let cleaned = model(&written, end, true);

        finished = pass_then_crash(&sim, &left, log, steps);
        let log = open_log(sim.clone(), "/data/t-0", compact_config(), false);
        let got = records(&log);
        assert_eq!(
            log.log_end(),
            Offset(written.len() as i64),
            "step {steps}: nothing lost"
        );
        // Every record read is one that was written, at its offset...
        let mut w = written.iter();
        for r in &got {
            assert!(w.any(|x| x == r), "step {steps}: {r:?} was not written there");
        }
        // ...and every record the pass keeps is there.
        let mut g = got.iter();
        for r in &cleaned {
            assert!(g.any(|x| x == r), "step {steps}: {r:?} was lost");
        }
        if finished {
            assert_eq!(got, cleaned, "a finished pass is whole after a crash");
        }
        steps += 1;
    }
    assert!(steps > 20, "the pass took {steps} changes");
    eprintln!("a crash at each of {steps} steps");
}

/// One transactional batch of `producer_id`: `keys` with `value`.
fn append_txn(log: &Log, producer_id: i64, keys: &[&str], value: &str) -> Vec<i64> {
    let mut b = BatchBuilder::new(Compression::None, T0_MS)
        .producer(producer_id, 0, 0)
        .transactional();
    for k in keys {
        b.push(RecordSpec {
            timestamp_ms: T0_MS,
            key: Some(k.as_bytes().to_vec()),
            value: Some(value.as_bytes().to_vec()),
            headers: vec![],
        });
    }
    let mut bytes = b.build().unwrap();
    let info = log.append(&mut bytes).unwrap();
    (info.base_offset.0..=info.last_offset.0).collect()
}

fn append_marker(log: &Log, producer_id: i64, marker: laminar_records::ControlType) -> i64 {
    let mut bytes = laminar_records::control_batch(marker, producer_id, 0, 0, T0_MS);
    log.append(&mut bytes).unwrap().base_offset.0
}

/// (producer id, offset, has a delete horizon) of every marker in the log.
fn markers(log: &Log) -> Vec<(i64, i64, bool)> {
    let mut out = Vec::new();
    let mut next = log.log_start();
    while next < log.log_end() {
        let range = log.read(next, 64 << 10, true).unwrap().range.unwrap();
        let mut buf = vec![0u8; range.len as usize];
        read_exact_at(range.file.as_ref(), &mut buf, range.position.0).unwrap();
        let mut at = 0;
        while at < buf.len() {
            let h = BatchHeader::parse(&buf[at..]).unwrap();
            if h.is_control() {
                let horizon = h.attributes & laminar_records::clean::DELETE_HORIZON_FLAG != 0;
                out.push((h.producer_id, h.base_offset, horizon));
            }
            next = Offset(h.next_offset());
            at += h.total_bytes();
        }
    }
    out
}

/// Transactions and compaction, as Kafka's cleaner treats them: an aborted transaction's
/// records go (and do not count as their keys' newest); a committed one's are compacted like
/// any; a marker whose transaction has no records left gets a delete horizon and goes after
/// it, its aborted-transaction entry with it; nothing at or past the first open transaction
/// (the last stable offset) is cleaned. Restarts keep what is open and what was aborted.
#[test]
fn the_cleaner_removes_aborted_records_and_spent_markers_and_stops_at_the_stable_offset() {
    use laminar_records::ControlType::{Abort, Commit};
    let sim = SimStorage::new();
    let dir = "/data/t-0";
    let mut log = open_log(sim.clone(), dir, compact_config(), false);
    let keys = ["k1", "k2", "k3", "k4", "k5"];
    append_keyed(&log, 1, 50, 20);
    let committed = append_txn(&log, 100, &keys, "A");
    let a_marker = append_marker(&log, 100, Commit);
    let aborted = append_txn(&log, 200, &keys, "B");
    let b_marker = append_marker(&log, 200, Abort);
    // A committed transaction whose only record a later one replaces: its marker is spent.
    append_txn(&log, 300, &["k6"], "C1");
    let c_marker = append_marker(&log, 300, Commit);
    append_txn(&log, 301, &["k6"], "C2");
    let c2_marker = append_marker(&log, 301, Commit);
    append_keyed(&log, 2, 600, 20);
    // Open: its record of k1 must not make A's go, whatever becomes of it.
    let open = append_txn(&log, 400, &["k1"], "D");
    append_keyed(&log, 3, 600, 20);
    assert_eq!(log.last_stable_offset(), Offset(open[0]));
    log.flush().unwrap();

    let now = T0_MS + 1_000;
    pass(&log, now);
    let recs = records(&log);
    let value_of = |o: i64| recs.iter().find(|r| r.0 == o).map(|r| r.2.clone());
    for o in &aborted {
        assert_eq!(value_of(*o), None, "aborted record at {o} removed");
    }
    for o in &committed {
        assert_eq!(
            value_of(*o),
            Some(Some(b"A".to_vec())),
            "committed record at {o} kept"
        );
    }
    assert_eq!(
        value_of(open[0]),
        Some(Some(b"D".to_vec())),
        "the open transaction untouched"
    );
    let m = markers(&log);
    assert!(
        m.contains(&(100, a_marker, false)),
        "A has records: its marker stays: {m:?}"
    );
    assert!(
        m.contains(&(200, b_marker, true)),
        "B's marker waits for its horizon: {m:?}"
    );
    assert!(
        m.contains(&(300, c_marker, true)),
        "C1's record was replaced: {m:?}"
    );
    assert!(m.contains(&(301, c2_marker, false)), "{m:?}");
    let aborted_entries = |log: &Log| log.aborted_txns(Offset(0), log.log_end()).len();
    assert_eq!(aborted_entries(&log), 1);

    // Past the horizon: the spent markers go, and B's index entry with its marker.
    let later = now + DELETE_RETENTION_MS + 1;
    pass(&log, later);
    let m = markers(&log);
    assert!(!m.iter().any(|(p, _, _)| *p == 200 || *p == 300), "{m:?}");
    assert!(
        m.contains(&(100, a_marker, false)) && m.contains(&(301, c2_marker, false)),
        "{m:?}"
    );
    assert_eq!(aborted_entries(&log), 0);
    assert_eq!(log.last_stable_offset(), Offset(open[0]));

    // A restart keeps the open transaction, and a commit then ends it.
    log.close().unwrap();
    drop(log);
    log = open_log(sim.clone(), dir, compact_config(), true);
    assert_eq!(log.last_stable_offset(), Offset(open[0]));
    assert_eq!(aborted_entries(&log), 0);
    append_marker(&log, 400, Commit);
    assert_eq!(log.last_stable_offset(), log.log_end());
}

/// A crash at each step of a pass over a log with aborted transactions: the segments it
/// merges bring their aborted-transaction entries into one index (written before the commit
/// point, renamed in after the data), so after recovery every abort whose marker the log
/// still holds is in an index, on either side of each swap, and nothing is left open.
#[test]
fn a_crash_at_any_step_of_a_pass_keeps_every_abort_indexed() {
    use laminar_records::ControlType::{Abort, Commit};
    let mut steps = 0;
    let mut finished = false;
    while !finished {
        let (sim, left, log) = dying_log();
        for round in 0..12u64 {
            append_keyed(&log, 20 + round, 30, 20);
            append_txn(&log, 1000 + round as i64, &["t1", "t2"], "aborted");
            append_marker(&log, 1000 + round as i64, Abort);
            append_txn(&log, 2000 + round as i64, &["t3"], "kept");
            append_marker(&log, 2000 + round as i64, Commit);
        }
        append_keyed(&log, 99, 100, 20);
        log.flush().unwrap();
        let strip = |log: &Log| -> Vec<(i64, Offset, Offset)> {
            log.aborted_txns(Offset(0), log.log_end())
                .into_iter()
                .map(|a| (a.producer_id, a.first_offset, a.last_offset))
                .collect()
        };
        let aborted = strip(&log);
        assert_eq!(aborted.len(), 12);

        finished = pass_then_crash(&sim, &left, log, steps);
        let log = open_log(sim.clone(), "/data/t-0", compact_config(), false);
        // The first pass removes the aborted records and keeps their markers (until their
        // horizon), so every entry stays.
        let markers_left: Vec<i64> = markers(&log).iter().map(|m| m.1).collect();
        let want: Vec<_> = aborted
            .iter()
            .copied()
            .filter(|(_, _, last)| markers_left.contains(&last.0))
            .collect();
        assert_eq!(want.len(), 12, "step {steps}: the abort markers stay");
        assert_eq!(strip(&log), want, "step {steps}: every abort indexed");
        assert_eq!(
            log.last_stable_offset(),
            log.log_end(),
            "step {steps}: nothing open"
        );
        steps += 1;
    }
    eprintln!("a crash at each of {steps} steps");
}
