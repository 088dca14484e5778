//! The authorizer with real clients: ACLs made with Kafka's `kafka-acls` over the PLAINTEXT
//! listener (whose `User:ANONYMOUS` is a super user), then librdkafka as alice over
//! SASL_PLAINTEXT (PLAIN) gets each of Kafka's authorization errors where her ACLs stop:
//! produce, fetch, group join and commit, transactions, topic creation and description,
//! configs.

mod common;

use std::time::Duration;

use common::tools::Tools;
use common::{free_port, Serve};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{DefaultProducerContext, Producer, ThreadedProducer};

fn start(tmp: &std::path::Path) -> (Serve, String, String) {
    common::serve_with_authorizer(
        tmp,
        &[("alice", "alice-secret"), ("mallory", "mallory-secret")],
        "",
    )
}

fn alice(addr: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", addr)
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "PLAIN")
        .set("sasl.username", "alice")
        .set("sasl.password", "alice-secret");
    c
}

/// The error producing one record to `topic` as alice ends with (`None`: delivered).
fn produce(addr: &str, topic: &str) -> Option<RDKafkaErrorCode> {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let p: FutureProducer = alice(addr).set("message.timeout.ms", "10000").create().unwrap();
    common::block(async {
        match p
            .send(
                FutureRecord::<(), _>::to(topic).payload("x"),
                Duration::from_secs(15),
            )
            .await
        {
            Ok(_) => None,
            Err((e, _)) => Some(e.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail)),
        }
    })
}

/// The first error alice gets reading `topic` in `group` (`None`: she read a record).
fn consume(addr: &str, topic: &str, group: &str) -> Option<RDKafkaErrorCode> {
    let c: BaseConsumer = alice(addr)
        .set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    c.subscribe(&[topic]).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(_)) => return None,
            Some(Err(e)) => return e.rdkafka_error_code(),
            None => {}
        }
    }
    panic!("{topic} in {group}: neither a record nor an error in 20 s");
}

#[test]
fn each_api_answers_kafkas_authorization_errors_where_the_acls_stop() {
    let tmp = tempfile::tempdir().unwrap();
    let (broker, plain, sasl) = start(tmp.path());
    let tools = Tools::new(&plain, tmp.path());
    for t in ["t", "u"] {
        tools.ok(
            "org.apache.kafka.tools.TopicCommand",
            &["--create", "--topic", t, "--partitions", "1"],
        );
    }
    let acl = |args: &[&str]| {
        let mut all = vec!["--add", "--allow-principal", "User:alice"];
        all.extend_from_slice(args);
        tools.ok("org.apache.kafka.tools.AclCommand", &all);
    };
    acl(&[
        "--operation",
        "Write",
        "--operation",
        "Read",
        "--operation",
        "DescribeConfigs",
        "--topic",
        "t",
    ]);
    acl(&["--operation", "Read", "--group", "g"]);
    // She may find group h's coordinator (DESCRIBE), not join it (READ).
    acl(&["--operation", "Describe", "--group", "h"]);
    acl(&[
        "--operation",
        "Write",
        "--operation",
        "Describe",
        "--transactional-id",
        "tx-ok",
    ]);
    common::produce_values(&plain, "u", 1, ["u-record".to_string()]);

    // Produce.
    assert_eq!(produce(&sasl, "t"), None, "alice may write t");
    let refused = produce(&sasl, "u");
    assert!(
        matches!(
            refused,
            Some(RDKafkaErrorCode::TopicAuthorizationFailed | RDKafkaErrorCode::MessageTimedOut)
        ),
        "alice may not write u: {refused:?}"
    );
    // Fetch and groups.
    assert_eq!(consume(&sasl, "t", "g"), None, "alice may read t in g");
    assert_eq!(
        consume(&sasl, "t", "other"),
        Some(RDKafkaErrorCode::GroupAuthorizationFailed)
    );
    assert_eq!(
        consume(&sasl, "t", "h"),
        Some(RDKafkaErrorCode::GroupAuthorizationFailed)
    );
    assert_eq!(
        consume(&sasl, "u", "g"),
        Some(RDKafkaErrorCode::TopicAuthorizationFailed)
    );
    // Metadata lists only what she may describe.
    let c: BaseConsumer = alice(&sasl).create().unwrap();
    let md = c.fetch_metadata(None, Duration::from_secs(10)).unwrap();
    let names: Vec<&str> = md.topics().iter().map(|t| t.name()).collect();
    assert_eq!(names, ["t"]);

    // Transactions.
    let txn = |id: &str| {
        let p: ThreadedProducer<DefaultProducerContext> =
            alice(&sasl).set("transactional.id", id).create().unwrap();
        p.init_transactions(Duration::from_secs(15))
            .map_err(|e| e.rdkafka_error_code())
    };
    assert_eq!(txn("tx-ok"), Ok(()));
    assert_eq!(
        txn("tx-no"),
        Err(Some(RDKafkaErrorCode::TransactionalIdAuthorizationFailed))
    );

    // Topic creation and configs, with the Admin API.
    let admin: AdminClient<DefaultClientContext> = alice(&sasl).create().unwrap();
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let created =
        common::block(admin.create_topics(&[NewTopic::new("new", 1, TopicReplication::Fixed(1))], &opts))
            .unwrap();
    assert_eq!(
        created[0].as_ref().unwrap_err().1,
        RDKafkaErrorCode::TopicAuthorizationFailed
    );
    // rdkafka does not surface a resource's error in DescribeConfigs: what u's answer holds
    // is nothing; Kafka's own tool (the Java Admin client) names the error.
    let described = common::block(admin.describe_configs(
        [&ResourceSpecifier::Topic("t"), &ResourceSpecifier::Topic("u")],
        &opts,
    ))
    .unwrap();
    assert!(
        !described[0].as_ref().unwrap().entries.is_empty(),
        "alice may describe t's configs"
    );
    assert!(
        described[1].as_ref().map_or(true, |r| r.entries.is_empty()),
        "nothing of u's"
    );
    let props = tmp.path().join("alice.properties");
    std::fs::write(
        &props,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n\
         sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"alice\" password=\"alice-secret\";\n",
    )
    .unwrap();
    let as_alice = Tools::new(&sasl, tmp.path());
    let configs = |topic: &str| {
        as_alice.run(
            "kafka.admin.ConfigCommand",
            &[
                "--describe",
                "--entity-type",
                "topics",
                "--entity-name",
                topic,
                "--command-config",
                props.to_str().unwrap(),
            ],
        )
    };
    let t = configs("t");
    assert!(
        t.ok && t.stdout.contains("Dynamic configs for topic t"),
        "{}\n{}",
        t.stdout,
        t.stderr
    );
    // The tool looks the topic up first: alice may not describe u, so to her it does not
    // exist (as Kafka hides it), and nothing of it is shown.
    let u = configs("u");
    let said = format!("{}{}", u.stdout, u.stderr);
    assert!(
        said.contains("TopicAuthorizationException") || said.contains("'u' doesn't exist"),
        "{said}"
    );

    // What the Java Admin client reports each principal may do (authorized operations in
    // DescribeCluster, Metadata and DescribeGroups): alice exactly what her ACLs allow, with
    // READ and WRITE implying DESCRIBE; the super user every operation of each resource.
    let program =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/AuthorizedOperations.java");
    let program = program.to_str().unwrap();
    let ops = as_alice.java(&[program, &sasl, "t", "g", "alice", "alice-secret"]);
    assert!(ops.ok, "{}\n{}", ops.stdout, ops.stderr);
    assert_eq!(
        ops.stdout.lines().collect::<Vec<_>>(),
        [
            "cluster ",
            "topic DESCRIBE,DESCRIBE_CONFIGS,READ,WRITE",
            "group DESCRIBE,READ",
            "unasked null"
        ],
        "{}",
        ops.stderr
    );
    let ops = tools.java(&[program, &plain, "t", "g"]);
    assert!(ops.ok, "{}\n{}", ops.stdout, ops.stderr);
    assert_eq!(
        ops.stdout.lines().collect::<Vec<_>>(),
        [
            "cluster ALTER,ALTER_CONFIGS,CLUSTER_ACTION,CREATE,DESCRIBE,DESCRIBE_CONFIGS,IDEMPOTENT_WRITE",
            "topic ALTER,ALTER_CONFIGS,CREATE,DELETE,DESCRIBE,DESCRIBE_CONFIGS,READ,WRITE",
            "group ALTER_CONFIGS,DELETE,DESCRIBE,DESCRIBE_CONFIGS,READ",
            "unasked null"
        ],
        "{}",
        ops.stderr
    );
    broker.terminate();
}

/// `laminar acls`: an ACL added with it lets alice write `t` and shows in `laminar acls list`
/// and in Kafka's `kafka-acls --list`; removed with it, alice is refused again.
#[test]
fn laminar_acls_adds_lists_and_removes_acls() {
    let tmp = tempfile::tempdir().unwrap();
    let (broker, plain, sasl) = start(tmp.path());
    common::create_topic(&plain, "t", 1);
    let acls = |args: &[&str]| {
        let mut all = vec!["acls"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--bootstrap", &plain]);
        common::laminar(&all)
    };
    let write_t = common::tools::ALICE_WRITES_T;
    assert!(produce(&sasl, "t").is_some(), "no ACL yet");
    let mut add = vec!["add"];
    add.extend_from_slice(&write_t);
    acls(&add);
    assert_eq!(produce(&sasl, "t"), None, "alice may write t");
    let listed = acls(&["list"]);
    assert!(
        listed.contains("Topic t (LITERAL):") && listed.contains("User:alice ALLOW Write from *"),
        "{listed}"
    );
    let kafka =
        Tools::new(&plain, tmp.path()).ok("org.apache.kafka.tools.AclCommand", &["--list", "--topic", "t"]);
    assert!(kafka.contains("User:alice") && kafka.contains("WRITE"), "{kafka}");
    let mut remove = vec!["remove"];
    remove.extend_from_slice(&write_t);
    assert!(acls(&remove).contains("1 ACLs removed"));
    assert!(produce(&sasl, "t").is_some(), "the ACL is gone");
    broker.terminate();
}

/// Issue 41, hole 3: records of a transaction need the request's transactional id and WRITE
/// on it, as Kafka's KafkaApis asks. Mallory may write topic `t` but not alice's
/// transactional id; alice's producer id and epoch are visible (DescribeProducers). A Produce
/// of a transactional batch in alice's name, with no transactional id or with hers, is
/// refused whole (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, 53) and appends nothing; alice's
/// transaction then commits with only her records. (Before: without a transactional id the
/// batch went into her transaction.)
#[test]
fn records_of_another_producers_transaction_need_its_transactional_id() {
    use common::raw::Raw;
    use kafka_protocol::messages::{
        describe_producers_request::TopicRequest, produce_request, ApiKey, DescribeProducersRequest,
        DescribeProducersResponse, ProduceRequest, ProduceResponse, TopicName, TransactionalId,
    };
    use kafka_protocol::protocol::StrBytes;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    use rdkafka::producer::BaseRecord;
    let tmp = tempfile::tempdir().unwrap();
    let (broker, plain, sasl) = start(tmp.path());
    common::create_topic(&plain, "t", 1);
    let acls = |args: &[&str]| add_acl(&plain, args);
    acls(&[
        "--allow-principal",
        "User:alice",
        "--allow-principal",
        "User:mallory",
        "--operation",
        "Write",
        "--topic",
        "t",
    ]);
    acls(&[
        "--allow-principal",
        "User:alice",
        "--operation",
        "Write",
        "--transactional-id",
        "alice-txn",
    ]);

    let p: ThreadedProducer<DefaultProducerContext> = alice(&sasl)
        .set("transactional.id", "alice-txn")
        .create()
        .unwrap();
    p.init_transactions(Duration::from_secs(30)).unwrap();
    p.begin_transaction().unwrap();
    p.send(BaseRecord::<(), _>::to("t").partition(0).payload("a0"))
        .unwrap();
    p.flush(Duration::from_secs(30)).unwrap();

    // Her producer id and epoch, as anyone allowed to describe the topic sees them.
    let mut admin = Raw::connect(&plain);
    let mut topic = TopicRequest::default();
    topic.name = TopicName(StrBytes::from_static_str("t"));
    topic.partition_indexes = vec![0];
    let mut describe = DescribeProducersRequest::default();
    describe.topics = vec![topic];
    let described: DescribeProducersResponse = admin.call(ApiKey::DescribeProducers, 0, &describe).unwrap();
    let hers = &described.topics[0].partitions[0].active_producers[0];

    let mut mallory = Raw::connect(&sasl);
    assert_eq!(mallory.handshake("PLAIN"), Some(0));
    assert_eq!(mallory.plain("mallory", "mallory-secret"), Some(0));
    let forged = |transactional_id: Option<&'static str>| {
        let record = Record {
            transactional: true,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: hers.producer_id.0,
            producer_epoch: hers.producer_epoch as i16,
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: hers.last_sequence + 1,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(bytes::Bytes::from_static(b"mallory")),
            headers: Default::default(),
        };
        let mut batch = bytes::BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut batch, [&record], &options).unwrap();
        let mut partition = produce_request::PartitionProduceData::default();
        partition.index = 0;
        partition.records = Some(batch.freeze());
        let mut t = produce_request::TopicProduceData::default();
        t.name = TopicName(StrBytes::from_static_str("t"));
        t.partition_data = vec![partition];
        let mut r = ProduceRequest::default();
        r.transactional_id = transactional_id.map(|id| TransactionalId(StrBytes::from_static_str(id)));
        r.acks = -1;
        r.timeout_ms = 5000;
        r.topic_data = vec![t];
        r
    };
    for id in [None, Some("alice-txn")] {
        let answer: ProduceResponse = mallory.call(ApiKey::Produce, 9, &forged(id)).unwrap();
        assert_eq!(
            answer.responses[0].partition_responses[0].error_code, 53,
            "a forged transactional batch with transactional id {id:?}"
        );
    }
    p.commit_transaction(Duration::from_secs(30)).unwrap();
    let read = common::read_to_end(&plain, "t", 1, "read_committed");
    let values: Vec<&[u8]> = read.iter().map(|(_, _, v)| v.as_slice()).collect();
    assert_eq!(values, [&b"a0"[..]], "only alice's record, committed");
    broker.terminate();
}

/// Issue 41, hole 8: on a dual-stack listener (`[::]`) an IPv4 client's address arrives
/// IPv4-mapped (`::ffff:127.0.0.1`); a DENY for host 127.0.0.1 must still hold for it.
/// (Before, the two were compared as strings and the DENY was bypassed.)
#[test]
fn a_host_deny_holds_for_an_ipv4_client_on_a_dual_stack_listener() {
    let tmp = tempfile::tempdir().unwrap();
    let (p, s) = (free_port(), free_port());
    let config = tmp.path().join("laminar.toml");
    std::fs::write(
        &config,
        format!(
            r#""listeners" = "PLAINTEXT://127.0.0.1:{p},SASL_PLAINTEXT://[::]:{s}"
"advertised.listeners" = "PLAINTEXT://127.0.0.1:{p},SASL_PLAINTEXT://127.0.0.1:{s}"
"sasl.enabled.mechanisms" = "PLAIN"
"listener.name.sasl_plaintext.plain.sasl.jaas.config" = "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-secret\";"
"authorizer.class.name" = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"super.users" = "User:ANONYMOUS"
"#
        ),
    )
    .unwrap();
    let broker = common::try_serve_args(&tmp.path().join("data"), &["--config", config.to_str().unwrap()])
        .expect("the broker starts on free ports");
    let (plain, sasl) = (format!("127.0.0.1:{p}"), format!("127.0.0.1:{s}"));
    common::create_topic(&plain, "t", 1);
    let acls = |args: &[&str]| {
        let mut all = vec!["acls"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--bootstrap", &plain]);
        common::laminar(&all);
    };
    let mut allow = vec!["add"];
    allow.extend_from_slice(&common::tools::ALICE_WRITES_T);
    acls(&allow);
    assert_eq!(produce(&sasl, "t"), None, "alice may write t from anywhere");
    acls(&[
        "add",
        "--deny-principal",
        "User:alice",
        "--operation",
        "Write",
        "--topic",
        "t",
        "--host",
        "127.0.0.1",
    ]);
    assert_eq!(
        produce(&sasl, "t"),
        Some(RDKafkaErrorCode::TopicAuthorizationFailed),
        "but not from 127.0.0.1, which she connects from over the dual-stack listener"
    );
    broker.terminate();
}

/// Issue 41, item 9: OffsetDelete and TxnOffsetCommit need READ on each topic, as Kafka's
/// KafkaApis asks (beside DELETE, or READ, on the group, and WRITE on the transactional id).
/// Alice may do everything with group `g` and her transactional id, but not read `src`:
/// each partition of `src` is TOPIC_AUTHORIZATION_FAILED (29), and the offset committed
/// there stays. (Before, both went through.)
#[test]
fn offset_delete_and_txn_offset_commit_need_read_on_the_topic() {
    use kafka_protocol::messages::{
        offset_delete_request, txn_offset_commit_request, ApiKey, GroupId, OffsetDeleteRequest,
        OffsetDeleteResponse, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
        TxnOffsetCommitResponse,
    };
    use kafka_protocol::protocol::StrBytes;
    let tmp = tempfile::tempdir().unwrap();
    let (broker, plain, sasl) = start(tmp.path());
    common::create_topic(&plain, "src", 1);
    common::produce_values(&plain, "src", 1, (0..3).map(|i| i.to_string()));
    // A committed offset for group g, by a super user (over PLAINTEXT).
    commit_offset(&plain, "g", "src", 2, None);
    let acls = |args: &[&str]| add_acl(&plain, args);
    acls(&[
        "--allow-principal",
        "User:alice",
        "--operation",
        "All",
        "--group",
        "g",
    ]);
    acls(&[
        "--allow-principal",
        "User:alice",
        "--operation",
        "All",
        "--transactional-id",
        "tx",
    ]);

    let mut alice = alice_raw(&sasl);
    let name = || TopicName(StrBytes::from_static_str("src"));

    let mut p = offset_delete_request::OffsetDeleteRequestPartition::default();
    p.partition_index = 0;
    let mut t = offset_delete_request::OffsetDeleteRequestTopic::default();
    t.name = name();
    t.partitions = vec![p];
    let mut delete = OffsetDeleteRequest::default();
    delete.group_id = GroupId(StrBytes::from_static_str("g"));
    delete.topics = vec![t];
    let answer: OffsetDeleteResponse = alice.call(ApiKey::OffsetDelete, 0, &delete).unwrap();
    assert_eq!(answer.topics[0].partitions[0].error_code, 29, "OffsetDelete");

    let mut p = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = 3;
    let mut t = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
    t.name = name();
    t.partitions = vec![p];
    let mut commit = TxnOffsetCommitRequest::default();
    commit.transactional_id = TransactionalId(StrBytes::from_static_str("tx"));
    commit.group_id = GroupId(StrBytes::from_static_str("g"));
    commit.producer_id = ProducerId(1);
    commit.topics = vec![t];
    let answer: TxnOffsetCommitResponse = alice.call(ApiKey::TxnOffsetCommit, 3, &commit).unwrap();
    assert_eq!(answer.topics[0].partitions[0].error_code, 29, "TxnOffsetCommit");

    let committed = common::laminar(&["groups", "describe", "g", "--bootstrap", &plain]);
    assert!(
        committed
            .lines()
            .any(|l| l.trim_start().starts_with("src-0") && l.contains(" 2 ")),
        "the offset stays: {committed}"
    );
    broker.terminate();
}

/// Issue 41, item 9: asked by topic id, Metadata and DeleteTopics do not tell the name of a
/// topic the caller may not describe (Kafka answers null, TOPIC_AUTHORIZATION_FAILED).
#[test]
fn a_topic_asked_by_id_keeps_its_name_from_who_may_not_describe_it() {
    use common::raw::Raw;
    use kafka_protocol::messages::{
        delete_topics_request::DeleteTopicState, metadata_request::MetadataRequestTopic, ApiKey,
        DeleteTopicsRequest, DeleteTopicsResponse, MetadataRequest, MetadataResponse, TopicName,
    };
    use kafka_protocol::protocol::StrBytes;
    let tmp = tempfile::tempdir().unwrap();
    let (broker, plain, sasl) = start(tmp.path());
    common::create_topic(&plain, "hidden", 1);
    let mut admin = Raw::connect(&plain);
    let mut by_name = MetadataRequestTopic::default();
    by_name.name = Some(TopicName(StrBytes::from_static_str("hidden")));
    let mut asked = MetadataRequest::default();
    asked.topics = Some(vec![by_name]);
    let described: MetadataResponse = admin.call(ApiKey::Metadata, 12, &asked).unwrap();
    let id = described.topics[0].topic_id;

    let mut alice = alice_raw(&sasl);
    let mut by_id = MetadataRequestTopic::default();
    by_id.topic_id = id;
    by_id.name = None;
    let mut asked = MetadataRequest::default();
    asked.topics = Some(vec![by_id]);
    let answer: MetadataResponse = alice.call(ApiKey::Metadata, 12, &asked).unwrap();
    assert_eq!(
        (answer.topics[0].error_code, answer.topics[0].name.is_none()),
        (29, true),
        "Metadata {:?}",
        answer.topics[0]
    );

    let mut state = DeleteTopicState::default();
    state.topic_id = id;
    let mut delete = DeleteTopicsRequest::default();
    delete.topics = vec![state];
    delete.timeout_ms = 5000;
    let answer: DeleteTopicsResponse = alice.call(ApiKey::DeleteTopics, 6, &delete).unwrap();
    assert_eq!(
        (answer.responses[0].error_code, answer.responses[0].name.is_none()),
        (29, true),
        "DeleteTopics"
    );
    broker.terminate();
}

/// Issue 41, item 9: a caller learns nothing of topics it may not describe through
/// OffsetFetch (a refused partition's commit metadata is not sent) nor DescribeTransactions
/// (a transaction's partitions are those of topics it may describe), as Kafka answers.
#[test]
fn offset_fetch_and_describe_transactions_show_nothing_of_refused_topics() {
    use kafka_protocol::messages::{
        offset_fetch_request, ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, GroupId,
        OffsetFetchRequest, OffsetFetchResponse, TopicName, TransactionalId,
    };
    use kafka_protocol::protocol::StrBytes;
    use rdkafka::producer::BaseRecord;
    let tmp = tempfile::tempdir().unwrap();
    let (broker, plain, sasl) = start(tmp.path());
    common::create_topic(&plain, "open", 1);
    common::create_topic(&plain, "hidden", 1);
    // By a super user: a commit with metadata on `hidden`, and an open transaction over both.
    commit_offset(&plain, "g", "hidden", 0, Some("committers-note"));
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &plain)
        .set("transactional.id", "tx2")
        .create()
        .unwrap();
    p.init_transactions(Duration::from_secs(30)).unwrap();
    p.begin_transaction().unwrap();
    for topic in ["open", "hidden"] {
        p.send(BaseRecord::<(), _>::to(topic).partition(0).payload("x"))
            .unwrap();
    }
    p.flush(Duration::from_secs(30)).unwrap();
    let acls = |args: &[&str]| add_acl(&plain, args);
    acls(&[
        "--allow-principal",
        "User:alice",
        "--operation",
        "Describe",
        "--group",
        "g",
    ]);
    acls(&[
        "--allow-principal",
        "User:alice",
        "--operation",
        "Describe",
        "--transactional-id",
        "tx2",
    ]);
    acls(&[
        "--allow-principal",
        "User:alice",
        "--operation",
        "Describe",
        "--topic",
        "open",
    ]);

    let mut alice = alice_raw(&sasl);
    let mut t = offset_fetch_request::OffsetFetchRequestTopic::default();
    t.name = TopicName(StrBytes::from_static_str("hidden"));
    t.partition_indexes = vec![0];
    let mut fetch = OffsetFetchRequest::default();
    fetch.group_id = GroupId(StrBytes::from_static_str("g"));
    fetch.topics = Some(vec![t]);
    let answer: OffsetFetchResponse = alice.call(ApiKey::OffsetFetch, 7, &fetch).unwrap();
    let part = &answer.topics[0].partitions[0];
    assert_eq!(part.error_code, 29);
    assert!(
        part.metadata.as_ref().is_none_or(|m| m.is_empty()),
        "the commit's metadata: {:?}",
        part.metadata
    );

    let mut describe = DescribeTransactionsRequest::default();
    describe.transactional_ids = vec![TransactionalId(StrBytes::from_static_str("tx2"))];
    let answer: DescribeTransactionsResponse =
        alice.call(ApiKey::DescribeTransactions, 0, &describe).unwrap();
    let topics: Vec<String> = answer.transaction_states[0]
        .topics
        .iter()
        .map(|t| t.topic.0.to_string())
        .collect();
    assert_eq!(topics, ["open"], "only the topics alice may describe");
    p.abort_transaction(Duration::from_secs(30)).unwrap();
    broker.terminate();
}

/// `laminar acls add ARGS` against `plain` (a super user's listener).
fn add_acl(plain: &str, args: &[&str]) {
    let mut all = vec!["acls", "add"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--bootstrap", plain]);
    common::laminar(&all);
}

/// A raw client authenticated as alice (PLAIN) on the SASL listener.
fn alice_raw(sasl: &str) -> common::raw::Raw {
    let mut alice = common::raw::Raw::connect(sasl);
    assert_eq!(alice.handshake("PLAIN"), Some(0));
    assert_eq!(alice.plain("alice", "alice-secret"), Some(0));
    alice
}

/// Commits `offset` (with `metadata`) for `group` on partition 0 of `topic`, over `plain`.
fn commit_offset(plain: &str, group: &str, topic: &str, offset: i64, metadata: Option<&str>) {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", plain)
        .set("group.id", group)
        .create()
        .unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, rdkafka::Offset::Offset(offset))
        .unwrap();
    if let Some(m) = metadata {
        tpl.find_partition(topic, 0).unwrap().set_metadata(m);
    }
    c.commit(&tpl, rdkafka::consumer::CommitMode::Sync).unwrap();
}
