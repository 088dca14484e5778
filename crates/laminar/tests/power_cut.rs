//! A power cut under the broker, for real: its data directory is on a lazy faultfs mount,
//! which keeps every write that was not fsynced in memory and drops it at the cut. The
//! delivery verifier (`laminar-load verify`, in-process) produces at acks=all across a
//! SIGKILL, a power cut and a restart on the same address, and nothing it saw acknowledged
//! may be lost, duplicated, reordered or corrupted. Records produced at acks=1 just before
//! the cut, never fsynced, show that the cut really drops data.

mod common;

use std::time::Duration;

use laminar_faultfs::{Mount, Options};
use laminar_load::verify::{verify, VerifyConfig};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

/// A lazy faultfs mount under `dir` (unsynced writes kept in memory, dropped at a power
/// cut), and the broker's data directory on it.
fn lazy_mount(dir: &std::path::Path) -> (Mount, std::path::PathBuf) {
    let lazy = Options {
        lazy: true,
        ..Options::default()
    };
    let (mount, mnt) = Mount::in_dir(dir, lazy).unwrap();
    (mount, mnt.join("data"))
}

/// Produces `values` to partition 0 of `topic` at acks=1: answered after the write. They
/// go in one request, one batch (a linger longer than the loop; `flush` sends at once):
/// split in two, the second request's write would wait on a FUSE mount for the first one's
/// held fsync (the kernel holds the file's inode lock through a FUSE fsync), and be
/// answered only after that fsync had made the first batch visible, rightly
/// (`a_write_waits_behind_a_held_fsync_and_consumers_see_only_what_it_covered`). That is
/// how `acks_all_survives_...` once read a high watermark of 1 instead of 0 (issue 40).
fn produce_acks_1(addr: &str, topic: &str, values: impl IntoIterator<Item = String>) {
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("acks", "1")
        .set("linger.ms", "10000")
        .create()
        .unwrap();
    for v in values {
        p.send(BaseRecord::<(), _>::to(topic).payload(&v).partition(0))
            .unwrap();
    }
    p.flush(Duration::from_secs(30)).unwrap();
}

/// A high watermark read while a held fsync is still held: else the fsync may have ended
/// and made the records visible, rightly, and the reading proves nothing.
/// Waits (at most 2 s) for an fsync the mount holds back to begin.
fn wait_for_held_fsync(mount: &Mount, whose: &str) {
    let asked = std::time::Instant::now();
    while mount.command("stats").unwrap().contains("\"delaying_now\":0") {
        assert!(
            asked.elapsed() < Duration::from_secs(2),
            "{whose} fsync never began"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn assert_fsync_still_held(mount: &Mount) {
    let stats = mount.command("stats").unwrap();
    assert!(
        !stats.contains("\"delaying_now\":0"),
        "the held fsync ended before the high watermark was read (a machine too slow for the 5 s rule): {stats}"
    );
}

#[test]
fn acks_all_survives_a_power_cut_and_unsynced_acks_1_does_not() {
    let tmp = tempfile::tempdir().unwrap();
    let (mount, data) = lazy_mount(tmp.path());
    let broker = common::serve(&data);
    let addr = broker.addr.clone();

    let cfg = VerifyConfig {
        bootstrap: addr.clone(),
        topic: "verified".into(),
        partitions: 4,
        records_per_s: 1000,
        duration_s: 6,
        record_bytes: 100,
        message_timeout_ms: 30_000,
    };
    let verifier = std::thread::spawn(move || verify(&cfg));
    std::thread::sleep(Duration::from_secs(2));

    // acks=1 is answered after the write, not the fsync: these stay in the "page cache" (the
    // fsync their consumers' visibility asks for is held back, as a slow disk would).
    common::create_topic(&addr, "unsynced", 1);
    mount.command("delay fsync **/unsynced-0/* 5000").unwrap();
    produce_acks_1(&addr, "unsynced", (0..100).map(|i| format!("r{i}")));
    // Written, acknowledged, and not visible to consumers: not on the disk.
    assert_eq!(common::high_watermark(&addr, "unsynced"), 0);
    assert_fsync_still_held(&mount);

    // The cut comes while their fsync is still held back; the kill then waits for it (a
    // process in a FUSE call dies when the call returns), and it syncs nothing.
    broker.freeze();
    let cut = mount.command("powercut").unwrap();
    broker.kill9();
    mount.command("clear").unwrap();
    let broker = common::serve_at(&data, &addr);

    let report = verifier.join().unwrap().unwrap();
    eprintln!("power cut {cut}; verifier {report:?}");
    assert!(report.acked >= 5000, "{report:?}");
    assert_eq!(
        (
            report.lost,
            report.duplicated,
            report.reordered,
            report.corrupted,
            report.moved
        ),
        (0, 0, 0, 0, 0),
        "{report:?}"
    );
    assert!(
        common::high_watermark(&broker.addr, "unsynced") < 100,
        "records never fsynced must not survive a power cut ({cut})"
    );
    broker.terminate();
    mount.unmount().unwrap();
}

/// Transactions through a power cut: every transaction whose commit was acknowledged is read
/// back by read_committed consumers, exactly once; the aborted one and the one left open
/// never are; and a new instance of the open one's id ends it.
#[test]
fn acknowledged_commits_survive_a_power_cut_and_aborts_stay_invisible() {
    let tmp = tempfile::tempdir().unwrap();
    let (mount, data) = lazy_mount(tmp.path());
    let broker = common::serve(&data);
    let addr = broker.addr.clone();
    common::create_topic(&addr, "txn-cut", 2);
    let txn_producer = |id: &str| -> ThreadedProducer<DefaultProducerContext> {
        let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
            .set("bootstrap.servers", &addr)
            .set("transactional.id", id)
            .set("linger.ms", "1")
            .create()
            .unwrap();
        p.init_transactions(Duration::from_secs(30)).unwrap();
        p
    };
    let send = |p: &ThreadedProducer<DefaultProducerContext>, prefix: &str| {
        for i in 0..10 {
            let v = format!("{prefix}-{i}");
            p.send(BaseRecord::<(), _>::to("txn-cut").payload(&v).partition(i % 2))
                .unwrap();
        }
    };
    let p = txn_producer("cut-committer");
    let mut committed = Vec::new();
    for t in 0..20 {
        p.begin_transaction().unwrap();
        let prefix = format!("c{t}");
        send(&p, &prefix);
        if t == 7 {
            // In the log first, so that the abort has records to hide.
            p.flush(Duration::from_secs(30)).unwrap();
            p.abort_transaction(Duration::from_secs(30)).unwrap();
        } else {
            p.commit_transaction(Duration::from_secs(30)).unwrap();
            committed.extend((0..10).map(|i| format!("{prefix}-{i}")));
        }
    }
    // Past log.flush.offset.checkpoint.interval.ms, so that the next flush (the open
    // transaction's produce) writes a checkpoint beyond the abort: recovery then trusts its
    // index entry rather than rebuilding it from the marker.
    std::thread::sleep(Duration::from_millis(1_500));
    let open = txn_producer("cut-open");
    open.begin_transaction().unwrap();
    send(&open, "open");
    open.flush(Duration::from_secs(30)).unwrap();
    drop(open);
    drop(p);

    broker.kill9();
    let cut = mount.command("powercut").unwrap();
    let broker = common::serve_at(&data, &addr);
    eprintln!("power cut {cut}");

    let read = |addr: &str| -> Vec<String> {
        let mut v: Vec<String> = common::read_to_end(addr, "txn-cut", 2, "read_committed")
            .into_iter()
            .map(|(_, _, v)| String::from_utf8(v).unwrap())
            .collect();
        v.sort();
        v
    };
    committed.sort();
    assert_eq!(
        read(&addr),
        committed,
        "every acknowledged commit, once; nothing else"
    );
    // The open transaction's id comes back: its transaction is aborted, not committed.
    let again = txn_producer("cut-open");
    drop(again);
    assert_eq!(read(&addr), committed);
    broker.terminate();
    mount.unmount().unwrap();
}

/// Issue 29, item 3, on a real fault: an fsync that fails loses what it did not write back
/// (faultfs keeps those pages readable and never writes them, as Linux does since 4.13). The
/// broker restarted on the same mount must serve only what survives a power cut: recovery
/// cuts the log where its last successful fsync reached instead of validating, and then
/// vouching for, what the failed one left in the "page cache". Without the cut the restarted
/// broker served the acks=1 records written before the failure, and the power cut then took
/// them away from under a consumer that had read them.
#[test]
fn what_a_restart_serves_after_a_failed_fsync_survives_a_power_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let (mount, data) = lazy_mount(tmp.path());
    // An fsync within 100 ms of an append, whoever asks for one.
    let serve = || common::serve_with(&data, "127.0.0.1:0", &["--set", "log.flush.interval.ms=100"]);
    let broker = serve();
    common::create_topic(&broker.addr, "failing", 1);
    let produce = |addr: &str, acks: &str, from: usize| {
        let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
            .set("bootstrap.servers", addr)
            .set("acks", acks)
            .set("message.timeout.ms", "10000")
            .create()
            .unwrap();
        for i in from..from + 50 {
            p.send(BaseRecord::<(), _>::to("failing").payload(&format!("r{i}")))
                .unwrap();
        }
        // acks=1 after the failure may be refused (the log went offline): what was
        // acknowledged is what the high watermark says.
        let _ = p.flush(Duration::from_secs(15));
    };
    produce(&broker.addr, "all", 0);
    assert_eq!(common::high_watermark(&broker.addr, "failing"), 50);
    mount.command("fail fsync **/failing-0/* EIO").unwrap();
    produce(&broker.addr, "1", 50);
    // The flusher's fsync of them fails: the log goes offline.
    std::thread::sleep(Duration::from_millis(1500));
    broker.kill9();
    mount.command("clear").unwrap();

    let broker = serve();
    let served = common::high_watermark(&broker.addr, "failing");
    broker.kill9();
    mount.command("powercut").unwrap();
    let broker = serve();
    let after_cut = common::high_watermark(&broker.addr, "failing");
    assert_eq!(
        (served, after_cut),
        (50, 50),
        "served after the failed fsync, and after a power cut: only what was fsynced"
    );
    broker.terminate();
    mount.unmount().unwrap();
}

/// Issue 29, item 8: consumers read only what is on the disk (`log.read.after.fsync`), so a
/// power cut never takes back a record a consumer has read, and no offset it read is used
/// again for another record. With the leader's fsyncs held back (a slow disk), acks=1
/// records are acknowledged but not visible; after a power cut and new records, every offset
/// the consumer read holds what it read. (Shown as Kafka shows records, the consumer read
/// the acks=1 ones, and after the cut their offsets held the new records.)
#[test]
fn a_power_cut_never_takes_back_what_a_consumer_read() {
    let tmp = tempfile::tempdir().unwrap();
    let (mount, data) = lazy_mount(tmp.path());
    let broker = common::serve(&data);
    let addr = broker.addr.clone();
    common::create_topic(&addr, "seen", 1);
    common::produce_values(&addr, "seen", 1, (0..50).map(|i| format!("a{i}")));
    mount.command("delay fsync **/seen-0/* 5000").unwrap();
    produce_acks_1(&addr, "seen", (0..50).map(|i| format!("b{i}")));
    let values = |addr: &str| -> Vec<Vec<u8>> {
        common::read_to_end(addr, "seen", 1, "read_uncommitted")
            .into_iter()
            .map(|(_, _, v)| v)
            .collect()
    };
    let read = values(&addr);
    assert_fsync_still_held(&mount);
    // The cut comes while their fsync is held back (see above).
    broker.freeze();
    mount.command("powercut").unwrap();
    broker.kill9();
    mount.command("clear").unwrap();
    let broker = common::serve_at(&data, &addr);
    common::produce_values(&addr, "seen", 1, (0..50).map(|i| format!("c{i}")));
    let after = values(&addr);
    let changed: Vec<usize> = (0..read.len())
        .filter(|i| after.get(*i) != Some(&read[*i]))
        .collect();
    assert!(
        changed.is_empty(),
        "{} of the {} offsets read before the cut hold another record after it, from offset {:?}",
        changed.len(),
        read.len(),
        changed.first()
    );
    assert_eq!(
        read.len(),
        50,
        "the acks=1 records were not visible before their fsync"
    );
    assert_eq!(after.len(), 100, "the cut took the acks=1 records, never fsynced");
    broker.terminate();
    mount.unmount().unwrap();
}

/// Issue 40: the race `acks_all_survives_...` once lost, made certain. The first acks=1
/// request's fsync is held back; a second request's write to the same file then waits for
/// it (on a FUSE mount the kernel holds the file's inode lock through the fsync), and is
/// answered once that fsync returns. By then the first record is on the disk and visible,
/// and only it: the high watermark is 1, the end that fsync covered, never the end written.
#[test]
fn a_write_waits_behind_a_held_fsync_and_consumers_see_only_what_it_covered() {
    let tmp = tempfile::tempdir().unwrap();
    let (mount, data) = lazy_mount(tmp.path());
    let broker = common::serve(&data);
    let addr = broker.addr.clone();
    common::create_topic(&addr, "split", 1);
    mount.command("delay fsync **/split-0/* 3000").unwrap();
    produce_acks_1(&addr, "split", ["r0".to_string()]);
    // acks=1 asks for no fsync; a reader does: ListOffsets latest asks for the one that
    // makes r0 visible (and answers without it).
    assert_eq!(common::high_watermark(&addr, "split"), 0);
    wait_for_held_fsync(&mount, "r0's");
    let started = std::time::Instant::now();
    produce_acks_1(&addr, "split", (1..100).map(|i| format!("r{i}")));
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1500),
        "the second write waited for the first fsync ({waited:?})"
    );
    // r0's fsync returned, and this reader asks for r1..r99's, held now.
    assert_eq!(common::high_watermark(&addr, "split"), 1);
    wait_for_held_fsync(&mount, "r1..r99's");
    mount.command("clear").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while common::high_watermark(&addr, "split") < 100 {
        assert!(std::time::Instant::now() < deadline, "visible once synced");
        std::thread::sleep(Duration::from_millis(50));
    }
    broker.terminate();
    mount.unmount().unwrap();
}

/// The history checker across a SIGKILL and a power cut: plain and transactional producers
/// and two consumers in a group run throughout, and the whole history (every
/// acknowledgement, every transaction's outcome, every poll) agrees with the log read back
/// afterwards: nothing lost, duplicated, reordered, read twice at one offset, read from an
/// aborted transaction or torn. (With `log.read.after.fsync = false` the consumers read
/// records the cut then took: the checker reports them lost, and offsets that held two
/// records.)
#[test]
fn the_history_of_producers_transactions_and_consumers_across_a_kill_and_a_power_cut_is_clean() {
    use laminar_load::history::workload::{run, WorkloadConfig};
    let tmp = tempfile::tempdir().unwrap();
    let (mount, data) = lazy_mount(tmp.path());
    let broker = common::serve(&data);
    let addr = broker.addr.clone();
    let history = tmp.path().join("history.jsonl");
    let cfg = WorkloadConfig {
        bootstrap: addr.clone(),
        topic: "history".into(),
        partitions: 4,
        replication_factor: 1,
        producers: 2,
        records_per_s: 300,
        txn_producers: 1,
        txns_per_s: 10,
        txn_records: 3,
        abort_every: 4,
        consumers: 2,
        duration_s: 10,
        record_bytes: 64,
        message_timeout_ms: 60_000,
        transaction_timeout_ms: 10_000,
        out: Some(history.clone()),
    };
    let workload = std::thread::spawn(move || run(&cfg));
    std::thread::sleep(Duration::from_secs(3));
    broker.kill9();
    let broker = common::serve_at(&data, &addr);
    std::thread::sleep(Duration::from_secs(2));
    // A disk that is slow to sync for the last second before the cut: records pile up written
    // and unsynced (the window a consumer shown unsynced records would read them in).
    mount.command("delay fsync **/history-*/* 2000").unwrap();
    std::thread::sleep(Duration::from_secs(1));
    broker.freeze();
    let cut = mount.command("powercut").unwrap();
    broker.kill9();
    mount.command("clear").unwrap();
    let broker = common::serve_at(&data, &addr);

    let report = workload.join().unwrap().unwrap();
    eprintln!("power cut {cut}; history {report:?}");
    assert_eq!(report.check.anomalies(), 0, "{:#?}", report.check.examples);
    // The history is what it claims: records acknowledged, transactions of both outcomes,
    // consumers that polled, and a final read holding them.
    let c = &report.check;
    assert!(
        c.acked > 3000 && c.txns_committed > 20 && c.txns_aborted > 5,
        "{c:?}"
    );
    assert!(
        c.polled > 1000 && c.assignments >= 2 && c.final_records >= c.acked,
        "{c:?}"
    );
    // Checked again from the file it wrote, the same answer.
    let events = laminar_load::history::read(&std::fs::read_to_string(&history).unwrap()).unwrap();
    assert_eq!(laminar_load::history::check(&events), report.check);
    // And against the log after one more cut: what the final read found is still there.
    broker.freeze();
    let cut = mount.command("powercut").unwrap();
    broker.kill9();
    let broker = common::serve_at(&data, &addr);
    let again = laminar_load::history::workload::reread(&addr, events).unwrap();
    assert_eq!(again.anomalies(), 0, "after {cut}: {:#?}", again.examples);
    assert_eq!(again.final_records, report.check.final_records);
    broker.terminate();
    mount.unmount().unwrap();
}

/// Issue 29 (the whole rotation's loss): a log cut back (a follower whose leader's epoch
/// began below its end) and replicated over with other batch boundaries, then a SIGKILL and
/// a restart, more batches, and a power cut, on the lazy fault file system (which undoes
/// unsynced names as well as data): every record flushed before the cut is there after it.
/// It was not (48 of 185): the power cut brought back the offset index of the layout before
/// the cut, which recovery followed into the middle of a new batch (see
/// `laminar-storage/tests/replication.rs` for the narrower tests).
#[test]
fn a_log_cut_back_and_replicated_over_survives_a_power_cut_on_faultfs() {
    use laminar_records::{BatchBuilder, Compression, RecordSpec};
    use laminar_storage::backend::RealStorage;
    use laminar_storage::{AppendMode, LogId, Offset, Store, StoreConfig};
    let tmp = tempfile::tempdir().unwrap();
    let (mount, data) = lazy_mount(tmp.path());
    let config = StoreConfig {
        default_log: laminar_storage::LogConfig {
            segment_bytes: 1 << 20,
            ..laminar_storage::LogConfig::default()
        },
        ..StoreConfig::default()
    };
    let batch = |records: usize, seed: u64, base: i64, epoch: i32| {
        // Timestamps rise from batch to batch, as a producer's do: the time index then has
        // entries, and recovery starts its walk from the last offset entry it trusts.
        let ts = 1000 + seed as i64 * 100;
        let mut b = BatchBuilder::new(Compression::None, ts);
        for i in 0..records {
            b.push(RecordSpec {
                timestamp_ms: ts + i as i64,
                key: Some(format!("k{seed}-{i}").into_bytes()),
                value: Some(vec![seed as u8; 100]),
                headers: vec![],
            });
        }
        let mut b = b.build().unwrap();
        b[..8].copy_from_slice(&base.to_be_bytes());
        b[12..16].copy_from_slice(&epoch.to_be_bytes());
        b
    };
    let id = LogId::new("t", 0);
    let store = Store::open(&data, RealStorage::new(), config.clone()).unwrap();
    let log = store.create_log(&id, config.default_log.clone()).unwrap();
    for i in 0..60i64 {
        log.append_as(&mut batch(1, i as u64, 0, 1), AppendMode::Leader { epoch: 1 })
            .unwrap();
        if i % 10 == 9 {
            log.flush().unwrap();
        }
    }
    // The leader's batches of twenty records each, from `base`, each flushed.
    let replicate = |log: &laminar_storage::Log, batches: i64, base: i64| {
        for k in 0..batches {
            let mut b = batch(20, (base + k) as u64, base + 20 * k, 2);
            log.append_as(&mut b, AppendMode::Replica).unwrap();
            log.flush().unwrap();
        }
    };
    let cut = store.truncate_log(&id, Offset(25)).unwrap();
    replicate(&cut, 5, 25);
    drop((log, cut, store)); // SIGKILL: the page cache keeps it all
    let store = Store::open(&data, RealStorage::new(), config.clone()).unwrap();
    let log = store.log(&id).unwrap();
    assert_eq!(log.log_end(), Offset(125));
    replicate(&log, 3, 125);
    drop((log, store));
    let cut = mount.command("powercut").unwrap();
    let store = Store::open(&data, RealStorage::new(), config).unwrap();
    let log = store.log(&id).unwrap();
    assert_eq!(
        log.log_end(),
        Offset(185),
        "every flushed record survives the cut ({cut})"
    );
    let read = log.read(Offset(0), 1 << 30, true).unwrap();
    assert!(read.range.is_some());
    drop((log, store));
    mount.unmount().unwrap();
}
