//! A power cut under the broker, for real: its data directory is on a lazy faultfs mount,
//! which keeps every write that was not fsynced in memory and drops it at the cut. The
//! delivery verifier (`laminar perf verify`, in-process) produces at acks=all across a
//! SIGKILL, a power cut and a restart on the same address, and nothing it saw acknowledged
//! may be lost, duplicated, reordered or corrupted. Records produced at acks=1 just before
//! the cut, never fsynced, show that the cut really drops data.

mod common;

use std::time::Duration;

use laminar_faultfs::{Mount, Options};
use laminar_perf::verify::{verify, VerifyConfig};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

#[test]
fn acks_all_survives_a_power_cut_and_unsynced_acks_1_does_not() {
    let tmp = tempfile::tempdir().unwrap();
    let lazy = Options {
        lazy: true,
        ..Options::default()
    };
    let (mount, mnt) = Mount::in_dir(tmp.path(), lazy).unwrap();
    let data = mnt.join("data");
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

    // acks=1 is answered after the write, not the fsync: these stay in the "page cache".
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &addr)
        .set("acks", "1")
        .create()
        .unwrap();
    for i in 0..100 {
        p.send(BaseRecord::<(), _>::to("unsynced").payload(&format!("r{i}")))
            .unwrap();
    }
    p.flush(Duration::from_secs(30)).unwrap();
    drop(p);
    assert_eq!(common::high_watermark(&addr, "unsynced"), 100);

    broker.kill9();
    let cut = mount.command("powercut").unwrap();
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
