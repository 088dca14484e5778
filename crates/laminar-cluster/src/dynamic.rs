//! Dynamic broker configs as the cluster metadata holds them: the cluster-wide default's and
//! each broker's values, by Kafka's names. Which settings may change, and what a broker makes
//! of them, is the broker's (`laminar_broker::dynamic_configs`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The broker settings that can be changed while running.
pub const DYNAMIC_SETTINGS: &[&str] = &[
    "log.retention.ms",
    "log.retention.bytes",
    "log.segment.bytes",
    "log.roll.ms",
    "message.max.bytes",
    "log.flush.interval.ms",
    "log.flush.interval.messages",
];

/// Which of the two dynamic levels a change is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `--entity-default`: every broker of the cluster (here, the one).
    ClusterDefault,
    /// `--entity-name <node.id>`: this broker.
    Broker,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DynamicConfigs {
    #[serde(default)]
    pub cluster_default: BTreeMap<String, String>,
    #[serde(default)]
    pub broker: BTreeMap<String, String>,
}

impl DynamicConfigs {
    pub fn level(&self, level: Level) -> &BTreeMap<String, String> {
        match level {
            Level::ClusterDefault => &self.cluster_default,
            Level::Broker => &self.broker,
        }
    }

    pub fn level_mut(&mut self, level: Level) -> &mut BTreeMap<String, String> {
        match level {
            Level::ClusterDefault => &mut self.cluster_default,
            Level::Broker => &mut self.broker,
        }
    }
}
