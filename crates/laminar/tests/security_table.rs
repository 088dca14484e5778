//! Issue 41, item 4: the security table the broker must pass forever. Every API key and
//! version the broker advertises (`laminar_protocol::API_TABLE`), sent by three principals
//! over SASL_PLAINTEXT with Kafka's StandardAuthorizer:
//!
//! - `nobody`, with no ACL at all;
//! - `denied`, allowed ALL on every topic, group, transactional id and the cluster, and
//!   DENIED what the API needs and what else would allow it (a DENY wins);
//! - `allowed`, allowed exactly what the API needs (the row's ACLs, made before it and
//!   removed after).
//!
//! Each answer is checked for the error code Kafka gives, and for the absence of any data of
//! a refused resource (no partitions, records, offsets, configs, members, transactions or
//! ACLs); what a refused request would have changed is checked unchanged afterwards. An API
//! the table has no row for fails the test, so a new API cannot be advertised without one.

mod common;
#[path = "security_table/rows.rs"]
mod rows;

use bytes::Bytes;
use common::raw::Raw;
use common::Serve;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use laminar_protocol::API_TABLE;
use laminar_records::{BatchBuilder, Compression, RecordSpec};

const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
const AUTHORIZATION_ERRORS: [i16; 4] = [
    TOPIC_AUTHORIZATION_FAILED,
    GROUP_AUTHORIZATION_FAILED,
    CLUSTER_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
];

// ACL codes (Kafka's wire numbers).
const TOPIC: i8 = 2;
const GROUP: i8 = 3;
const CLUSTER: i8 = 4;
const TXN: i8 = 5;
const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;
const ALL: i8 = 2;
const READ: i8 = 3;
const WRITE: i8 = 4;
const CREATE: i8 = 5;
const DELETE: i8 = 6;
const ALTER: i8 = 7;
const DESCRIBE: i8 = 8;
const CLUSTER_ACTION: i8 = 9;
const DESCRIBE_CONFIGS: i8 = 10;
const ALTER_CONFIGS: i8 = 11;
const DENY: i8 = 2;
const ALLOW: i8 = 3;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Who {
    Nobody,
    Denied,
    Allowed,
}

impl Who {
    fn user(self) -> &'static str {
        match self {
            Who::Nobody => "nobody",
            Who::Denied => "denied",
            Who::Allowed => "allowed",
        }
    }
}

/// One ACL a row needs: (operation, resource type, name, pattern).
type Need = (i8, i8, &'static str, i8);

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn topic(s: &str) -> TopicName {
    TopicName(sb(s))
}

fn batch() -> Bytes {
    let mut b = BatchBuilder::new(Compression::None, 1_700_000_000_000);
    for i in 0..3 {
        b.push(RecordSpec {
            timestamp_ms: 1_700_000_000_000 + i,
            key: None,
            value: Some(b"secret".to_vec()),
            headers: vec![],
        });
    }
    Bytes::from(b.build().unwrap())
}

fn start(tmp: &std::path::Path) -> (Serve, String, String) {
    let users = [Who::Nobody, Who::Denied, Who::Allowed].map(|w| (w.user(), format!("{}-secret", w.user())));
    let users: Vec<(&str, &str)> = users.iter().map(|(u, p)| (*u, p.as_str())).collect();
    common::serve_with_authorizer(tmp, &users, "\"group.initial.rebalance.delay.ms\" = \"0\"")
}

fn login(addr: &str, who: Who) -> Raw {
    let mut c = Raw::connect(addr);
    assert_eq!(c.handshake("PLAIN"), Some(0));
    assert_eq!(c.plain(who.user(), &format!("{}-secret", who.user())), Some(0));
    c
}

fn creation(
    principal: &str,
    permission: i8,
    (op, rt, name, pattern): (i8, i8, &str, i8),
) -> create_acls_request::AclCreation {
    let mut c = create_acls_request::AclCreation::default();
    c.resource_type = rt;
    c.resource_name = sb(name);
    c.resource_pattern_type = pattern;
    c.principal = sb(principal);
    c.host = sb("*");
    c.operation = op;
    c.permission_type = permission;
    c
}

fn filter_of(c: &create_acls_request::AclCreation) -> delete_acls_request::DeleteAclsFilter {
    let mut f = delete_acls_request::DeleteAclsFilter::default();
    f.resource_type_filter = c.resource_type;
    f.resource_name_filter = Some(c.resource_name.clone());
    f.pattern_type_filter = c.resource_pattern_type;
    f.principal_filter = Some(c.principal.clone());
    f.host_filter = Some(c.host.clone());
    f.operation = c.operation;
    f.permission_type = c.permission_type;
    f
}

fn create_acls(admin: &mut Raw, creations: Vec<create_acls_request::AclCreation>) {
    if creations.is_empty() {
        return;
    }
    let mut r = CreateAclsRequest::default();
    r.creations = creations;
    let resp: CreateAclsResponse = admin.call(ApiKey::CreateAcls, 3, &r).unwrap();
    assert!(resp.results.iter().all(|r| r.error_code == 0), "{resp:?}");
}

fn delete_acls(admin: &mut Raw, filters: Vec<delete_acls_request::DeleteAclsFilter>) {
    if filters.is_empty() {
        return;
    }
    let mut r = DeleteAclsRequest::default();
    r.filters = filters;
    let resp: DeleteAclsResponse = admin.call(ApiKey::DeleteAcls, 3, &r).unwrap();
    assert!(resp.filter_results.iter().all(|r| r.error_code == 0), "{resp:?}");
}

/// What the API at `version` needs, as ACLs.
fn needs(key: i16, version: i16) -> Vec<Need> {
    let sec_topic = |op| (op, TOPIC, "sec", LITERAL);
    let cluster = |op| (op, CLUSTER, "kafka-cluster", LITERAL);
    match key {
        // Authentication itself, and the versions: nothing.
        17 | 18 | 36 => vec![],
        0 => vec![sec_topic(WRITE)],
        1 | 61 => vec![sec_topic(READ)],
        2 | 3 | 23 => vec![sec_topic(DESCRIBE)],
        19 => vec![(CREATE, TOPIC, "made-", PREFIXED)],
        20 => vec![(DELETE, TOPIC, "doomed-", PREFIXED)],
        21 => vec![sec_topic(DELETE)],
        22 => vec![(WRITE, TXN, "tx-", PREFIXED)],
        32 => vec![sec_topic(DESCRIBE_CONFIGS)],
        33 | 44 => vec![sec_topic(ALTER_CONFIGS)],
        37 => vec![sec_topic(ALTER)],
        10 | 15 | 16 => vec![(DESCRIBE, GROUP, "g", LITERAL)],
        11 => vec![(READ, GROUP, "jg-", PREFIXED)],
        14 => vec![(READ, GROUP, "sg", LITERAL)],
        12 => vec![(READ, GROUP, "hb", LITERAL)],
        13 => vec![(READ, GROUP, "lg", LITERAL)],
        8 => vec![(READ, GROUP, "g", LITERAL), sec_topic(READ)],
        9 => vec![(DESCRIBE, GROUP, "g", LITERAL), sec_topic(DESCRIBE)],
        42 => vec![(DELETE, GROUP, "dg-", PREFIXED)],
        47 => vec![(DELETE, GROUP, "od", LITERAL), sec_topic(READ)],
        48 => vec![cluster(DESCRIBE_CONFIGS)],
        49 => vec![cluster(ALTER_CONFIGS)],
        35 | 46 | 50 | 60 | 29 => vec![cluster(DESCRIBE)],
        43 | 45 | 51 | 30 | 31 => vec![cluster(ALTER)],
        24 if version >= 4 => vec![cluster(CLUSTER_ACTION)],
        24 => vec![(WRITE, TXN, "tx", LITERAL), sec_topic(WRITE)],
        25 => vec![(WRITE, TXN, "tx", LITERAL), (READ, GROUP, "g", LITERAL)],
        26 => vec![(WRITE, TXN, "tx", LITERAL)],
        27 => vec![cluster(CLUSTER_ACTION)],
        28 => vec![
            (WRITE, TXN, "tx", LITERAL),
            (READ, GROUP, "g", LITERAL),
            sec_topic(READ),
        ],
        65 | 66 => vec![(DESCRIBE, TXN, "tx", LITERAL)],
        other => panic!("API {other} has no row in the security table: write its rule"),
    }
}

/// What else, in Kafka's rules, allows the API at `version` beside [`needs`] (CREATE on the
/// cluster creates any topic): `denied`, allowed ALL on the cluster, is denied these too.
fn alternatives(key: i16) -> Vec<Need> {
    let cluster = |op| (op, CLUSTER, "kafka-cluster", LITERAL);
    match key {
        19 => vec![cluster(CREATE)],
        16 => vec![cluster(DESCRIBE)],
        23 => vec![cluster(CLUSTER_ACTION)],
        _ => vec![],
    }
}

struct Fixture {
    admin: Raw,
    sasl: String,
    sec_id: uuid::Uuid,
    /// Records the allowed principal's Produce rows appended.
    produced: i64,
}

impl Fixture {
    fn committed(&mut self, group: &str) -> i64 {
        let mut t = offset_fetch_request::OffsetFetchRequestTopic::default();
        t.name = topic("sec");
        t.partition_indexes = vec![0];
        let mut r = OffsetFetchRequest::default();
        r.group_id = GroupId(sb(group));
        r.topics = Some(vec![t]);
        let resp: OffsetFetchResponse = self.admin.call(ApiKey::OffsetFetch, 7, &r).unwrap();
        resp.topics[0].partitions[0].committed_offset
    }

    fn commit(&mut self, group: &str, offset: i64) {
        let mut p = offset_commit_request::OffsetCommitRequestPartition::default();
        p.partition_index = 0;
        p.committed_offset = offset;
        let mut t = offset_commit_request::OffsetCommitRequestTopic::default();
        t.name = topic("sec");
        t.partitions = vec![p];
        let mut r = OffsetCommitRequest::default();
        r.group_id = GroupId(sb(group));
        r.generation_id_or_member_epoch = -1;
        r.topics = vec![t];
        let resp: OffsetCommitResponse = self.admin.call(ApiKey::OffsetCommit, 8, &r).unwrap();
        assert_eq!(resp.topics[0].partitions[0].error_code, 0);
    }

    fn create_topic(&mut self, name: &str) {
        let mut t = create_topics_request::CreatableTopic::default();
        t.name = topic(name);
        t.num_partitions = 1;
        t.replication_factor = 1;
        let mut r = CreateTopicsRequest::default();
        r.topics = vec![t];
        r.timeout_ms = 10_000;
        let resp: CreateTopicsResponse = self.admin.call(ApiKey::CreateTopics, 7, &r).unwrap();
        assert_eq!(resp.topics[0].error_code, 0, "{name}");
    }

    /// The admin's view of topics: name → partition count.
    fn topics(&mut self) -> std::collections::BTreeMap<String, usize> {
        let r = MetadataRequest::default();
        let mut all = r.clone();
        all.topics = None;
        let resp: MetadataResponse = self.admin.call(ApiKey::Metadata, 12, &all).unwrap();
        resp.topics
            .iter()
            .map(|t| (t.name.as_ref().unwrap().0.to_string(), t.partitions.len()))
            .collect()
    }

    fn log_end(&mut self) -> i64 {
        let mut p = list_offsets_request::ListOffsetsPartition::default();
        p.partition_index = 0;
        p.timestamp = -1;
        let mut t = list_offsets_request::ListOffsetsTopic::default();
        t.name = topic("sec");
        t.partitions = vec![p];
        let mut r = ListOffsetsRequest::default();
        r.replica_id = BrokerId(-1);
        r.topics = vec![t];
        let resp: ListOffsetsResponse = self.admin.call(ApiKey::ListOffsets, 7, &r).unwrap();
        resp.topics[0].partitions[0].offset
    }

    fn acls(&mut self, name: &str) -> Vec<String> {
        let mut d = DescribeAclsRequest::default();
        d.resource_type_filter = TOPIC;
        d.resource_name_filter = None;
        d.pattern_type_filter = 1;
        d.principal_filter = None;
        d.host_filter = None;
        d.operation = 1;
        d.permission_type = 1;
        let resp: DescribeAclsResponse = self.admin.call(ApiKey::DescribeAcls, 3, &d).unwrap();
        resp.resources
            .iter()
            .map(|r| r.resource_name.to_string())
            .filter(|n| n.starts_with(name))
            .collect()
    }
}

#[test]
fn every_api_and_version_refuses_what_the_acls_do_not_allow() {
    let tmp = tempfile::tempdir().unwrap();
    let (broker, plain, sasl) = start(tmp.path());
    let mut fx = Fixture {
        admin: Raw::connect(&plain),
        sasl: sasl.clone(),
        sec_id: Default::default(),
        produced: 0,
    };

    // What the rows read and change: a topic with records, committed offsets, a
    // transactional id, topics and groups to delete, an ACL to delete.
    fx.create_topic("sec");
    fx.create_topic("markers");
    let mut md = MetadataRequest::default();
    let mut t = metadata_request::MetadataRequestTopic::default();
    t.name = Some(topic("sec"));
    md.topics = Some(vec![t]);
    let resp: MetadataResponse = fx.admin.call(ApiKey::Metadata, 12, &md).unwrap();
    fx.sec_id = resp.topics[0].topic_id;
    {
        let mut p = produce_request::PartitionProduceData::default();
        p.index = 0;
        p.records = Some(batch());
        let mut t = produce_request::TopicProduceData::default();
        t.name = topic("sec");
        t.partition_data = vec![p];
        let mut r = ProduceRequest::default();
        r.acks = -1;
        r.timeout_ms = 10_000;
        r.topic_data = vec![t];
        let resp: ProduceResponse = fx.admin.call(ApiKey::Produce, 9, &r).unwrap();
        assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    }
    fx.commit("g", 1);
    fx.commit("od", 1);
    for key in [20i16, 42] {
        let spec = API_TABLE.iter().find(|s| s.key as i16 == key).unwrap();
        for v in spec.min_version..=spec.max_version {
            for who in [Who::Nobody, Who::Denied, Who::Allowed] {
                let name = format!("{}-{v}-{}", if key == 20 { "doomed" } else { "dg" }, who.user());
                if key == 20 {
                    fx.create_topic(&name);
                } else {
                    fx.commit(&name, 1);
                }
            }
        }
    }
    {
        let mut r = InitProducerIdRequest::default();
        r.transactional_id = Some(TransactionalId(sb("tx")));
        r.transaction_timeout_ms = 60_000;
        let resp: InitProducerIdResponse = fx.admin.call(ApiKey::InitProducerId, 4, &r).unwrap();
        assert_eq!(resp.error_code, 0);
    }
    create_acls(
        &mut fx.admin,
        vec![creation("User:keeper", ALLOW, (READ, TOPIC, "keep", LITERAL))],
    );
    // `denied` may do everything but what each row denies.
    create_acls(
        &mut fx.admin,
        [
            (ALL, TOPIC, "*", LITERAL),
            (ALL, GROUP, "*", LITERAL),
            (ALL, TXN, "*", LITERAL),
            (ALL, CLUSTER, "kafka-cluster", LITERAL),
        ]
        .into_iter()
        .map(|n| creation("User:denied", ALLOW, n))
        .collect(),
    );

    let mut rows = 0;
    for spec in API_TABLE {
        let key = spec.key as i16;
        for v in spec.min_version..=spec.max_version {
            let need = needs(key, v);
            let made: Vec<_> = need
                .iter()
                .map(|n| creation("User:allowed", ALLOW, *n))
                .chain(
                    need.iter()
                        .chain(&alternatives(key))
                        .map(|n| creation("User:denied", DENY, *n)),
                )
                .collect();
            let filters = made.iter().map(filter_of).collect();
            create_acls(&mut fx.admin, made);
            for who in [Who::Nobody, Who::Denied, Who::Allowed] {
                let mut c = login(&sasl, who);
                rows::row(&mut fx, &mut c, key, v, who);
                rows += 1;
            }
            delete_acls(&mut fx.admin, filters);
        }
    }
    let versions: i32 = API_TABLE
        .iter()
        .map(|s| (s.max_version - s.min_version + 1) as i32)
        .sum();
    assert_eq!(rows, 3 * versions);

    // What the refused rows would have changed is unchanged; what the allowed did is done.
    let topics = fx.topics();
    assert_eq!(
        topics.get("sec"),
        Some(&1),
        "CreatePartitions only validated: {topics:?}"
    );
    for (name, _) in topics.iter() {
        assert!(
            !name.starts_with("made-") || name.ends_with("-allowed"),
            "a refused CreateTopics made {name}"
        );
    }
    for v in 2..=7 {
        assert!(topics.contains_key(&format!("made-{v}-allowed")), "{topics:?}");
    }
    for v in 1..=6 {
        assert!(topics.contains_key(&format!("doomed-{v}-nobody")));
        assert!(topics.contains_key(&format!("doomed-{v}-denied")));
        assert!(!topics.contains_key(&format!("doomed-{v}-allowed")));
    }
    assert_eq!(
        fx.log_end(),
        3 + fx.produced,
        "only the allowed Produce rows appended"
    );
    assert_eq!(
        fx.committed("g"),
        109,
        "only the allowed OffsetCommit rows committed"
    );
    let probes = fx.acls("probe-");
    assert!(
        probes.iter().all(|n| n.ends_with("-allowed")) && probes.len() == 3,
        "only the allowed CreateAcls rows made ACLs: {probes:?}"
    );
    broker.terminate();
}
