//! DescribeConfigs v1-4: topic configs and broker configs (this broker's, and the cluster
//! default's dynamic ones), each with the source of the value
//! in effect and, when asked, its synonyms (the broker setting a topic config falls back on,
//! and the default under it) and documentation, as Kafka reports them.

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::DescribeConfigsResponse;
use laminar_protocol::requests::DescribeConfigsRequest;
use laminar_protocol::{responses, ApiKey};

use super::refused::Refused;
use super::{sb, Encoded};
use crate::config::{BrokerConfig, SETTINGS};
use crate::context::RequestContext;
use crate::dynamic_configs::{DynamicConfigs, DYNAMIC_SETTINGS};
use crate::topics::Topics;
use crate::topics::TOPIC_CONFIGS;
use laminar_protocol::ErrorCode;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
/// Kafka's config sources.
const SOURCE_DYNAMIC_TOPIC: i8 = 1;
const SOURCE_DYNAMIC_BROKER: i8 = 2;
const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;
/// Kafka's config types (v3+).
const TYPE_UNKNOWN: i8 = 0;
const TYPE_STRING: i8 = 2;
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;
const TYPE_DOUBLE: i8 = 6;
const TYPE_LIST: i8 = 7;

/// A topic config: the broker setting it falls back on, its type and what it means.
struct TopicConfig {
    name: &'static str,
    broker_name: &'static str,
    config_type: i8,
    doc: &'static str,
}

const TOPIC_CONFIG_DOCS: &[TopicConfig] = &[
    TopicConfig {
        name: "retention.ms",
        broker_name: "log.retention.ms",
        config_type: TYPE_LONG,
        doc: "How long a closed segment is kept; -1: no time limit.",
    },
    TopicConfig {
        name: "retention.bytes",
        broker_name: "log.retention.bytes",
        config_type: TYPE_LONG,
        doc: "The most a partition keeps before its oldest segments are deleted; -1: no limit.",
    },
    TopicConfig {
        name: "segment.bytes",
        broker_name: "log.segment.bytes",
        config_type: TYPE_INT,
        doc: "Size at which a segment rolls.",
    },
    TopicConfig {
        name: "segment.ms",
        broker_name: "log.roll.ms",
        config_type: TYPE_LONG,
        doc: "Age at which a segment rolls.",
    },
    TopicConfig {
        name: "max.message.bytes",
        broker_name: "message.max.bytes",
        config_type: TYPE_INT,
        doc: "The largest record batch the topic accepts.",
    },
    TopicConfig {
        name: "cleanup.policy",
        broker_name: "log.cleanup.policy",
        config_type: TYPE_LIST,
        doc: "delete: old segments are deleted by retention; compact: the cleaner keeps the newest record of each key; or both.",
    },
    TopicConfig {
        name: "min.cleanable.dirty.ratio",
        broker_name: "log.cleaner.min.cleanable.ratio",
        config_type: TYPE_DOUBLE,
        doc: "A compacted log is cleaned once this share of it was written since its last cleaning.",
    },
    TopicConfig {
        name: "min.compaction.lag.ms",
        broker_name: "log.cleaner.min.compaction.lag.ms",
        config_type: TYPE_LONG,
        doc: "A record stays uncompacted at least this long.",
    },
    TopicConfig {
        name: "max.compaction.lag.ms",
        broker_name: "log.cleaner.max.compaction.lag.ms",
        config_type: TYPE_LONG,
        doc: "A record is eligible for compaction at most this long after it was written, whatever the dirty ratio.",
    },
    TopicConfig {
        name: "delete.retention.ms",
        broker_name: "log.cleaner.delete.retention.ms",
        config_type: TYPE_LONG,
        doc: "How long a tombstone is kept after the cleaner first saw it.",
    },
    TopicConfig {
        name: "message.timestamp.type",
        broker_name: "log.message.timestamp.type",
        config_type: TYPE_STRING,
        doc: "CreateTime: records keep the producer's timestamps; LogAppendTime: each batch takes the time of its append.",
    },
    TopicConfig {
        name: "min.insync.replicas",
        broker_name: "min.insync.replicas",
        config_type: TYPE_INT,
        doc: "An acks=all produce needs at least this many in-sync replicas, or gets NOT_ENOUGH_REPLICAS.",
    },
];

/// What a topic without an override gets from the broker's settings `c`.
fn topic_default(c: &BrokerConfig, name: &str) -> String {
    let opt = |v: Option<i64>| v.unwrap_or(-1).to_string();
    match name {
        "retention.ms" => opt(c.log_retention_ms),
        "retention.bytes" => opt(c.log_retention_bytes.map(|v| v as i64)),
        "segment.bytes" => c.log_segment_bytes.to_string(),
        "segment.ms" => opt(c.log_roll_ms.map(|v| v as i64)),
        "max.message.bytes" => c.message_max_bytes.to_string(),
        "cleanup.policy" => c.log_cleanup_policy.to_string(),
        "min.cleanable.dirty.ratio" => c.log_cleaner_min_cleanable_ratio.to_string(),
        "min.compaction.lag.ms" => c.log_cleaner_min_compaction_lag_ms.to_string(),
        "max.compaction.lag.ms" => c.log_cleaner_max_compaction_lag_ms.to_string(),
        "delete.retention.ms" => c.log_cleaner_delete_retention_ms.to_string(),
        "message.timestamp.type" => if c.log_message_timestamp_log_append {
            "LogAppendTime"
        } else {
            "CreateTime"
        }
        .to_string(),
        "min.insync.replicas" => c.min_insync_replicas.to_string(),
        _ => String::new(),
    }
}

fn synonym(name: &str, value: String, source: i8) -> DescribeConfigsSynonym {
    let mut s = DescribeConfigsSynonym::default();
    s.name = sb(name);
    s.value = Some(sb(&value));
    s.source = source;
    s
}

/// Where a broker setting has a value, most specific first, as Kafka orders synonyms: this
/// broker's dynamic config, the cluster default's, the config file or command line, the
/// default. Each value is given as `show` makes it of a config with that one value set.
fn broker_levels(
    config: &BrokerConfig,
    dynamic: &DynamicConfigs,
    name: &'static str,
    show: impl Fn(&BrokerConfig) -> String,
) -> Vec<(String, i8)> {
    let defaults = BrokerConfig::default();
    let mut levels = Vec::new();
    for (map, source) in [
        (&dynamic.broker, SOURCE_DYNAMIC_BROKER),
        (&dynamic.cluster_default, SOURCE_DYNAMIC_DEFAULT_BROKER),
    ] {
        if let Some(v) = map.get(name) {
            let mut c = defaults.clone();
            if c.set_value(name, v).is_ok() {
                levels.push((show(&c), source));
            }
        }
    }
    if config.set_names.contains(name) {
        levels.push((show(config), SOURCE_STATIC_BROKER));
    }
    levels.push((show(&defaults), SOURCE_DEFAULT));
    levels
}

fn entry(
    name: &str,
    levels: Vec<(String, &str, i8)>,
    read_only: bool,
    config_type: i8,
    doc: &str,
    r: &DescribeConfigsRequest,
) -> DescribeConfigsResourceResult {
    let (value, _, source) = levels.first().cloned().expect("a default at least");
    let mut e = DescribeConfigsResourceResult::default();
    e.name = sb(name);
    e.value = Some(sb(&value));
    e.config_source = source;
    e.read_only = read_only;
    e.config_type = config_type;
    if r.include_synonyms {
        e.synonyms = levels
            .into_iter()
            .map(|(v, n, source)| synonym(n, v, source))
            .collect();
    }
    if r.include_documentation {
        e.documentation = Some(sb(doc));
    }
    e
}

pub fn handle(
    config: &BrokerConfig,
    topics: &Topics,
    ctx: &RequestContext,
    r: DescribeConfigsRequest,
    refused: Refused,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let dynamic = topics.dynamic_configs();
    let node = config.node_id.to_string();
    let mut resp = DescribeConfigsResponse::default();
    for res in &r.resources {
        let mut out = DescribeConfigsResult::default();
        out.resource_type = res.resource_type;
        out.resource_name = sb(&res.resource_name);
        let wanted = |name: &str| {
            res.configuration_keys
                .as_ref()
                .is_none_or(|keys| keys.iter().any(|k| k == name))
        };
        match res.resource_type {
            RESOURCE_TOPIC => match topics.get(&res.resource_name) {
                Some(t) => {
                    for name in TOPIC_CONFIGS.iter().filter(|n| wanted(n)) {
                        let c = TOPIC_CONFIG_DOCS
                            .iter()
                            .find(|c| c.name == *name)
                            .expect("every topic config is documented");
                        let mut levels: Vec<(String, &str, i8)> = Vec::new();
                        if let Some(v) = t.configs.get(*name) {
                            levels.push((v.clone(), c.name, SOURCE_DYNAMIC_TOPIC));
                        }
                        // The broker's levels, in the topic config's terms.
                        levels.extend(
                            broker_levels(config, &dynamic, c.broker_name, |bc| topic_default(bc, name))
                                .into_iter()
                                .map(|(v, source)| (v, c.broker_name, source)),
                        );
                        out.configs
                            .push(entry(name, levels, false, c.config_type, c.doc, &r));
                    }
                }
                None => {
                    out.error_code = ErrorCode::UnknownTopicOrPartition.code();
                    out.error_message = Some(sb(&format!("no topic {}", res.resource_name)));
                }
            },
            // The cluster default: only what is set at that level, as Kafka answers.
            RESOURCE_BROKER if res.resource_name.is_empty() => {
                for (name, value) in dynamic.cluster_default.iter().filter(|(n, _)| wanted(n)) {
                    let doc = SETTINGS.iter().find(|s| s.name == name).map_or("", |s| s.doc);
                    let levels = vec![(value.clone(), name.as_str(), SOURCE_DYNAMIC_DEFAULT_BROKER)];
                    out.configs
                        .push(entry(name, levels, false, TYPE_UNKNOWN, doc, &r));
                }
            }
            RESOURCE_BROKER if res.resource_name == node => {
                for s in SETTINGS.iter().filter(|s| wanted(s.name)) {
                    let levels = broker_levels(config, &dynamic, s.name, |c| {
                        c.value_of(s.name).unwrap_or_else(|| s.default.to_string())
                    })
                    .into_iter()
                    .map(|(v, source)| (v, s.name, source))
                    .collect();
                    // Only the dynamic settings can change while the broker runs.
                    let read_only = !DYNAMIC_SETTINGS.contains(&s.name);
                    out.configs
                        .push(entry(s.name, levels, read_only, TYPE_UNKNOWN, s.doc, &r));
                }
            }
            RESOURCE_BROKER => {
                out.error_code = ErrorCode::InvalidRequest.code();
                out.error_message = Some(sb(&format!(
                    "no broker {} here: this is broker {node}",
                    res.resource_name
                )));
            }
            other => {
                out.error_code = ErrorCode::InvalidRequest.code();
                out.error_message = Some(sb(&format!("resource type {other} is not supported")));
            }
        }
        resp.results.push(out);
    }
    refused.answer(&mut resp);
    responses::encode(ApiKey::DescribeConfigs, version, correlation_id, &resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_topic_config_has_its_broker_synonym_type_and_doc() {
        for name in TOPIC_CONFIGS {
            assert!(
                TOPIC_CONFIG_DOCS.iter().any(|c| c.name == *name),
                "{name} is described"
            );
        }
        assert_eq!(TOPIC_CONFIG_DOCS.len(), TOPIC_CONFIGS.len());
    }
}
