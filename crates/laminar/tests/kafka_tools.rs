//! Apache Kafka's own command-line tools (the classes behind `kafka-topics.sh`,
//! `kafka-get-offsets.sh`, `kafka-broker-api-versions.sh`, `kafka-log-dirs.sh`,
//! `kafka-cluster.sh`, `kafka-configs.sh`, `kafka-leader-election.sh`,
//! `kafka-reassign-partitions.sh`, `kafka-transactions.sh`, `kafka-delete-records.sh` and
//! `kafka-consumer-groups.sh`, from
//! the `kafka-tools` 4.3.1 jars on Maven Central) against `laminar serve`, with their output
//! checked as an operator would read it.
//!
//! The jars come from `bench/kafka/fetch-kafka.sh` (Maven; idempotent) into `KAFKA_LIB`
//! (default /tmp/kafka-lib); `.ci/run` installs Java and Maven.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

/// A tool that has not finished in this long is stuck (a JVM starts in 1-2 s here).
use common::tools::Tools;
use common::{free_port, kafka_lib};

const TOPICS: &str = "org.apache.kafka.tools.TopicCommand";
const GET_OFFSETS: &str = "org.apache.kafka.tools.GetOffsetShell";
const API_VERSIONS: &str = "org.apache.kafka.tools.BrokerApiVersionsCommand";
const GROUPS: &str = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";
const LOG_DIRS: &str = "org.apache.kafka.tools.LogDirsCommand";
const CLUSTER: &str = "org.apache.kafka.tools.ClusterTool";
const CONFIGS: &str = "kafka.admin.ConfigCommand";
const LEADER_ELECTION: &str = "org.apache.kafka.tools.LeaderElectionCommand";
const REASSIGN: &str = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand";
const TRANSACTIONS: &str = "org.apache.kafka.tools.TransactionsCommand";
const DELETE_RECORDS: &str = "org.apache.kafka.tools.DeleteRecordsCommand";
const CONSOLE_CONSUMER: &str = "org.apache.kafka.tools.consumer.ConsoleConsumer";

/// The whitespace-separated fields of the first line of `text` that starts with `prefix`.
fn row(text: &str, prefix: &str) -> Vec<String> {
    text.lines()
        .find(|l| l.trim_start().starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{text}"))
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn produce(addr: &str, topic: &str, partition: i32, n: usize) {
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .create()
        .unwrap();
    for i in 0..n {
        let v = format!("record-{i}");
        p.send(BaseRecord::<(), _>::to(topic).partition(partition).payload(&v))
            .unwrap();
    }
    p.flush(Duration::from_secs(30)).unwrap();
}

/// Consumes `n` records of `topic` in `group` and commits them.
fn consume_and_commit(addr: &str, topic: &str, group: &str, n: usize) {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    c.subscribe(&[topic]).unwrap();
    let mut got = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while got < n && Instant::now() < deadline {
        if let Some(Ok(_)) = c.poll(Duration::from_millis(100)) {
            got += 1;
        }
    }
    assert_eq!(got, n, "consumed in group {group}");
    c.commit_consumer_state(CommitMode::Sync).unwrap();
    c.unsubscribe();
}

#[test]
fn kafka_topics_get_offsets_and_api_versions() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = common::serve(&tmp.path().join("data"));
    let tools = Tools::new(&broker.addr, tmp.path());

    let created = tools.ok(TOPICS, &["--create", "--topic", "ops", "--partitions", "3"]);
    assert!(created.contains("Created topic ops."), "{created}");
    let again = tools.run(TOPICS, &["--create", "--topic", "ops", "--partitions", "3"]);
    assert!(!again.ok, "creating it twice fails");
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);

    let described = tools.ok(TOPICS, &["--describe", "--topic", "ops"]);
    let head = row(&described, "Topic: ops\tTopicId");
    assert_eq!(head[4..6], ["PartitionCount:", "3"], "{described}");
    for p in 0..3 {
        let line = row(&described, &format!("Topic: ops\tPartition: {p}\t"));
        assert_eq!(
            line[4..10],
            ["Leader:", "0", "Replicas:", "0", "Isr:", "0"],
            "{described}"
        );
    }

    tools.ok(TOPICS, &["--alter", "--topic", "ops", "--partitions", "5"]);
    let described = tools.ok(TOPICS, &["--describe", "--topic", "ops"]);
    assert_eq!(
        row(&described, "Topic: ops\tTopicId")[4..6],
        ["PartitionCount:", "5"]
    );
    let fewer = tools.run(TOPICS, &["--alter", "--topic", "ops", "--partitions", "2"]);
    assert!(!fewer.ok, "partitions cannot shrink");

    produce(&broker.addr, "ops", 1, 7);
    let offsets = tools.ok(GET_OFFSETS, &["--topic", "ops"]);
    let mut lines: Vec<&str> = offsets.lines().collect();
    lines.sort();
    assert_eq!(lines, ["ops:0:0", "ops:1:7", "ops:2:0", "ops:3:0", "ops:4:0"]);
    let earliest = tools.ok(
        GET_OFFSETS,
        &["--topic", "ops", "--partitions", "1", "--time", "-2"],
    );
    assert_eq!(earliest.trim(), "ops:1:0");

    // kafka-log-dirs prints two lines of progress, then JSON.
    let dirs = tools.ok(LOG_DIRS, &["--describe", "--topic-list", "ops"]);
    let json: serde_json::Value =
        serde_json::from_str(dirs.lines().last().unwrap()).unwrap_or_else(|e| panic!("{e}: {dirs}"));
    let log_dirs = &json["brokers"][0]["logDirs"];
    assert_eq!(log_dirs.as_array().unwrap().len(), 1, "{dirs}");
    let data_dir = std::fs::canonicalize(tmp.path().join("data")).unwrap();
    assert_eq!(log_dirs[0]["logDir"], data_dir.to_str().unwrap(), "{dirs}");
    assert!(log_dirs[0]["error"].is_null(), "{dirs}");
    let mut sizes: Vec<(String, u64)> = log_dirs[0]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["partition"].as_str().unwrap().to_string(),
                p["size"].as_u64().unwrap(),
            )
        })
        .collect();
    sizes.sort();
    assert_eq!(sizes.len(), 5, "{dirs}");
    assert_eq!(sizes[0], ("ops-0".to_string(), 0));
    assert!(
        sizes[1].0 == "ops-1" && sizes[1].1 > 7 * 8,
        "7 records take bytes: {dirs}"
    );

    // kafka-cluster asks DescribeCluster.
    let id = tools.ok(CLUSTER, &["cluster-id"]);
    assert!(
        id.starts_with("Cluster ID: ") && id.trim().len() > "Cluster ID: ".len(),
        "{id}"
    );
    let endpoints = tools.ok(CLUSTER, &["list-endpoints"]);
    let port = broker.addr.rsplit(':').next().unwrap();
    assert_eq!(
        row(&endpoints, "0 ")[..5],
        ["0", "127.0.0.1", port, "null", "unfenced"],
        "{endpoints}"
    );

    // One node: the only replica is the leader, so no election is needed and nothing moves.
    let elected = tools.ok(
        LEADER_ELECTION,
        &[
            "--election-type",
            "preferred",
            "--topic",
            "ops",
            "--partition",
            "1",
        ],
    );
    assert_eq!(
        elected.trim(),
        "Valid replica already elected for partitions ops-1"
    );
    let unknown = tools.run(
        LEADER_ELECTION,
        &[
            "--election-type",
            "unclean",
            "--topic",
            "nope",
            "--partition",
            "0",
        ],
    );
    assert!(
        !unknown.ok && unknown.stderr.contains("UnknownTopicOrPartitionException"),
        "{}",
        unknown.stderr
    );
    let reassigning = tools.ok(REASSIGN, &["--list"]);
    assert_eq!(reassigning.trim(), "No partition reassignments found.");

    let versions = tools.ok(API_VERSIONS, &[]);
    for api in [
        "Produce(0)",
        "Fetch(1)",
        "Metadata(3)",
        "ApiVersions(18)",
        "CreateTopics(19)",
    ] {
        let line = row(&versions, api);
        assert!(
            line.iter().any(|w| w == "[usable:"),
            "{api} is usable by the tool: {line:?}"
        );
    }

    let listed = tools.ok(TOPICS, &["--list"]);
    assert!(listed.lines().any(|l| l == "ops"), "{listed}");
    tools.ok(TOPICS, &["--delete", "--topic", "ops"]);
    let listed = tools.ok(TOPICS, &["--list"]);
    assert!(!listed.lines().any(|l| l == "ops"), "{listed}");
    broker.terminate();
}

#[test]
fn kafka_consumer_groups() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = common::serve(&tmp.path().join("data"));
    let tools = Tools::new(&broker.addr, tmp.path());
    tools.ok(TOPICS, &["--create", "--topic", "cg", "--partitions", "2"]);
    produce(&broker.addr, "cg", 0, 5);
    produce(&broker.addr, "cg", 1, 3);
    consume_and_commit(&broker.addr, "cg", "g1", 8);
    consume_and_commit(&broker.addr, "cg", "g2", 8);

    let listed = tools.ok(GROUPS, &["--list"]);
    let mut groups: Vec<&str> = listed.lines().filter(|l| !l.is_empty()).collect();
    groups.sort();
    assert_eq!(groups, ["g1", "g2"], "{listed}");

    // GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
    let described = tools.ok(GROUPS, &["--describe", "--group", "g1"]);
    assert_eq!(
        row(&described, "g1 ")[..6],
        ["g1", "cg", "0", "5", "5", "0"],
        "{described}"
    );

    let reset = tools.ok(
        GROUPS,
        &[
            "--reset-offsets",
            "--group",
            "g1",
            "--topic",
            "cg",
            "--to-earliest",
            "--execute",
        ],
    );
    let mut new_offsets: Vec<Vec<String>> = reset
        .lines()
        .filter(|l| l.starts_with("g1 "))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect();
    new_offsets.sort();
    assert_eq!(
        new_offsets,
        [["g1", "cg", "0", "0"], ["g1", "cg", "1", "0"]],
        "{reset}"
    );
    let described = tools.ok(GROUPS, &["--describe", "--group", "g1"]);
    let mut rows: Vec<Vec<String>> = described
        .lines()
        .filter(|l| l.starts_with("g1 "))
        .map(|l| l.split_whitespace().take(6).map(str::to_string).collect())
        .collect();
    rows.sort();
    assert_eq!(
        rows,
        [["g1", "cg", "0", "0", "5", "5"], ["g1", "cg", "1", "0", "3", "3"]],
        "{described}"
    );

    let deleted = tools.ok(GROUPS, &["--delete-offsets", "--group", "g1", "--topic", "cg:1"]);
    assert_eq!(row(&deleted, "cg ")[..3], ["cg", "1", "Successful"], "{deleted}");
    let described = tools.ok(GROUPS, &["--describe", "--group", "g1"]);
    assert!(
        !described
            .lines()
            .any(|l| l.starts_with("g1 ") && l.split_whitespace().nth(2) == Some("1")),
        "partition 1's offset is gone: {described}"
    );

    let deleted = tools.ok(GROUPS, &["--delete", "--group", "g2"]);
    assert!(
        deleted.contains("Deletion of requested consumer groups ('g2') was successful."),
        "{deleted}"
    );
    let listed = tools.ok(GROUPS, &["--list"]);
    assert_eq!(
        listed.lines().filter(|l| !l.is_empty()).collect::<Vec<_>>(),
        ["g1"]
    );
    broker.terminate();
}

/// `__consumer_offsets` in Kafka's schemas: Kafka's own decoders (the formatters behind
/// `kafka-console-consumer --formatter`, which lag monitors mirror) read the offset commits,
/// the group metadata and the tombstones of a deleted group that Laminar wrote there. And
/// the Java consumer, subscribed by pattern, leaves the internal topic out.
#[test]
fn kafkas_formatters_decode_consumer_offsets() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = common::serve(&tmp.path().join("data"));
    let tools = Tools::new(&broker.addr, tmp.path());
    tools.ok(TOPICS, &["--create", "--topic", "lagged", "--partitions", "1"]);
    produce(&broker.addr, "lagged", 0, 10);
    consume_and_commit(&broker.addr, "lagged", "monitored", 10);
    consume_and_commit(&broker.addr, "lagged", "doomed", 10);
    tools.ok(GROUPS, &["--delete", "--group", "doomed"]);

    // Every record there now, read without a group (which would add records of its own).
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &broker.addr)
        .create()
        .unwrap();
    let (_, high) = c
        .fetch_watermarks("__consumer_offsets", 0, Duration::from_secs(10))
        .unwrap();
    let high = high.to_string();
    let read = |formatter: &str| {
        tools.ok(
            CONSOLE_CONSUMER,
            &[
                "--topic",
                "__consumer_offsets",
                "--partition",
                "0",
                "--offset",
                "earliest",
                "--max-messages",
                &high,
                "--formatter",
                formatter,
                "--timeout-ms",
                "60000",
            ],
        )
    };
    let offsets = read("org.apache.kafka.tools.consumer.OffsetsMessageFormatter");
    for want in [
        r#"{"key":{"type":1,"data":{"group":"monitored","topic":"lagged","partition":0}},"value":{"version":3,"data":{"offset":10,"leaderEpoch":0,"metadata":"","commitTimestamp":"#,
        r#"{"key":{"type":1,"data":{"group":"doomed","topic":"lagged","partition":0}},"value":null}"#,
    ] {
        assert!(offsets.contains(want), "{want} is not in:\n{offsets}");
    }
    let groups = read("org.apache.kafka.tools.consumer.GroupMetadataMessageFormatter");
    for want in [
        r#"{"key":{"type":2,"data":{"group":"monitored"}},"value":{"version":3,"data":{"protocolType":"consumer","generation":1,"protocol":"range","leader":"rdkafka-"#,
        r#""clientId":"rdkafka","clientHost":"/127.0.0.1","rebalanceTimeout":300000,"sessionTimeout":45000,"#,
        // The member left: an empty group of the next generation.
        r#"{"key":{"type":2,"data":{"group":"monitored"}},"value":{"version":3,"data":{"protocolType":"consumer","generation":2,"protocol":null,"leader":null,"#,
        r#"{"key":{"type":2,"data":{"group":"doomed"}},"value":null}"#,
    ] {
        assert!(groups.contains(want), "{want} is not in:\n{groups}");
    }

    // A pattern subscription of the Java consumer: only the user's topic is assigned (and so
    // committed), not the internal one.
    let consumed = tools.ok(
        CONSOLE_CONSUMER,
        &[
            "--include",
            ".*",
            "--group",
            "by-pattern",
            "--from-beginning",
            "--max-messages",
            "10",
            "--timeout-ms",
            "30000",
        ],
    );
    assert_eq!(
        consumed.lines().filter(|l| l.starts_with("record-")).count(),
        10,
        "{consumed}"
    );
    let described = tools.ok(GROUPS, &["--describe", "--group", "by-pattern"]);
    let topics: Vec<String> = described
        .lines()
        .filter(|l| l.starts_with("by-pattern "))
        .map(|l| l.split_whitespace().nth(1).unwrap().to_string())
        .collect();
    assert_eq!(topics, ["lagged"], "{described}");
    broker.terminate();
}

/// Runs `tests/java/SeekWithLeaderEpoch.java` on `topic` (ten records in partition 0): the
/// Java consumer's position 5 at epoch 0 is valid and read from; one at epoch 7, which the
/// broker never had, is reported as a truncated log.
fn seek_with_leader_epoch(tools: &Tools, addr: &str, topic: &str) {
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/SeekWithLeaderEpoch.java");
    let r = tools.java(&[program.to_str().unwrap(), addr, topic]);
    assert!(r.ok, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(
        r.stdout.lines().collect::<Vec<_>>(),
        ["epoch 0: first offset 5", "epoch 7: LogTruncationException"],
        "{}",
        r.stderr
    );
}

/// The Java consumer (kafka-clients 4.3.1) validates a position that carries a leader epoch
/// with OffsetForLeaderEpoch before fetching from it (KIP-320): the epoch Laminar has passes,
/// and one it never had is reported as a truncated log, as Kafka's answer makes it.
#[test]
fn java_consumer_validates_positions_with_offset_for_leader_epoch() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = common::serve(&tmp.path().join("data"));
    let tools = Tools::new(&broker.addr, tmp.path());
    tools.ok(TOPICS, &["--create", "--topic", "epochs", "--partitions", "1"]);
    produce(&broker.addr, "epochs", 0, 10);
    seek_with_leader_epoch(&tools, &broker.addr, "epochs");
    broker.terminate();
}

/// Issue 29 (the clock round's non-monotonic poll): a position is validated against where
/// its epoch ends in the leader's log, not against the high watermark. Here the records'
/// fsync is held back (faultfs), so the high watermark stays at 0 while the log ends at 10,
/// as on a new leader whose high watermark lags its log. Before, the answer was bounded by
/// the high watermark (0), and the Java consumer took its valid position 5 for a truncated
/// log (LogTruncationException; librdkafka rewinds and reads a record again); as Kafka
/// answers (the epoch's end, 10), it waits for the records and reads from 5.
#[test]
fn a_position_above_the_high_watermark_is_not_taken_for_a_truncation() {
    use laminar_faultfs::{Mount, Options};
    let tmp = tempfile::tempdir().unwrap();
    let (mount, mnt) = Mount::in_dir(tmp.path(), Options::default()).unwrap();
    let broker = common::serve(&mnt.join("data"));
    let tools = Tools::new(&broker.addr, tmp.path());
    tools.ok(TOPICS, &["--create", "--topic", "lagging", "--partitions", "1"]);
    mount.command("delay fsync **/lagging-0/* 8000").unwrap();
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &broker.addr)
        .set("acks", "1")
        .create()
        .unwrap();
    for i in 0..10 {
        let v = format!("record-{i}");
        p.send(BaseRecord::<(), _>::to("lagging").partition(0).payload(&v))
            .unwrap();
    }
    p.flush(Duration::from_secs(30)).unwrap();
    assert_eq!(
        common::high_watermark(&broker.addr, "lagging"),
        0,
        "the fsync is held back"
    );
    seek_with_leader_epoch(&tools, &broker.addr, "lagging");
    broker.terminate();
    mount.unmount().unwrap();
}

/// The Java producer sends a batch with a keyless record to a compacted topic: the broker
/// refuses it with INVALID_RECORD and names the record (KIP-467), so the producer fails that
/// record with InvalidRecordException and the broker's reason, and the rest of its batch as
/// such, exactly as against Kafka; nothing is appended.
#[test]
fn java_producer_sees_which_record_a_compacted_topic_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = common::serve(&tmp.path().join("data"));
    let tools = Tools::new(&broker.addr, tmp.path());
    tools.ok(
        TOPICS,
        &[
            "--create",
            "--topic",
            "keyed",
            "--partitions",
            "1",
            "--config",
            "cleanup.policy=compact",
        ],
    );
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/KeylessToCompacted.java");
    let r = tools.java(&[program.to_str().unwrap(), &broker.addr, "keyed"]);
    assert!(r.ok, "{}\n{}", r.stdout, r.stderr);
    // The Java client's own words, its typo included.
    let part_of_batch =
        "KafkaException: Failed to append record because it was part of a batch which had one more more invalid records";
    assert_eq!(
        r.stdout.lines().collect::<Vec<_>>(),
        [
            format!("0 {part_of_batch}"),
            "1 InvalidRecordException: Compacted topic cannot accept message without key in topic partition keyed-0."
                .to_string(),
            format!("2 {part_of_batch}"),
        ],
        "{}",
        r.stderr
    );
    assert_eq!(common::high_watermark(&broker.addr, "keyed"), 0);
    broker.terminate();
}

/// The `NAME=VALUE` pairs of `kafka-configs --describe`'s output, sorted.
fn dynamic_configs(described: &str) -> Vec<String> {
    let mut out: Vec<String> = described
        .lines()
        .filter(|l| l.starts_with("  "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    out.sort();
    out
}

/// `kafka-configs` alters a topic's configs (IncrementalAlterConfigs), they survive a restart,
/// and what Laminar cannot do is refused with a reason: a cleanup policy that is neither
/// delete nor compact, and broker settings that are read at start only.
#[test]
fn kafka_configs_alter_topics_and_survive_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let broker = common::serve(&data);
    let tools = Tools::new(&broker.addr, tmp.path());
    tools.ok(TOPICS, &["--create", "--topic", "cfg", "--partitions", "2"]);
    let topic = ["--entity-type", "topics", "--entity-name", "cfg"];
    let alter = |tools: &Tools, op: &[&str]| tools.run(CONFIGS, &[&topic[..], &["--alter"], op].concat());

    let r = alter(
        &tools,
        &["--add-config", "retention.ms=86400000,segment.bytes=1048576"],
    );
    assert!(
        r.ok && r.stdout.contains("Completed updating config for topic cfg."),
        "{}{}",
        r.stdout,
        r.stderr
    );
    let described = tools.ok(CONFIGS, &[&topic[..], &["--describe"]].concat());
    assert_eq!(
        dynamic_configs(&described),
        ["retention.ms=86400000", "segment.bytes=1048576"]
    );

    let r = alter(&tools, &["--delete-config", "segment.bytes"]);
    assert!(r.ok, "{}", r.stderr);
    let r = alter(&tools, &["--add-config", "cleanup.policy=compact"]);
    assert!(r.ok, "{}", r.stderr);
    let r = alter(&tools, &["--add-config", "cleanup.policy=shred"]);
    assert!(
        !r.ok && r.stderr.contains("InvalidConfigurationException"),
        "{}",
        r.stderr
    );
    let r = tools.run(
        CONFIGS,
        &[
            "--entity-type",
            "brokers",
            "--entity-name",
            "0",
            "--alter",
            "--add-config",
            "num.io.threads=8",
        ],
    );
    assert!(
        !r.ok && r.stderr.contains("set it in its config file"),
        "{}",
        r.stderr
    );

    broker.terminate();
    let broker = common::serve(&data);
    let tools = Tools::new(&broker.addr, tmp.path());
    let described = tools.ok(CONFIGS, &[&topic[..], &["--describe"]].concat());
    assert_eq!(
        dynamic_configs(&described),
        ["cleanup.policy=compact", "retention.ms=86400000"],
        "after a restart"
    );
    broker.terminate();
}

/// `kafka-configs --describe --all` shows where each value comes from: a topic override, the
/// broker's config file, or the default, with the synonyms under it, as Kafka prints them.
#[test]
fn kafka_configs_describe_all_shows_sources_and_synonyms() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("laminar.toml");
    std::fs::write(&config, "\"log.retention.ms\" = 3600000\n").unwrap();
    let broker = common::serve_with(
        &tmp.path().join("data"),
        "127.0.0.1:0",
        &["--config", config.to_str().unwrap()],
    );
    let tools = Tools::new(&broker.addr, tmp.path());
    tools.ok(TOPICS, &["--create", "--topic", "cfg", "--partitions", "1"]);
    let line = |described: &str, name: &str| -> String {
        described
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name} in {described}"))
            .trim()
            .to_string()
    };
    let topic = ["--entity-type", "topics", "--entity-name", "cfg"];
    let described = tools.ok(CONFIGS, &[&topic[..], &["--describe", "--all"]].concat());
    assert_eq!(
        line(&described, "retention.ms"),
        "retention.ms=3600000 sensitive=false \
         synonyms={STATIC_BROKER_CONFIG:log.retention.ms=3600000, DEFAULT_CONFIG:log.retention.ms=604800000}"
    );
    assert_eq!(
        line(&described, "segment.bytes"),
        "segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}"
    );
    tools.ok(
        CONFIGS,
        &[&topic[..], &["--alter", "--add-config", "retention.ms=86400000"]].concat(),
    );
    let described = tools.ok(CONFIGS, &[&topic[..], &["--describe", "--all"]].concat());
    assert_eq!(
        line(&described, "retention.ms"),
        "retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000, \
         STATIC_BROKER_CONFIG:log.retention.ms=3600000, DEFAULT_CONFIG:log.retention.ms=604800000}"
    );

    let brokers = ["--entity-type", "brokers", "--entity-name", "0"];
    let described = tools.ok(CONFIGS, &[&brokers[..], &["--describe", "--all"]].concat());
    assert_eq!(
        line(&described, "log.retention.ms"),
        "log.retention.ms=3600000 sensitive=false \
         synonyms={STATIC_BROKER_CONFIG:log.retention.ms=3600000, DEFAULT_CONFIG:log.retention.ms=604800000}"
    );
    assert_eq!(
        line(&described, "num.partitions"),
        "num.partitions=1 sensitive=false synonyms={DEFAULT_CONFIG:num.partitions=1}"
    );
    broker.terminate();
}

/// Dynamic broker configs with `kafka-configs --entity-type brokers`: the cluster default
/// (`--entity-default`) and this broker's (`--entity-name 0`) apply at once to topics without
/// an override (a smaller `log.segment.bytes` rolls segments), survive a restart, and can be
/// deleted; settings read only at start are refused with the reason.
#[test]
fn kafka_configs_alter_broker_configs_dynamically() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let broker = common::serve(&data);
    let tools = Tools::new(&broker.addr, tmp.path());
    tools.ok(TOPICS, &["--create", "--topic", "dyn", "--partitions", "1"]);
    let default = ["--entity-type", "brokers", "--entity-default"];
    let this = ["--entity-type", "brokers", "--entity-name", "0"];
    tools.ok(
        CONFIGS,
        &[
            &default[..],
            &["--alter", "--add-config", "log.retention.ms=7200000"],
        ]
        .concat(),
    );
    tools.ok(
        CONFIGS,
        &[
            &this[..],
            &["--alter", "--add-config", "log.segment.bytes=1048576"],
        ]
        .concat(),
    );
    let r = tools.run(
        CONFIGS,
        &[&this[..], &["--alter", "--add-config", "num.io.threads=8"]].concat(),
    );
    assert!(
        !r.ok && r.stderr.contains("set it in its config file"),
        "{}",
        r.stderr
    );

    // The topic has no override: its records now roll 1 MiB segments, not 1 GiB ones. A roll
    // is deferred while the segment preparer is behind (on a loaded machine the segment grows
    // past `segment.bytes` rather than the append wait for a file), so records go on, a MiB
    // at a time, until three segments exist; 64 MiB is far below the default's first roll.
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &broker.addr)
        .create()
        .unwrap();
    let record = vec![b'x'; 100 << 10];
    let segments = || {
        std::fs::read_dir(data.join("dyn-0"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "log"))
            .count()
    };
    let mut sent_mib = 0;
    while segments() < 3 && sent_mib < 64 {
        for _ in 0..10 {
            p.send(BaseRecord::<(), _>::to("dyn").payload(&record[..]))
                .unwrap();
        }
        p.flush(Duration::from_secs(30)).unwrap();
        sent_mib += 1;
    }
    assert!(segments() >= 3, "{} segments after {sent_mib} MiB", segments());
    drop(p);

    let check = |tools: &Tools| {
        let described = tools.ok(CONFIGS, &[&this[..], &["--describe"]].concat());
        assert!(
            described.contains(
                "log.segment.bytes=1048576 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.segment.bytes=1048576, \
                 DEFAULT_CONFIG:log.segment.bytes=1073741824}"
            ),
            "{described}"
        );
        let described = tools.ok(CONFIGS, &[&default[..], &["--describe"]].concat());
        assert!(
            described.contains(
                "log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000}"
            ),
            "{described}"
        );
        let topic = [
            "--entity-type",
            "topics",
            "--entity-name",
            "dyn",
            "--describe",
            "--all",
        ];
        let described = tools.ok(CONFIGS, &topic);
        assert!(
            described.contains(
                "retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000, \
                 DEFAULT_CONFIG:log.retention.ms=604800000}"
            ),
            "{described}"
        );
    };
    check(&tools);
    broker.terminate();
    let broker = common::serve(&data);
    let tools = Tools::new(&broker.addr, tmp.path());
    check(&tools);

    tools.ok(
        CONFIGS,
        &[&default[..], &["--alter", "--delete-config", "log.retention.ms"]].concat(),
    );
    let described = tools.ok(CONFIGS, &[&default[..], &["--describe"]].concat());
    assert!(!described.contains("log.retention.ms"), "{described}");
    broker.terminate();
}

/// `kafka-configs --entity-type clients` sets, describes and deletes client quotas (through
/// AlterClientQuotas and DescribeClientQuotas), for one client-id and for the default, and
/// they survive a restart.
#[test]
fn kafka_configs_client_quotas_survive_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let broker = common::serve(&data);
    let tools = Tools::new(&broker.addr, tmp.path());
    let named = ["--entity-type", "clients", "--entity-name", "reporting"];
    let default = ["--entity-type", "clients", "--entity-default"];
    let out = tools.ok(
        CONFIGS,
        &[
            &named[..],
            &[
                "--alter",
                "--add-config",
                "consumer_byte_rate=1048576,producer_byte_rate=2097152",
            ],
        ]
        .concat(),
    );
    assert!(
        out.contains("Completed updating config for client reporting."),
        "{out}"
    );
    let out = tools.ok(
        CONFIGS,
        &[
            &default[..],
            &["--alter", "--add-config", "consumer_byte_rate=5000000"],
        ]
        .concat(),
    );
    assert!(
        out.contains("Completed updating default config for clients"),
        "{out}"
    );

    broker.terminate();
    let broker = common::serve(&data);
    let tools = Tools::new(&broker.addr, tmp.path());
    let out = tools.ok(CONFIGS, &[&named[..], &["--describe"]].concat());
    assert!(
        out.contains(
            "Quota configs for client-id 'reporting' are consumer_byte_rate=1048576.0, producer_byte_rate=2097152.0"
        ),
        "{out}"
    );
    let out = tools.ok(CONFIGS, &[&default[..], &["--describe"]].concat());
    assert!(out.contains("consumer_byte_rate=5000000.0"), "{out}");

    tools.ok(
        CONFIGS,
        &[&named[..], &["--alter", "--delete-config", "producer_byte_rate"]].concat(),
    );
    let out = tools.ok(CONFIGS, &[&named[..], &["--describe"]].concat());
    assert!(
        out.contains("Quota configs for client-id 'reporting' are consumer_byte_rate=1048576.0")
            && !out.contains("producer_byte_rate"),
        "{out}"
    );
    broker.terminate();
}

/// `kafka-transactions describe-producers` lists the idempotent producers a partition
/// remembers: librdkafka's, with its epoch and last sequence, also after a restart (rebuilt
/// from the log's tail).
#[test]
fn kafka_transactions_describe_producers() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let broker = common::serve(&data);
    let tools = Tools::new(&broker.addr, tmp.path());
    tools.ok(TOPICS, &["--create", "--topic", "idem", "--partitions", "2"]);
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &broker.addr)
        .set("enable.idempotence", "true")
        .create()
        .unwrap();
    for i in 0..6 {
        p.send(
            BaseRecord::<(), _>::to("idem")
                .partition(0)
                .payload(&format!("r{i}")),
        )
        .unwrap();
    }
    p.flush(Duration::from_secs(30)).unwrap();
    drop(p);

    let describe = |tools: &Tools, partition: &str| {
        tools.ok_bootstrap_first(
            TRANSACTIONS,
            &["describe-producers", "--topic", "idem", "--partition", partition],
        )
    };
    // ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence LastTimestamp CurrentTransactionStartOffset
    let check = |described: &str| {
        let rows: Vec<Vec<&str>> = described
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().collect())
            .filter(|r: &Vec<&str>| !r.is_empty())
            .collect();
        assert_eq!(rows.len(), 1, "one producer: {described}");
        let r = &rows[0];
        assert!(r[0].parse::<i64>().unwrap() >= 0, "{described}");
        assert_eq!(
            r[1..4],
            ["0", "-1", "5"],
            "epoch 0, no coordinator, last sequence 5: {described}"
        );
        assert!(
            r[4].parse::<i64>().unwrap() > 1_600_000_000_000,
            "a timestamp: {described}"
        );
        assert_eq!(r[5], "None", "no open transaction: {described}");
    };
    check(&describe(&tools, "0"));
    let other = describe(&tools, "1");
    assert_eq!(
        other.lines().filter(|l| !l.trim().is_empty()).count(),
        1,
        "a header only: {other}"
    );

    broker.terminate();
    let broker = common::serve(&data);
    let tools = Tools::new(&broker.addr, tmp.path());
    check(&describe(&tools, "0"));
    broker.terminate();
}

/// `kafka-transactions abort` of partition 0 of `topic`, with `args` naming what.
fn abort(tools: &Tools, topic: &str, args: &[&str]) {
    let mut all = vec!["abort", "--topic", topic, "--partition", "0"];
    all.extend_from_slice(args);
    tools.ok_bootstrap_first(TRANSACTIONS, &all);
}

/// A transactional producer with a transaction open: four records written to `topic`-0.
fn open_transaction(addr: &str, id: &str, topic: &str) -> ThreadedProducer<DefaultProducerContext> {
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("transactional.id", id)
        .create()
        .unwrap();
    p.init_transactions(Duration::from_secs(30)).unwrap();
    p.begin_transaction().unwrap();
    for i in 0..4 {
        let v = format!("open-{i}");
        p.send(BaseRecord::<str, str>::to(topic).payload(&v).partition(0))
            .unwrap();
    }
    p.flush(Duration::from_secs(30)).unwrap();
    p
}

/// `kafka-transactions list`, `describe` and `abort`: a transaction left open by a producer
/// that went away is listed and described by the coordinator, its start offset is found with
/// `describe-producers`, and `abort` ends it with a marker (WriteTxnMarkers), after which
/// read_committed consumers pass it.
#[test]
fn kafka_transactions_list_describe_and_abort() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = common::serve(&tmp.path().join("data"));
    let tools = Tools::new(&broker.addr, tmp.path());
    tools.ok(TOPICS, &["--create", "--topic", "hang", "--partitions", "1"]);
    produce(&broker.addr, "hang", 0, 3);
    let p = open_transaction(&broker.addr, "tx-hanging", "hang");
    // Gone without ending it.
    drop(p);

    let listed = tools.ok_bootstrap_first(TRANSACTIONS, &["list"]);
    let line = row(&listed, "tx-hanging");
    assert_eq!(line[3], "Ongoing", "{listed}");
    let described = tools.ok_bootstrap_first(TRANSACTIONS, &["describe", "--transactional-id", "tx-hanging"]);
    assert!(
        described.contains("Ongoing") && described.contains("hang-0"),
        "{described}"
    );

    // The open transaction starts at offset 3, after the three plain records.
    let producers = tools.ok_bootstrap_first(
        TRANSACTIONS,
        &["describe-producers", "--topic", "hang", "--partition", "0"],
    );
    let open: Vec<&str> = producers
        .lines()
        .filter(|l| l.split_whitespace().last() == Some("3"))
        .collect();
    assert_eq!(
        open.len(),
        1,
        "one producer with a transaction open at 3: {producers}"
    );
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &broker.addr)
        .set("isolation.level", "read_committed")
        .create()
        .unwrap();
    let lso = |c: &BaseConsumer| {
        let mut tpl = rdkafka::TopicPartitionList::new();
        tpl.add_partition_offset("hang", 0, rdkafka::Offset::End).unwrap();
        c.offsets_for_times(tpl, Duration::from_secs(30))
            .unwrap()
            .find_partition("hang", 0)
            .unwrap()
            .offset()
    };
    assert_eq!(
        lso(&c),
        rdkafka::Offset::Offset(3),
        "read_committed ends where it began"
    );

    abort(&tools, "hang", &["--start-offset", "3"]);
    let producers = tools.ok_bootstrap_first(
        TRANSACTIONS,
        &["describe-producers", "--topic", "hang", "--partition", "0"],
    );
    assert!(
        producers
            .lines()
            .skip(1)
            .all(|l| matches!(l.split_whitespace().last(), Some("None") | None)),
        "no transaction open after the abort: {producers}"
    );
    // The three records, four aborted ones and the marker: read_committed reaches the end.
    assert_eq!(lso(&c), rdkafka::Offset::Offset(8));
    broker.terminate();
}

/// `kafka-transactions abort` on a single node does not end a transaction behind its
/// coordinator: aborting one whose producer is still running fences that producer, so its
/// commit fails instead of being answered for records the marker aborted. An abort naming an
/// idempotent producer with no transaction open writes nothing (it would move its epoch).
#[test]
fn kafka_transactions_abort_does_not_end_a_running_transaction_behind_its_coordinator() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = common::serve(&tmp.path().join("data"));
    let tools = Tools::new(&broker.addr, tmp.path());
    tools.ok(TOPICS, &["--create", "--topic", "live", "--partitions", "1"]);
    let p = open_transaction(&broker.addr, "tx-live", "live");
    abort(&tools, "live", &["--start-offset", "0"]);
    let committed = p.commit_transaction(Duration::from_secs(30));
    assert!(
        committed.is_err(),
        "the producer was told its transaction committed, but an abort marker had ended it"
    );
    drop(p);

    let idempotent: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &broker.addr)
        .set("enable.idempotence", "true")
        .create()
        .unwrap();
    let send = |v: &str| {
        idempotent
            .send(BaseRecord::<str, str>::to("live").payload(v).partition(0))
            .unwrap();
        idempotent.flush(Duration::from_secs(30)).unwrap();
    };
    send("after-0");
    send("after-1");
    let describe = || {
        tools.ok_bootstrap_first(
            TRANSACTIONS,
            &["describe-producers", "--topic", "live", "--partition", "0"],
        )
    };
    // ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence LastTimestamp
    // CurrentTransactionStartOffset: the idempotent producer's last sequence is 1.
    let producers = describe();
    let line = producers
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|c| c.len() == 6 && c[3] == "1")
        .unwrap_or_else(|| panic!("no idempotent producer at sequence 1: {producers}"));
    let (pid, epoch) = (line[0].to_string(), line[1].to_string());
    let next_epoch = (epoch.parse::<i16>().unwrap() + 1).to_string();
    abort(
        &tools,
        "live",
        &[
            "--producer-id",
            &pid,
            "--producer-epoch",
            &next_epoch,
            "--coordinator-epoch",
            "0",
        ],
    );
    let producers = describe();
    assert!(
        producers.lines().any(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            c.len() == 6 && c[0] == pid && c[1] == epoch
        }),
        "the idempotent producer {pid} keeps epoch {epoch}: {producers}"
    );
    send("after-2");

    // read_committed: nothing of the aborted transaction, then the three.
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &broker.addr)
        .set("group.id", "after-abort")
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset("live", 0, rdkafka::Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let mut read = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while read.len() < 3 && Instant::now() < deadline {
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            let m = m.unwrap();
            let v = rdkafka::Message::payload(&m).unwrap_or_default();
            read.push(String::from_utf8_lossy(v).into_owned());
        }
    }
    assert_eq!(read, ["after-0", "after-1", "after-2"]);
    broker.terminate();
}

/// The offset of the first record a fresh consumer reads from the beginning of a partition.
fn first_offset(addr: &str, topic: &str, partition: i32) -> i64 {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "first-offset")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, rdkafka::Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            return rdkafka::Message::offset(&m.unwrap());
        }
    }
    panic!("nothing to read in {topic}-{partition}");
}

#[test]
fn kafka_delete_records_moves_the_log_start_for_good() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let broker = common::serve(&data);
    let tools = Tools::new(&broker.addr, tmp.path());
    tools.ok(TOPICS, &["--create", "--topic", "trim", "--partitions", "3"]);
    produce(&broker.addr, "trim", 0, 10);
    produce(&broker.addr, "trim", 1, 3);

    // Partition 0 below offset 4; partition 1 up to its high watermark (-1); partition 2 past
    // its end, which is refused.
    let offsets = tmp.path().join("offsets.json");
    std::fs::write(
        &offsets,
        r#"{"version":1,"partitions":[
            {"topic":"trim","partition":0,"offset":4},
            {"topic":"trim","partition":1,"offset":-1},
            {"topic":"trim","partition":2,"offset":5}]}"#,
    )
    .unwrap();
    let deleted = tools.ok(DELETE_RECORDS, &["--offset-json-file", offsets.to_str().unwrap()]);
    assert!(
        deleted.contains("partition: trim-0\tlow_watermark: 4"),
        "{deleted}"
    );
    assert!(
        deleted.contains("partition: trim-1\tlow_watermark: 3"),
        "{deleted}"
    );
    assert!(
        deleted.contains("partition: trim-2\terror: ") && deleted.contains("OffsetOutOfRange"),
        "{deleted}"
    );

    let earliest = |tools: &Tools| {
        let out = tools.ok(GET_OFFSETS, &["--topic", "trim", "--time", "-2"]);
        let mut lines: Vec<String> = out.lines().map(str::to_string).collect();
        lines.sort();
        lines
    };
    assert_eq!(earliest(&tools), ["trim:0:4", "trim:1:3", "trim:2:0"]);
    assert_eq!(first_offset(&broker.addr, "trim", 0), 4);

    // The new start is on disk: a restart does not bring the deleted records back.
    broker.terminate();
    let broker = common::serve(&data);
    let tools = Tools::new(&broker.addr, tmp.path());
    assert_eq!(earliest(&tools), ["trim:0:4", "trim:1:3", "trim:2:0"]);
    assert_eq!(first_offset(&broker.addr, "trim", 0), 4);
    broker.terminate();
}

/// A Kafka Connect distributed worker (`ConnectDistributed`, connect-runtime 4.3.1), its log
/// in a file; killed if the test fails half-way.
struct ConnectWorker {
    child: std::process::Child,
    rest: String,
    log: PathBuf,
}

impl ConnectWorker {
    fn start(tools: &Tools, properties: &Path, log: &Path) -> ConnectWorker {
        let rest = std::fs::read_to_string(properties)
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("listeners=http://").map(str::to_string))
            .expect("listeners= in the worker's properties");
        let child = Command::new("java")
            .arg("-Xmx512m")
            .arg(format!("-Dlog4j2.configurationFile={}", tools.log4j.display()))
            .arg("-cp")
            .arg(format!("{}/*", kafka_lib().display()))
            .arg("org.apache.kafka.connect.cli.ConnectDistributed")
            .arg(properties)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(log.with_extension("out")).unwrap())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("java ConnectDistributed");
        let worker = ConnectWorker {
            child,
            rest,
            log: log.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        while worker.http("GET", "/connectors", None).0 != 200 {
            assert!(
                Instant::now() < deadline,
                "the Connect worker's REST API did not come up:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        worker
    }

    /// One request to the worker's REST API: (status, body); status 0 if it is not up.
    fn http(&self, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
        let Ok(mut s) = std::net::TcpStream::connect(&self.rest) else {
            return (0, String::new());
        };
        let body = body.unwrap_or("");
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.rest,
            body.len()
        );
        if s.write_all(request.as_bytes()).is_err() {
            return (0, String::new());
        }
        let mut text = String::new();
        if s.read_to_string(&mut text).is_err() {
            return (0, String::new());
        }
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        (status, body)
    }

    /// SIGTERM: the worker stops its tasks and commits their offsets first.
    fn stop(mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(80).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                panic!(
                    "the Connect worker did not stop within 60 s of SIGTERM; its log ends:\n{}",
                    tail.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for ConnectWorker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn wait_for_lines(path: &Path, want: &[String], worker_log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let got = lines_of(path);
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline && got.len() <= want.len(),
            "{} has {} lines, {} expected (first: {:?}); worker log:\n{}",
            path.display(),
            got.len(),
            want.len(),
            got.first(),
            std::fs::read_to_string(worker_log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Issue 11: Kafka Connect 4.3.1 in distributed mode runs on Laminar. Its config, offset and
/// status topics are created compacted; a FileStreamSource connector copies a file into a
/// topic and a FileStreamSink connector copies the topic into another file; the worker,
/// stopped and started again, resumes from its stored offsets: the lines added meanwhile,
/// and no line twice.
#[test]
fn kafka_connect_copies_a_file_through_laminar_and_resumes_after_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = common::serve(&tmp.path().join("data"));
    let tools = Tools::new(&broker.addr, tmp.path());
    let input = tmp.path().join("input.txt");
    let output = tmp.path().join("output.txt");
    let mut lines: Vec<String> = (0..100).map(|i| format!("line {i}")).collect();
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let properties = tmp.path().join("worker.properties");
    std::fs::write(
        &properties,
        format!(
            "bootstrap.servers={}\ngroup.id=laminar-connect\n\
             key.converter=org.apache.kafka.connect.storage.StringConverter\n\
             value.converter=org.apache.kafka.connect.storage.StringConverter\n\
             config.storage.topic=connect-configs\noffset.storage.topic=connect-offsets\n\
             status.storage.topic=connect-status\nconfig.storage.replication.factor=1\n\
             offset.storage.replication.factor=1\nstatus.storage.replication.factor=1\n\
             offset.storage.partitions=5\nstatus.storage.partitions=1\n\
             offset.flush.interval.ms=500\nlisteners=http://127.0.0.1:{}\n",
            broker.addr,
            free_port()
        ),
    )
    .unwrap();
    let log = tmp.path().join("worker.log");
    let worker = ConnectWorker::start(&tools, &properties, &log);

    // The worker created its topics compacted (it refuses to start on any other).
    for topic in ["connect-configs", "connect-offsets", "connect-status"] {
        let described = tools.ok(
            CONFIGS,
            &["--entity-type", "topics", "--entity-name", topic, "--describe"],
        );
        assert!(
            described.contains("cleanup.policy=compact"),
            "{topic}: {described}"
        );
    }

    let source = format!(
        r#"{{"name":"file-in","config":{{"connector.class":"org.apache.kafka.connect.file.FileStreamSourceConnector","tasks.max":"1","file":"{}","topic":"lines"}}}}"#,
        input.display()
    );
    let sink = format!(
        r#"{{"name":"file-out","config":{{"connector.class":"org.apache.kafka.connect.file.FileStreamSinkConnector","tasks.max":"1","file":"{}","topics":"lines"}}}}"#,
        output.display()
    );
    for c in [&source, &sink] {
        let (status, body) = worker.http("POST", "/connectors", Some(c));
        assert_eq!(status, 201, "{body}");
    }
    wait_for_lines(&output, &lines, &log);
    worker.stop();

    // Lines added while the worker is down; the restarted worker finds its connectors in the
    // config topic and its positions in the offset topic and the sink's consumer group.
    let more: Vec<String> = (100..150).map(|i| format!("line {i}")).collect();
    let mut f = std::fs::OpenOptions::new().append(true).open(&input).unwrap();
    f.write_all((more.join("\n") + "\n").as_bytes()).unwrap();
    drop(f);
    lines.extend(more);
    let worker = ConnectWorker::start(&tools, &properties, &log.with_extension("2.log"));
    wait_for_lines(&output, &lines, &log.with_extension("2.log"));
    assert_eq!(
        common::high_watermark(&broker.addr, "lines"),
        150,
        "no line produced twice"
    );
    worker.stop();
    broker.terminate();
}
