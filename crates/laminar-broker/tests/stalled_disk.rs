//! Seed 002 made real: the broker's data directory is on laminar-faultfs, which stalls every
//! `write(2)` to one partition's files for 2 s. With a single configured storage thread, a
//! producer to another partition must not wait behind the stalled one.

mod common;

use std::time::{Duration, Instant};

use common::*;
use laminar_faultfs::{Mount, Options};

#[test]
fn a_stalled_partition_does_not_hold_up_the_partitions_sharing_its_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let (mount, mnt) = Mount::in_dir(tmp.path(), Options::default()).unwrap();
    let broker = TestBroker::start_in(mnt.join("data"), |c| {
        c.num_storage_threads = 1;
        c.num_partitions = 4;
    });
    let healthy = producer(&broker.addr, &[("linger.ms", "0")]);
    let stalled = producer(&broker.addr, &[("linger.ms", "0")]);
    send(&healthy, "s4", Some(0), &make_record(0));
    send(&stalled, "s4", Some(3), &make_record(0));
    flush(&healthy);
    flush(&stalled);

    mount.command("delay write *s4-3/* 2000").unwrap();
    let stalled_thread = std::thread::spawn(move || {
        let t = Instant::now();
        for i in 1..3 {
            send(&stalled, "s4", Some(3), &make_record(i));
        }
        flush(&stalled);
        t.elapsed()
    });
    std::thread::sleep(Duration::from_millis(200));
    let mut worst = Duration::ZERO;
    for i in 1..=20 {
        let t = Instant::now();
        send(&healthy, "s4", Some(0), &make_record(i));
        flush(&healthy);
        worst = worst.max(t.elapsed());
    }
    let stalled_took = stalled_thread.join().unwrap();
    assert!(
        stalled_took >= Duration::from_millis(2000),
        "the stall happened: {stalled_took:?}"
    );
    assert!(
        worst < Duration::from_millis(500),
        "a produce to a healthy partition waited {worst:?}"
    );
    mount.command("clear").unwrap();
    drop(broker);
    mount.unmount().unwrap();
}
