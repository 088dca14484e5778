//! `laminar topics`: a small blocking Kafka admin client. It speaks the Kafka protocol, so it
//! works against Apache Kafka as well as Laminar. Versions are ones both support (Kafka 4.x
//! and Laminar): Metadata v12, CreateTopics v7, DeleteTopics v6, DescribeConfigs v4.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    DescribeConfigsRequest, DescribeConfigsResponse, MetadataRequest, MetadataResponse, RequestHeader,
    ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// The largest response this client accepts.
const RESPONSE_BYTES_MAX: usize = 64 << 20;

pub struct Admin {
    stream: TcpStream,
    correlation_id: i32,
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

impl Admin {
    pub fn connect(bootstrap: &str) -> anyhow::Result<Admin> {
        let stream = TcpStream::connect(bootstrap).with_context(|| format!("connect to {bootstrap}"))?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Admin {
            stream,
            correlation_id: 0,
        })
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
        configs: &[(String, String)],
    ) -> anyhow::Result<CreateTopicsResponse> {
        let mut t = CreatableTopic::default();
        t.name = TopicName(sb(name));
        t.num_partitions = partitions;
        t.replication_factor = -1;
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
    configs: &[(String, String)],
) -> anyhow::Result<()> {
    let resp = Admin::connect(bootstrap)?.create_topic(name, partitions, configs)?;
    let t = &resp.topics[0];
    check(t.error_code, t.error_message.as_ref(), &format!("create {name}"))?;
    println!(
        "created topic {name} with {} partitions (id {})",
        t.num_partitions, t.topic_id
    );
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
            "  partition {}  leader {}  replicas {}  isr {}",
            p.partition_index,
            p.leader_id.0,
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
