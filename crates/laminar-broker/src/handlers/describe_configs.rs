//! DescribeConfigs v1-4: topic configs (overrides and defaults) and broker configs.

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::DescribeConfigsResponse;
use laminar_protocol::requests::DescribeConfigsRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, Encoded};
use crate::broker::Broker;
use crate::config::SETTINGS;
use crate::error_codes as ec;
use crate::topics::TOPIC_CONFIGS;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
/// Kafka's config sources.
const SOURCE_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;

fn entry(name: &str, value: String, source: i8, read_only: bool) -> DescribeConfigsResourceResult {
    let mut e = DescribeConfigsResourceResult::default();
    e.name = sb(name);
    e.value = Some(sb(&value));
    e.config_source = source;
    e.read_only = read_only;
    e
}

fn topic_default(b: &Broker, name: &str) -> String {
    let c = &b.config;
    let opt = |v: Option<i64>| v.unwrap_or(-1).to_string();
    match name {
        "retention.ms" => opt(c.log_retention_ms),
        "retention.bytes" => opt(c.log_retention_bytes.map(|v| v as i64)),
        "segment.bytes" => c.log_segment_bytes.to_string(),
        "segment.ms" => opt(c.log_roll_ms.map(|v| v as i64)),
        "max.message.bytes" => c.message_max_bytes.to_string(),
        "cleanup.policy" => "delete".to_string(),
        _ => String::new(),
    }
}

fn broker_value(b: &Broker, name: &str) -> String {
    let described = b.config.describe();
    described
        .lines()
        .find_map(|l| {
            l.strip_prefix(name)
                .and_then(|r| r.strip_prefix(" = "))
                .map(str::to_string)
        })
        .unwrap_or_else(|| {
            SETTINGS
                .iter()
                .find(|s| s.name == name)
                .map(|s| s.default.to_string())
                .unwrap_or_default()
        })
}

pub fn handle(b: &Broker, version: i16, correlation_id: i32, r: DescribeConfigsRequest) -> Encoded {
    let mut resp = DescribeConfigsResponse::default();
    for res in r.resources {
        let mut out = DescribeConfigsResult::default();
        out.resource_type = res.resource_type;
        out.resource_name = sb(&res.resource_name);
        let wanted = |name: &str| {
            res.configuration_keys
                .as_ref()
                .is_none_or(|keys| keys.iter().any(|k| k == name))
        };
        match res.resource_type {
            RESOURCE_TOPIC => match b.topics.get(&res.resource_name) {
                Some(t) => {
                    for name in TOPIC_CONFIGS.iter().filter(|n| wanted(n)) {
                        out.configs.push(match t.configs.get(*name) {
                            Some(v) => entry(name, v.clone(), SOURCE_TOPIC, false),
                            None => entry(name, topic_default(b, name), SOURCE_DEFAULT, false),
                        });
                    }
                }
                None => {
                    out.error_code = ec::UNKNOWN_TOPIC_OR_PARTITION;
                    out.error_message = Some(sb(&format!("no topic {}", res.resource_name)));
                }
            },
            RESOURCE_BROKER => {
                for s in SETTINGS.iter().filter(|s| wanted(s.name)) {
                    out.configs
                        .push(entry(s.name, broker_value(b, s.name), SOURCE_STATIC_BROKER, true));
                }
            }
            other => {
                out.error_code = ec::INVALID_REQUEST;
                out.error_message = Some(sb(&format!("resource type {other} is not supported")));
            }
        }
        resp.results.push(out);
    }
    responses::encode(ApiKey::DescribeConfigs, version, correlation_id, &resp)
}
