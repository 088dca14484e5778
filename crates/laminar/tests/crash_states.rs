//! Data directories as a crash can leave them, between two steps of one operation, and what
//! the broker must make of them at its next start.

mod common;

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

/// DeleteTopics persists the topics file, then removes the partitions' directories. A crash
/// in between leaves the directories; re-creating the topic must not serve their old data.
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
    broker.kill9();

    // The state right after the topics file was written without the topic.
    let path = data.join("topics.json");
    let mut file: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    file["topics"]
        .as_array_mut()
        .unwrap()
        .retain(|t| t["name"] != "gone");
    std::fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();
    assert!(data.join("gone-0").exists());

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
