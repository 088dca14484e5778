//! Data directories as a crash can leave them, between two steps of one operation, and what
//! the broker must make of them at its next start.

mod common;

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

/// DeleteTopics commits the deletion to the cluster metadata, then the broker removes the
/// partitions' directories. A crash in between leaves the directories; re-creating the topic
/// must not serve their old data.
#[test]
fn a_topic_deleted_just_before_a_crash_does_not_come_back_with_its_data() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let broker = common::serve(&data);
    let addr = broker.addr.clone();
    common::create_topic(&addr, "gone", 1);
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &addr)
        .create()
        .unwrap();
    for i in 0..5 {
        p.send(BaseRecord::<(), _>::to("gone").payload(&format!("old-{i}")))
            .unwrap();
    }
    p.flush(Duration::from_secs(30)).unwrap();
    drop(p);
    assert_eq!(common::high_watermark(&addr, "gone"), 5);
    broker.terminate();
    // The crash comes after the controller committed the deletion and before the
    // directories were removed: the deletion is made, then the directory put back as it was.
    let kept = tmp.path().join("gone-0");
    copy_dir(&data.join("gone-0"), &kept);
    let broker = common::serve(&data);
    common::laminar(&["topics", "delete", "gone", "--bootstrap", &broker.addr]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while data.join("gone-0").exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        !data.join("gone-0").exists(),
        "the deleted topic's directory is removed"
    );
    broker.kill9();
    copy_dir(&kept, &data.join("gone-0"));

    let broker = common::serve(&data);
    assert!(
        !data.join("gone-0").exists(),
        "the orphaned log is removed at start"
    );
    common::create_topic(&broker.addr, "gone", 1);
    assert_eq!(
        common::high_watermark(&broker.addr, "gone"),
        0,
        "a new topic starts empty"
    );
    broker.terminate();
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}
