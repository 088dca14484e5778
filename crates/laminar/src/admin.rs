//! `laminar topics`, `groups` and `quotas`: a small blocking Kafka admin client. It speaks
//! the Kafka protocol, so it works against Apache Kafka as well as Laminar. Versions are ones
//! both support (Kafka 4.x and Laminar): Metadata v12, CreateTopics v7, DeleteTopics v6,
//! DescribeConfigs v4, IncrementalAlterConfigs v1, DescribeClientQuotas v1, AlterClientQuotas v1.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    alter_client_quotas_request, AlterClientQuotasRequest, AlterClientQuotasResponse,
    DescribeClientQuotasRequest, DescribeClientQuotasResponse,
};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    DescribeClusterRequest, DescribeClusterResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, MetadataRequest, MetadataResponse,
    RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::messages::{
    DescribeGroupsRequest, DescribeGroupsResponse, GroupId, ListGroupsRequest, ListGroupsResponse,
    ListOffsetsRequest, ListOffsetsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// The largest response this client accepts.
const RESPONSE_BYTES_MAX: usize = 64 << 20;

pub struct Admin {
    stream: crate::command_config::Conn,
    correlation_id: i32,
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

impl Admin {
    /// Connects to the first broker of `bootstrap` (`host:port`, or several, comma-separated,
    /// as Kafka's tools take them) that answers.
    pub fn connect(bootstrap: &str) -> anyhow::Result<Admin> {
        let mut last = None;
        let mut connected = None;
        let mut host = "";
        for addr in bootstrap.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            host = addr
                .rsplit_once(':')
                .map_or(addr, |(h, _)| h)
                .trim_start_matches('[')
                .trim_end_matches(']');
            // A broker cut off from the network drops the SYN: give up on it soon.
            let connected_to = std::net::ToSocketAddrs::to_socket_addrs(addr)
                .with_context(|| format!("resolve {addr}"))?
                .next()
                .with_context(|| format!("no address for {addr}"))
                .and_then(|a| Ok(TcpStream::connect_timeout(&a, Duration::from_secs(3))?));
            match connected_to {
                Ok(s) => {
                    connected = Some(s);
                    break;
                }
                Err(e) => last = Some(e.context(format!("connect to {addr}"))),
            }
        }
        let stream = match (connected, last) {
            (Some(s), _) => s,
            (None, Some(e)) => return Err(e),
            (None, None) => bail!("no broker address in {bootstrap:?}"),
        };
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let security = crate::command_config::get();
        let mut admin = Admin {
            stream: crate::command_config::Conn::open(stream, host, security)?,
            correlation_id: 0,
        };
        if let Some((mechanism, user, password)) = &security.sasl {
            admin.authenticate(mechanism, user, password)?;
        }
        Ok(admin)
    }

    /// SaslHandshake v1, then SaslAuthenticate until the exchange ends (`--command-config`).
    fn authenticate(&mut self, mechanism: &str, user: &str, password: &str) -> anyhow::Result<()> {
        use kafka_protocol::messages::{
            SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
        };
        use laminar_auth::{ClientExchange, ClientStep};
        let mut handshake = SaslHandshakeRequest::default();
        handshake.mechanism = sb(mechanism);
        let h: SaslHandshakeResponse = self.call(ApiKey::SaslHandshake, 1, &handshake)?;
        if h.error_code != 0 {
            bail!("SaslHandshake with {mechanism}: error {}", h.error_code);
        }
        let mut exchange = ClientExchange::start(mechanism, user, password).map_err(anyhow::Error::msg)?;
        let mut from_server: Option<Bytes> = None;
        loop {
            let (message, last) = match exchange
                .step(from_server.as_deref())
                .map_err(anyhow::Error::msg)?
            {
                ClientStep::Send(m) => (m, false),
                ClientStep::Done(m) if m.is_empty() => return Ok(()),
                ClientStep::Done(m) => (m, true),
            };
            let mut a = SaslAuthenticateRequest::default();
            a.auth_bytes = message.into();
            let r: SaslAuthenticateResponse = self.call(ApiKey::SaslAuthenticate, 2, &a)?;
            if r.error_code != 0 {
                bail!(
                    "SASL authentication as {user}: {}",
                    r.error_message
                        .as_ref()
                        .map_or("refused".to_string(), |m| m.to_string())
                );
            }
            if last {
                return Ok(());
            }
            from_server = Some(r.auth_bytes);
        }
    }

    fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: &Req,
    ) -> anyhow::Result<Resp> {
        self.correlation_id += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.correlation_id = self.correlation_id;
        header.client_id = Some(sb("laminar-cli"));
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        header.encode(&mut buf, key.request_header_version(version))?;
        req.encode(&mut buf, version)?;
        let size = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        self.stream.write_all(&buf)?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size)?;
        let size = i32::from_be_bytes(size);
        if size < 0 || size as usize > RESPONSE_BYTES_MAX {
            bail!("response of {size} bytes is out of bounds");
        }
        let mut body = vec![0u8; size as usize];
        self.stream.read_exact(&mut body)?;
        let mut body = Bytes::from(body);
        let rh = ResponseHeader::decode(&mut body, key.response_header_version(version))?;
        if rh.correlation_id != self.correlation_id {
            bail!(
                "response for correlation id {} while waiting for {}",
                rh.correlation_id,
                self.correlation_id
            );
        }
        let resp = Resp::decode(&mut body, version)?;
        if body.has_remaining() {
            bail!("{} unread bytes after the {key:?} response", body.remaining());
        }
        Ok(resp)
    }

    pub fn metadata(&mut self, topics: Option<&[String]>) -> anyhow::Result<MetadataResponse> {
        let mut req = MetadataRequest::default();
        req.topics = topics.map(|ts| {
            ts.iter()
                .map(|t| {
                    let mut mt = MetadataRequestTopic::default();
                    mt.name = Some(TopicName(sb(t)));
                    mt
                })
                .collect()
        });
        req.allow_auto_topic_creation = false;
        self.call(ApiKey::Metadata, 12, &req)
    }

    pub fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &[(String, String)],
    ) -> anyhow::Result<CreateTopicsResponse> {
        let mut t = CreatableTopic::default();
        t.name = TopicName(sb(name));
        t.num_partitions = partitions;
        t.replication_factor = replication_factor;
        t.configs = configs
            .iter()
            .map(|(k, v)| {
                let mut c = CreatableTopicConfig::default();
                c.name = sb(k);
                c.value = Some(sb(v));
                c
            })
            .collect();
        let mut req = CreateTopicsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = 30_000;
        self.call(ApiKey::CreateTopics, 7, &req)
    }

    pub fn delete_topic(&mut self, name: &str) -> anyhow::Result<DeleteTopicsResponse> {
        let mut t = DeleteTopicState::default();
        t.name = Some(TopicName(sb(name)));
        let mut req = DeleteTopicsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = 30_000;
        self.call(ApiKey::DeleteTopics, 6, &req)
    }

    pub fn topic_configs(&mut self, name: &str) -> anyhow::Result<DescribeConfigsResponse> {
        let mut r = DescribeConfigsResource::default();
        r.resource_type = 2;
        r.resource_name = sb(name);
        r.configuration_keys = None;
        let mut req = DescribeConfigsRequest::default();
        req.resources = vec![r];
        self.call(ApiKey::DescribeConfigs, 4, &req)
    }
}

impl Admin {
    pub fn list_groups(&mut self) -> anyhow::Result<ListGroupsResponse> {
        self.call(ApiKey::ListGroups, 4, &ListGroupsRequest::default())
    }

    pub fn describe_group(&mut self, group: &str) -> anyhow::Result<DescribeGroupsResponse> {
        let mut req = DescribeGroupsRequest::default();
        req.groups = vec![GroupId(sb(group))];
        self.call(ApiKey::DescribeGroups, 5, &req)
    }

    /// Every committed offset of a group: `(topic, partition, offset)`.
    pub fn committed(&mut self, group: &str) -> anyhow::Result<Vec<(String, i32, i64)>> {
        let mut req = OffsetFetchRequest::default();
        req.group_id = GroupId(sb(group));
        req.topics = None;
        let resp: OffsetFetchResponse = self.call(ApiKey::OffsetFetch, 7, &req)?;
        check(resp.error_code, None, &format!("offsets of {group}"))?;
        Ok(resp
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(move |p| {
                    (
                        t.name.0.as_str().to_string(),
                        p.partition_index,
                        p.committed_offset,
                    )
                })
            })
            .collect())
    }

    /// The offset for `timestamp` (-1 latest, -2 earliest, or milliseconds) of each
    /// partition.
    pub fn list_offsets(
        &mut self,
        topic: &str,
        partitions: &[i32],
        timestamp: i64,
    ) -> anyhow::Result<Vec<(i32, i64)>> {
        use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
        let mut t = ListOffsetsTopic::default();
        t.name = TopicName(sb(topic));
        t.partitions = partitions
            .iter()
            .map(|p| {
                let mut lp = ListOffsetsPartition::default();
                lp.partition_index = *p;
                lp.timestamp = timestamp;
                lp
            })
            .collect();
        let mut req = ListOffsetsRequest::default();
        req.replica_id = kafka_protocol::messages::BrokerId(-1);
        req.topics = vec![t];
        let resp: ListOffsetsResponse = self.call(ApiKey::ListOffsets, 7, &req)?;
        let mut out = Vec::new();
        for p in &resp.topics[0].partitions {
            check(
                p.error_code,
                None,
                &format!("offsets of {topic}-{}", p.partition_index),
            )?;
            out.push((p.partition_index, p.offset));
        }
        Ok(out)
    }

    pub fn commit(&mut self, group: &str, topic: &str, offsets: &[(i32, i64)]) -> anyhow::Result<()> {
        use kafka_protocol::messages::offset_commit_request::{
            OffsetCommitRequestPartition, OffsetCommitRequestTopic,
        };
        let mut t = OffsetCommitRequestTopic::default();
        t.name = TopicName(sb(topic));
        t.partitions = offsets
            .iter()
            .map(|(p, o)| {
                let mut cp = OffsetCommitRequestPartition::default();
                cp.partition_index = *p;
                cp.committed_offset = *o;
                cp
            })
            .collect();
        let mut req = OffsetCommitRequest::default();
        req.group_id = GroupId(sb(group));
        req.generation_id_or_member_epoch = -1;
        req.topics = vec![t];
        let resp: OffsetCommitResponse = self.call(ApiKey::OffsetCommit, 8, &req)?;
        for p in &resp.topics[0].partitions {
            check(
                p.error_code,
                None,
                &format!("commit {topic}-{} for {group}", p.partition_index),
            )?;
        }
        Ok(())
    }
}

/// Decodes a consumer-protocol assignment: `(topic, [partition])`.
fn decode_assignment(bytes: &[u8]) -> Vec<(String, Vec<i32>)> {
    let mut b = bytes;
    let mut out = Vec::new();
    if b.len() < 6 {
        return out;
    }
    b.advance(2); // version
    let topics = b.get_i32();
    for _ in 0..topics.max(0) {
        if b.remaining() < 2 {
            break;
        }
        let len = b.get_i16().max(0) as usize;
        if b.remaining() < len + 4 {
            break;
        }
        let name = String::from_utf8_lossy(&b[..len]).into_owned();
        b.advance(len);
        let n = b.get_i32().max(0) as usize;
        if b.remaining() < n * 4 {
            break;
        }
        out.push((name, (0..n).map(|_| b.get_i32()).collect()));
    }
    out
}

pub fn groups_list(bootstrap: &str) -> anyhow::Result<()> {
    let resp = Admin::connect(bootstrap)?.list_groups()?;
    check(resp.error_code, None, "list groups")?;
    for g in &resp.groups {
        println!("{}  {}", g.group_id.0.as_str(), g.group_state.as_str());
    }
    Ok(())
}

pub fn groups_describe(bootstrap: &str, group: &str) -> anyhow::Result<()> {
    let mut admin = Admin::connect(bootstrap)?;
    let resp = admin.describe_group(group)?;
    let g = &resp.groups[0];
    check(
        g.error_code,
        g.error_message.as_ref(),
        &format!("describe {group}"),
    )?;
    println!(
        "group {group}  state {}  protocol {}",
        g.group_state.as_str(),
        g.protocol_data.as_str()
    );
    for m in &g.members {
        let assigned: Vec<String> = decode_assignment(&m.member_assignment)
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| format!("{t}-{p}")))
            .collect();
        println!(
            "  member {}  client {}  host {}  assigned [{}]",
            m.member_id.as_str(),
            m.client_id.as_str(),
            m.client_host.as_str(),
            assigned.join(", ")
        );
    }
    let committed = admin.committed(group)?;
    println!(
        "  {:<30} {:>12} {:>12} {:>8}",
        "partition", "committed", "end", "lag"
    );
    for (topic, partition, offset) in committed {
        let end = admin
            .list_offsets(&topic, &[partition], -1)?
            .first()
            .map_or(-1, |(_, o)| *o);
        let lag = if offset >= 0 && end >= 0 {
            (end - offset).to_string()
        } else {
            "-".into()
        };
        println!(
            "  {:<30} {:>12} {:>12} {:>8}",
            format!("{topic}-{partition}"),
            offset,
            end,
            lag
        );
    }
    Ok(())
}

pub enum ResetTo {
    Earliest,
    Latest,
    Timestamp(i64),
}

pub fn groups_reset(bootstrap: &str, group: &str, topic: &str, to: ResetTo) -> anyhow::Result<()> {
    let mut admin = Admin::connect(bootstrap)?;
    let d = admin.describe_group(group)?;
    let state = d.groups[0].group_state.as_str().to_string();
    if !d.groups[0].members.is_empty() {
        bail!("group {group} has active members (state {state}): stop its consumers first");
    }
    let md = admin.metadata(Some(&[topic.to_string()]))?;
    check(md.topics[0].error_code, None, &format!("topic {topic}"))?;
    let partitions: Vec<i32> = md.topics[0]
        .partitions
        .iter()
        .map(|p| p.partition_index)
        .collect();
    let ts = match to {
        ResetTo::Earliest => -2,
        ResetTo::Latest => -1,
        ResetTo::Timestamp(t) => t,
    };
    let mut offsets = admin.list_offsets(topic, &partitions, ts)?;
    if ts >= 0 {
        // No record at or after the timestamp: the end of the partition.
        let ends = admin.list_offsets(topic, &partitions, -1)?;
        for (o, (_, end)) in offsets.iter_mut().zip(ends) {
            if o.1 < 0 {
                o.1 = end;
            }
        }
    }
    admin.commit(group, topic, &offsets)?;
    for (p, o) in offsets {
        println!("{group}: {topic}-{p} -> {o}");
    }
    Ok(())
}

fn check(code: i16, message: Option<&StrBytes>, what: &str) -> anyhow::Result<()> {
    if code != 0 {
        bail!(
            "{what}: Kafka error {code}{}",
            message.map(|m| format!(": {}", m.as_str())).unwrap_or_default()
        );
    }
    Ok(())
}

pub fn list(bootstrap: &str) -> anyhow::Result<()> {
    let md = Admin::connect(bootstrap)?.metadata(None)?;
    let mut names: Vec<String> = md
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.as_str().to_string()))
        .collect();
    names.sort();
    for n in names {
        println!("{n}");
    }
    Ok(())
}

pub fn create(
    bootstrap: &str,
    name: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(String, String)],
) -> anyhow::Result<()> {
    let resp = Admin::connect(bootstrap)?.create_topic(name, partitions, replication_factor, configs)?;
    let t = &resp.topics[0];
    check(t.error_code, t.error_message.as_ref(), &format!("create {name}"))?;
    println!(
        "created topic {name} with {} partitions of {} replicas (id {})",
        t.num_partitions, t.replication_factor, t.topic_id
    );
    Ok(())
}

/// DescribeCluster v2: every registered broker, fenced ones marked, and the controller.
pub fn cluster_describe(bootstrap: &str) -> anyhow::Result<()> {
    let mut admin = Admin::connect(bootstrap)?;
    let mut req = DescribeClusterRequest::default();
    req.endpoint_type = 1;
    let resp: DescribeClusterResponse = admin.call(ApiKey::DescribeCluster, 2, &req)?;
    check(
        resp.error_code,
        resp.error_message.as_ref(),
        "describe the cluster",
    )?;
    println!(
        "cluster {}  controller {}",
        resp.cluster_id.as_str(),
        resp.controller_id.0
    );
    for b in &resp.brokers {
        println!(
            "  broker {}  {}:{}{}",
            b.broker_id.0,
            b.host.as_str(),
            b.port,
            if b.is_fenced { "  fenced" } else { "" }
        );
    }
    Ok(())
}

/// Sets (`add`) and removes (`delete`: back to the broker's default) topic configs with
/// IncrementalAlterConfigs, as `kafka-configs --alter --add-config/--delete-config` does (one
/// config per flag here: a value may hold commas).
pub fn alter(bootstrap: &str, name: &str, add: &[(String, String)], delete: &[String]) -> anyhow::Result<()> {
    if add.is_empty() && delete.is_empty() {
        bail!("nothing to do: give --add-config name=value or --delete-config name");
    }
    // Kafka's operation codes: 0 SET, 1 DELETE.
    let mut configs: Vec<AlterableConfig> = add
        .iter()
        .map(|(k, v)| {
            let mut c = AlterableConfig::default();
            c.name = sb(k);
            c.config_operation = 0;
            c.value = Some(sb(v));
            c
        })
        .collect();
    configs.extend(delete.iter().map(|k| {
        let mut c = AlterableConfig::default();
        c.name = sb(k);
        c.config_operation = 1;
        c
    }));
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = 2; // topic
    resource.resource_name = sb(name);
    resource.configs = configs;
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![resource];
    let mut admin = Admin::connect(bootstrap)?;
    let resp: IncrementalAlterConfigsResponse = admin.call(ApiKey::IncrementalAlterConfigs, 1, &req)?;
    if resp.responses.is_empty() {
        bail!("alter {name}: the broker answered for no resource");
    }
    for r in &resp.responses {
        check(r.error_code, r.error_message.as_ref(), &format!("alter {name}"))?;
    }
    println!("altered topic {name}");
    Ok(())
}

pub fn delete(bootstrap: &str, name: &str) -> anyhow::Result<()> {
    let resp = Admin::connect(bootstrap)?.delete_topic(name)?;
    let t = &resp.responses[0];
    check(t.error_code, t.error_message.as_ref(), &format!("delete {name}"))?;
    println!("deleted topic {name}");
    Ok(())
}

pub fn describe(bootstrap: &str, name: &str) -> anyhow::Result<()> {
    let mut admin = Admin::connect(bootstrap)?;
    let md = admin.metadata(Some(&[name.to_string()]))?;
    let t = &md.topics[0];
    check(t.error_code, None, &format!("describe {name}"))?;
    println!(
        "topic {name}  id {}  partitions {}",
        t.topic_id,
        t.partitions.len()
    );
    for p in &t.partitions {
        let ids = |v: &[kafka_protocol::messages::BrokerId]| {
            v.iter().map(|b| b.0.to_string()).collect::<Vec<_>>().join(",")
        };
        println!(
            "  partition {}  leader {}  epoch {}  replicas {}  isr {}",
            p.partition_index,
            p.leader_id.0,
            p.leader_epoch,
            ids(&p.replica_nodes),
            ids(&p.isr_nodes)
        );
    }
    let cfg = admin.topic_configs(name)?;
    let r = &cfg.results[0];
    check(
        r.error_code,
        r.error_message.as_ref(),
        &format!("configs of {name}"),
    )?;
    for c in &r.configs {
        let source = if c.config_source == 1 { "set" } else { "default" };
        println!(
            "  {} = {} ({source})",
            c.name.as_str(),
            c.value.as_ref().map_or("", |v| v.as_str())
        );
    }
    Ok(())
}

/// `laminar quotas describe`: DescribeClientQuotas v1 for every entity (users, client-ids,
/// and users with client-ids), one line each: `client-id NAME: key=value, ...`, `user NAME:
/// ...` or `user NAME, client-id NAME: ...` (`<default>` for a default name).
pub fn quotas_describe(bootstrap: &str) -> anyhow::Result<()> {
    let mut admin = Admin::connect(bootstrap)?;
    // No component and not strict: every entity.
    let req = DescribeClientQuotasRequest::default();
    let resp: DescribeClientQuotasResponse = admin.call(ApiKey::DescribeClientQuotas, 1, &req)?;
    check(resp.error_code, resp.error_message.as_ref(), "describe quotas")?;
    let mut lines: Vec<String> = resp
        .entries
        .unwrap_or_default()
        .iter()
        .map(|e| {
            let mut parts: Vec<(String, String)> = e
                .entity
                .iter()
                .map(|d| {
                    let name = d
                        .entity_name
                        .as_ref()
                        .map_or("<default>".to_string(), |n| n.to_string());
                    (d.entity_type.to_string(), name)
                })
                .collect();
            // The user first, as kafka-configs shows it.
            parts.sort_by_key(|(t, _)| t != "user");
            let entity: Vec<String> = parts.iter().map(|(t, n)| format!("{t} {n}")).collect();
            let values: Vec<String> = e
                .values
                .iter()
                .map(|v| format!("{}={}", v.key, v.value))
                .collect();
            format!("{}: {}", entity.join(", "), values.join(", "))
        })
        .collect();
    lines.sort();
    for line in lines {
        println!("{line}");
    }
    Ok(())
}

/// `laminar quotas alter`: AlterClientQuotas v1 for one client-id (or the default client).
pub fn quotas_alter(
    bootstrap: &str,
    client_id: Option<&str>,
    add: &[(String, String)],
    delete: &[String],
) -> anyhow::Result<()> {
    if add.is_empty() && delete.is_empty() {
        bail!("nothing to do: give --add-config name=value or --delete-config name");
    }
    let mut ops = Vec::new();
    for (key, value) in add {
        let mut op = alter_client_quotas_request::OpData::default();
        op.key = sb(key);
        op.value = value
            .parse()
            .with_context(|| format!("{key}={value}: not a number"))?;
        ops.push(op);
    }
    for key in delete {
        let mut op = alter_client_quotas_request::OpData::default();
        op.key = sb(key);
        op.remove = true;
        ops.push(op);
    }
    let mut entity = alter_client_quotas_request::EntityData::default();
    entity.entity_type = sb("client-id");
    entity.entity_name = client_id.map(sb);
    let mut entry = alter_client_quotas_request::EntryData::default();
    entry.entity = vec![entity];
    entry.ops = ops;
    let mut req = AlterClientQuotasRequest::default();
    req.entries = vec![entry];
    let mut admin = Admin::connect(bootstrap)?;
    let resp: AlterClientQuotasResponse = admin.call(ApiKey::AlterClientQuotas, 1, &req)?;
    for e in &resp.entries {
        check(e.error_code, e.error_message.as_ref(), "alter quotas")?;
    }
    println!("quotas of client-id {} altered", client_id.unwrap_or("<default>"));
    Ok(())
}

/// `laminar users describe`: DescribeUserScramCredentials v0, every user or those named.
pub fn users_describe(bootstrap: &str, users: &[String]) -> anyhow::Result<()> {
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
    use kafka_protocol::messages::{
        DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
    };
    let mut req = DescribeUserScramCredentialsRequest::default();
    req.users = (!users.is_empty()).then(|| {
        users
            .iter()
            .map(|u| {
                let mut n = UserName::default();
                n.name = sb(u);
                n
            })
            .collect()
    });
    let mut admin = Admin::connect(bootstrap)?;
    let resp: DescribeUserScramCredentialsResponse =
        admin.call(ApiKey::DescribeUserScramCredentials, 0, &req)?;
    check(resp.error_code, resp.error_message.as_ref(), "describe users")?;
    for r in &resp.results {
        if r.error_code != 0 {
            println!(
                "user {}: error {} {}",
                r.user.as_str(),
                r.error_code,
                r.error_message.as_ref().map_or("", |m| m.as_str())
            );
            continue;
        }
        let creds: Vec<String> = r
            .credential_infos
            .iter()
            .map(|c| {
                let name = laminar_auth::ScramMechanism::from_kafka_type(c.mechanism)
                    .map_or("unknown", |m| m.name());
                format!("{name} (iterations {})", c.iterations)
            })
            .collect();
        println!("user {}: {}", r.user.as_str(), creds.join(", "));
    }
    Ok(())
}

/// `laminar users alter` and `delete`: AlterUserScramCredentials v0 for one user and
/// mechanism. Setting one salts the password here (PBKDF2 over a random salt, as Kafka's
/// Admin client does) and sends the salted password, never the password.
pub fn users_alter(
    bootstrap: &str,
    user: &str,
    mechanism: &str,
    set: Option<(&str, u32)>,
) -> anyhow::Result<()> {
    use kafka_protocol::messages::alter_user_scram_credentials_request::{
        ScramCredentialDeletion, ScramCredentialUpsertion,
    };
    use kafka_protocol::messages::{AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse};
    use rand::RngCore;
    let m = laminar_auth::ScramMechanism::from_name(mechanism)
        .with_context(|| format!("{mechanism}: SCRAM-SHA-256 or SCRAM-SHA-512"))?;
    let mut req = AlterUserScramCredentialsRequest::default();
    match set {
        Some((password, iterations)) => {
            let mut salt = vec![0u8; 32];
            rand::thread_rng().fill_bytes(&mut salt);
            let mut u = ScramCredentialUpsertion::default();
            u.name = sb(user);
            u.mechanism = m.kafka_type();
            u.iterations = iterations as i32;
            u.salted_password = Bytes::from(laminar_auth::scram::salt_password(
                m,
                password.as_bytes(),
                &salt,
                iterations,
            ));
            u.salt = Bytes::from(salt);
            req.upsertions = vec![u];
        }
        None => {
            let mut d = ScramCredentialDeletion::default();
            d.name = sb(user);
            d.mechanism = m.kafka_type();
            req.deletions = vec![d];
        }
    }
    let mut admin = Admin::connect(bootstrap)?;
    let resp: AlterUserScramCredentialsResponse = admin.call(ApiKey::AlterUserScramCredentials, 0, &req)?;
    for r in &resp.results {
        check(r.error_code, r.error_message.as_ref(), "alter user")?;
    }
    println!(
        "{} of user {user} {}",
        m.name(),
        if set.is_some() { "set" } else { "removed" }
    );
    Ok(())
}

/// What `laminar acls` does.
#[derive(Clone, Copy, PartialEq)]
pub enum AclAction {
    List,
    Add,
    Remove,
}

/// One `laminar acls` command's ACLs, in Kafka's codes.
pub struct AclSpec {
    /// (resource type, name): TOPIC 2, GROUP 3, CLUSTER 4, TRANSACTIONAL_ID 5.
    pub resource: Option<(i8, String)>,
    /// LITERAL 3, PREFIXED 4.
    pub pattern: i8,
    pub operations: Vec<i8>,
    /// (principal, permission): DENY 2, ALLOW 3.
    pub principals: Vec<(String, i8)>,
    pub host: String,
    pub bootstrap: String,
}

const OPERATIONS: [&str; 15] = [
    "unknown",
    "any",
    "all",
    "read",
    "write",
    "create",
    "delete",
    "alter",
    "describe",
    "clusteraction",
    "describeconfigs",
    "alterconfigs",
    "idempotentwrite",
    "createtokens",
    "describetokens",
];

/// An operation's code, from kafka-acls's names (`Write`, `DescribeConfigs`, `ALTER_CONFIGS`).
pub fn operation_code(name: &str) -> Option<i8> {
    let name = name.to_ascii_lowercase().replace(['_', '-'], "");
    OPERATIONS
        .iter()
        .position(|o| *o == name)
        .filter(|c| *c >= 2)
        .map(|c| c as i8)
}

fn operation_name(code: i8) -> &'static str {
    const SHOWN: [&str; 15] = [
        "Unknown",
        "Any",
        "All",
        "Read",
        "Write",
        "Create",
        "Delete",
        "Alter",
        "Describe",
        "ClusterAction",
        "DescribeConfigs",
        "AlterConfigs",
        "IdempotentWrite",
        "CreateTokens",
        "DescribeTokens",
    ];
    SHOWN.get(code as usize).copied().unwrap_or("Unknown")
}

/// `laminar acls list|add|remove`: DescribeAcls, CreateAcls, DeleteAcls v2.
pub fn acls(action: AclAction, spec: &AclSpec) -> anyhow::Result<()> {
    use kafka_protocol::messages::create_acls_request::AclCreation;
    use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
    use kafka_protocol::messages::{
        CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest,
        DescribeAclsResponse,
    };
    let mut admin = Admin::connect(&spec.bootstrap)?;
    match action {
        AclAction::List => {
            let mut req = DescribeAclsRequest::default();
            req.resource_type_filter = spec.resource.as_ref().map_or(1, |(t, _)| *t);
            req.resource_name_filter = spec.resource.as_ref().map(|(_, n)| sb(n));
            req.pattern_type_filter = if spec.resource.is_some() { spec.pattern } else { 1 };
            req.principal_filter = None;
            req.host_filter = None;
            req.operation = 1;
            req.permission_type = 1;
            let resp: DescribeAclsResponse = admin.call(ApiKey::DescribeAcls, 2, &req)?;
            check(resp.error_code, resp.error_message.as_ref(), "describe ACLs")?;
            let types = [
                "",
                "",
                "Topic",
                "Group",
                "Cluster",
                "TransactionalId",
                "DelegationToken",
                "User",
            ];
            for r in &resp.resources {
                let pattern = if r.pattern_type == 4 {
                    "PREFIXED"
                } else {
                    "LITERAL"
                };
                println!(
                    "{} {} ({pattern}):",
                    types.get(r.resource_type as usize).copied().unwrap_or("?"),
                    r.resource_name.as_str()
                );
                for a in &r.acls {
                    println!(
                        "  {} {} {} from {}",
                        a.principal.as_str(),
                        if a.permission_type == 2 { "DENY" } else { "ALLOW" },
                        operation_name(a.operation),
                        a.host.as_str()
                    );
                }
            }
        }
        AclAction::Add => {
            let Some((resource_type, name)) = &spec.resource else {
                bail!("add: name a resource (--topic, --group, --cluster or --transactional-id)");
            };
            if spec.principals.is_empty() || spec.operations.is_empty() {
                bail!("add: give --allow-principal or --deny-principal, and --operation");
            }
            let mut req = CreateAclsRequest::default();
            for (principal, permission) in &spec.principals {
                for op in &spec.operations {
                    let mut c = AclCreation::default();
                    c.resource_type = *resource_type;
                    c.resource_name = sb(name);
                    c.resource_pattern_type = spec.pattern;
                    c.principal = sb(principal);
                    c.host = sb(&spec.host);
                    c.operation = *op;
                    c.permission_type = *permission;
                    req.creations.push(c);
                }
            }
            let resp: CreateAclsResponse = admin.call(ApiKey::CreateAcls, 2, &req)?;
            for r in &resp.results {
                check(r.error_code, r.error_message.as_ref(), "create ACL")?;
            }
            println!("{} ACLs added", req.creations.len());
        }
        AclAction::Remove => {
            let mut req = DeleteAclsRequest::default();
            let principals: Vec<(Option<&str>, i8)> = if spec.principals.is_empty() {
                vec![(None, 1)]
            } else {
                spec.principals
                    .iter()
                    .map(|(p, perm)| (Some(p.as_str()), *perm))
                    .collect()
            };
            let operations: Vec<i8> = if spec.operations.is_empty() {
                vec![1]
            } else {
                spec.operations.clone()
            };
            for (principal, permission) in principals {
                for op in &operations {
                    let mut f = DeleteAclsFilter::default();
                    f.resource_type_filter = spec.resource.as_ref().map_or(1, |(t, _)| *t);
                    f.resource_name_filter = spec.resource.as_ref().map(|(_, n)| sb(n));
                    f.pattern_type_filter = if spec.resource.is_some() { spec.pattern } else { 1 };
                    f.principal_filter = principal.map(sb);
                    f.host_filter = None;
                    f.operation = *op;
                    f.permission_type = permission;
                    req.filters.push(f);
                }
            }
            let resp: DeleteAclsResponse = admin.call(ApiKey::DeleteAcls, 2, &req)?;
            let mut removed = 0;
            for r in &resp.filter_results {
                check(r.error_code, r.error_message.as_ref(), "delete ACLs")?;
                removed += r.matching_acls.len();
            }
            println!("{removed} ACLs removed");
        }
    }
    Ok(())
}
