//! IncrementalAlterConfigs v0-1 (what `kafka-configs --alter` and the Admin client's
//! `incrementalAlterConfigs` send) and AlterConfigs v0-2 (the older whole-set replacement), for
//! topics and brokers. A topic's change is validated as CreateTopics validates configs, applied
//! to the topic's logs, and kept in the cluster metadata, so it survives a restart.
//!
//! For brokers, the dynamic broker configs (see `dynamic_configs`): this broker's (resource
//! name = its node id) or the cluster default (empty name); settings that are not dynamic are
//! answered with INVALID_CONFIG and the reason. They live in the cluster metadata (any
//! broker's entity, through any broker), and each broker applies the default and its own. Client quotas are altered with
//! AlterClientQuotas, which is what `kafka-configs --entity-type clients` sends.

use std::collections::BTreeMap;

use kafka_protocol::messages::{alter_configs_response, incremental_alter_configs_response};
use kafka_protocol::messages::{AlterConfigsResponse, IncrementalAlterConfigsResponse};
use laminar_protocol::requests::{AlterConfigsRequest, AlterConfigsResource, AlterableConfig};
use laminar_protocol::{responses, ApiKey};

use super::refused::Refused;
use super::{sb, Encoded};
use crate::changes::MetadataChanges;
use crate::context::RequestContext;
use crate::dynamic_configs::Level;
use crate::error::BrokerError;
use laminar_cluster::image::ConfigTarget;
use laminar_cluster::ClusterError;
use laminar_protocol::ErrorCode;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;

/// IncrementalAlterConfigs' operations.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// Topic configs whose value is a comma-separated list (APPEND and SUBTRACT apply to them).
const LIST_CONFIGS: &[&str] = &["cleanup.policy"];

pub async fn handle(
    changes: &MetadataChanges<'_>,
    ctx: &RequestContext,
    r: AlterConfigsRequest,
    refused: Refused,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let incremental = r.incremental;
    let validate_only = r.validate_only;
    let mut results: Vec<(i8, String, i16, Option<String>)> = Vec::new();
    for res in r.resources {
        // A topic's configs, and the dynamic broker configs, change through the controller.
        let outcome = match res.resource_type {
            RESOURCE_TOPIC => alter_topic(changes, &res, incremental, validate_only).await,
            RESOURCE_BROKER => alter_broker(changes, &res, incremental, validate_only).await,
            other => Err(BrokerError::InvalidRequest(format!(
                "resource type {other} cannot be altered here (topics: 2, brokers: 4)"
            ))),
        };
        let (code, message) = match outcome {
            Ok(()) => (ErrorCode::None, None),
            Err(e) => (e.code(), Some(e.to_string())),
        };
        results.push((res.resource_type, res.resource_name, code.code(), message));
    }
    // Answered once in effect here: the client's next request finds it.
    changes.applied_here().await;
    if incremental {
        let mut resp = IncrementalAlterConfigsResponse::default();
        resp.responses = results
            .into_iter()
            .map(|(t, name, code, message)| {
                let mut o = incremental_alter_configs_response::AlterConfigsResourceResponse::default();
                o.resource_type = t;
                o.resource_name = sb(&name);
                o.error_code = code;
                o.error_message = message.as_deref().map(sb);
                o
            })
            .collect();
        refused.answer(&mut resp);
        responses::encode(ApiKey::IncrementalAlterConfigs, version, correlation_id, &resp)
    } else {
        let mut resp = AlterConfigsResponse::default();
        resp.responses = results
            .into_iter()
            .map(|(t, name, code, message)| {
                let mut o = alter_configs_response::AlterConfigsResourceResponse::default();
                o.resource_type = t;
                o.resource_name = sb(&name);
                o.error_code = code;
                o.error_message = message.as_deref().map(sb);
                o
            })
            .collect();
        refused.answer(&mut resp);
        responses::encode(ApiKey::AlterConfigs, version, correlation_id, &resp)
    }
}

/// A topic's configs: made from those the cluster metadata holds, checked as CreateTopics
/// checks them, and replaced through the controller.
async fn alter_topic(
    changes: &MetadataChanges<'_>,
    res: &AlterConfigsResource,
    incremental: bool,
    validate_only: bool,
) -> Result<(), BrokerError> {
    let change = |configs: &mut BTreeMap<String, String>| -> Result<(), ClusterError> {
        changed(configs, res, incremental).map_err(BrokerError::InvalidConfig)?;
        changes
            .topics
            .log_config(configs)
            .map_err(BrokerError::InvalidConfig)?;
        Ok(())
    };
    changes
        .cluster
        .alter_configs_here(
            ConfigTarget::Topic(res.resource_name.clone()),
            change,
            validate_only,
        )
        .await?;
    Ok(())
}

/// Dynamic broker configs: the cluster default (empty name) or one broker's, held in the
/// cluster metadata, so that every broker applies the default and each its own. Checked
/// against this broker's settings (another broker's static ones are not known here).
async fn alter_broker(
    changes: &MetadataChanges<'_>,
    res: &AlterConfigsResource,
    incremental: bool,
    validate_only: bool,
) -> Result<(), BrokerError> {
    let cluster = changes.cluster;
    let image = cluster.image();
    // The cluster default, or a registered broker's id, as the metadata keys it ("01" is 1).
    let entity = match res.resource_name.as_str() {
        "" => String::new(),
        name => match name.parse::<i32>() {
            Ok(id) if image.brokers.contains_key(&laminar_cluster::BrokerId(id)) => id.to_string(),
            _ => {
                return Err(BrokerError::InvalidRequest(format!(
                    "no broker {name} in the cluster"
                )))
            }
        },
    };
    let node = cluster.node_id;
    let change = |configs: &mut BTreeMap<String, String>| -> Result<(), ClusterError> {
        changed(configs, res, incremental).map_err(BrokerError::InvalidConfig)?;
        let mut dynamic = cluster.image().dynamic_configs_of(node);
        *dynamic.level_mut(if entity.is_empty() {
            Level::ClusterDefault
        } else {
            Level::Broker
        }) = configs.clone();
        changes
            .topics
            .check_dynamic(&dynamic)
            .map_err(BrokerError::InvalidConfig)?;
        Ok(())
    };
    cluster
        .alter_configs_here(ConfigTarget::Broker(entity.clone()), change, validate_only)
        .await?;
    Ok(())
}

/// What the request makes of a topic's configs: IncrementalAlterConfigs' operations, or
/// AlterConfigs' whole new set (what it does not name returns to its default).
fn changed(
    configs: &mut BTreeMap<String, String>,
    res: &AlterConfigsResource,
    incremental: bool,
) -> Result<(), String> {
    if incremental {
        res.configs.iter().try_for_each(|c| apply(configs, c))
    } else {
        *configs = res
            .configs
            .iter()
            .filter_map(|c| Some((c.name.clone(), c.value.clone()?)))
            .collect();
        Ok(())
    }
}

fn apply(configs: &mut BTreeMap<String, String>, c: &AlterableConfig) -> Result<(), String> {
    let list = LIST_CONFIGS.contains(&c.name.as_str());
    let value = || {
        c.value
            .clone()
            .ok_or_else(|| format!("{}: the operation needs a value", c.name))
    };
    match c.operation {
        OP_SET => {
            configs.insert(c.name.clone(), value()?);
        }
        OP_DELETE => {
            configs.remove(&c.name);
        }
        OP_APPEND | OP_SUBTRACT if !list => {
            return Err(format!(
                "{}: APPEND and SUBTRACT apply only to list configs",
                c.name
            ));
        }
        OP_APPEND | OP_SUBTRACT => {
            let current = configs
                .get(&c.name)
                .cloned()
                .unwrap_or_else(|| "delete".to_string());
            let mut items: Vec<String> = current.split(',').map(|s| s.trim().to_string()).collect();
            for v in value()?.split(',').map(str::trim) {
                if c.operation == OP_APPEND {
                    if !items.iter().any(|i| i == v) {
                        items.push(v.to_string());
                    }
                } else {
                    items.retain(|i| i != v);
                }
            }
            configs.insert(c.name.clone(), items.join(","));
        }
        other => return Err(format!("{}: unknown operation {other}", c.name)),
    }
    Ok(())
}
