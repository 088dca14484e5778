mod common;

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Message, Offset, TopicPartitionList};

#[test]
fn produce_and_consume_with_librdkafka() {
    let b = common::TestBroker::start();
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &b.addr)
        .set("linger.ms", "5")
        .create()
        .unwrap();
    for i in 0..1000 {
        let v = format!("value-{i}");
        let k = format!("key-{i}");
        loop {
            match producer.send(BaseRecord::to("smoke").payload(&v).key(&k)) {
                Ok(()) => break,
                Err((e, _)) => panic!("send failed: {e}"),
            }
        }
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &b.addr)
        .set("group.id", "unused")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("smoke", 0, Offset::Beginning).unwrap();
    consumer.assign(&tpl).unwrap();
    let mut got = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while got < 1000 && std::time::Instant::now() < deadline {
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.unwrap();
            assert_eq!(m.offset(), got);
            assert_eq!(m.payload().unwrap(), format!("value-{got}").as_bytes());
            got += 1;
        }
    }
    assert_eq!(got, 1000);
}
