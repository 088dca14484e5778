//! Topics: names, ids, partition counts and config overrides, as the cluster metadata's
//! image has them (`apply_image`), applied to this broker's logs. `DATA_DIR/topics.json`
//! keeps the internal topics (written atomically: temp file, fsync, rename, directory fsync),
//! whose logs the coordinators open at start. Every method here may touch the disk: callers
//! run it on the I/O pool, never on a socket thread.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use laminar_storage::backend::{read_whole, write_atomically};
use laminar_storage::{Log, LogConfig, LogId, Store};
use serde::{Deserialize, Serialize};

use crate::config::{parse_ratio, BrokerConfig, CleanupPolicy};
use crate::dynamic_configs::{DynamicConfigs, EffectiveConfig};
use crate::error::BrokerError;
use laminar_cluster::image::ClusterImage;
use laminar_coordinators::groups::store::OFFSETS_TOPIC;
use laminar_coordinators::txn::log::TRANSACTION_TOPIC;

pub const TOPICS_FILE: &str = "topics.json";
/// Kafka's limit on topic name length.
pub const TOPIC_NAME_BYTES_MAX: usize = 249;
pub use laminar_cluster::names::{is_internal, PARTITIONS_MAX};

/// Topic-level configs Laminar understands, by Kafka's names.
pub const TOPIC_CONFIGS: &[&str] = &[
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "segment.ms",
    "max.message.bytes",
    "cleanup.policy",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "delete.retention.ms",
    "message.timestamp.type",
    "min.insync.replicas",
];

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TopicMeta {
    pub name: String,
    /// The topic id, as 32 hex digits.
    pub id: String,
    pub partitions: u32,
    pub configs: BTreeMap<String, String>,
}

impl TopicMeta {
    pub fn uuid(&self) -> [u8; 16] {
        parse_id(&self.id)
    }
}

/// A topic id's 32 hex digits as its 16 bytes.
pub fn parse_id(id: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = id
            .get(2 * i..2 * i + 2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .unwrap_or(0);
    }
    out
}

#[derive(Serialize, Deserialize, Default)]
struct TopicsFile {
    topics: Vec<TopicMeta>,
}

pub struct Topics {
    store: Arc<Store>,
    /// The settings read at start (`laminar.toml`, the command line, the defaults).
    config: BrokerConfig,
    /// Dynamic broker configs, and `config` with them applied: the settings in effect.
    dynamic: RwLock<DynamicConfigs>,
    effective: RwLock<Arc<BrokerConfig>>,
    topics: RwLock<BTreeMap<String, TopicMeta>>,
    /// Serialises the applying of images, the dynamic configs and the file rewrite.
    write_lock: std::sync::Mutex<()>,
}

pub fn valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= TOPIC_NAME_BYTES_MAX
        && name != "."
        && name != ".."
        // Reserved for the broker's own internal logs.
        && !name.starts_with("__laminar")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// What a single node kept in its data directory before it was a cluster of one voter: its
/// dynamic broker configs, its client quotas, and its group log (JSON records).
const UNMIGRATED_FILES: [&str; 2] = ["broker_configs.json", "quotas.json"];
const UNMIGRATED_GROUPS_LOG: &str = "__laminar_groups";

/// Refuses a data directory in the format of a single node before it was a cluster of one
/// voter (never released; its migration was removed): its topics file names topics other
/// than the internal ones, or it holds that format's files. Called before anything opens
/// the directory, so it is left exactly as it was: serving it would remove those topics'
/// logs as placed nowhere. Reads the directory: startup only.
pub fn refuse_unmigrated(dir: &std::path::Path) -> std::io::Result<()> {
    let refuse = |why: String| {
        std::io::Error::other(format!(
            "{} is a single node's data directory from before it was a cluster of one voter \
             ({why}): that format was never released and is no longer migrated; start with a \
             new data directory",
            dir.display()
        ))
    };
    match std::fs::read(dir.join(TOPICS_FILE)) {
        Ok(bytes) => {
            let file: TopicsFile = serde_json::from_slice(&bytes)
                .map_err(|e| std::io::Error::other(format!("{}: {e}", dir.join(TOPICS_FILE).display())))?;
            if let Some(other) = file.topics.iter().find(|t| !is_internal(&t.name)) {
                return Err(refuse(format!("{TOPICS_FILE} names topic {}", other.name)));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    for old in UNMIGRATED_FILES {
        if dir.join(old).exists() {
            return Err(refuse(format!("it holds {old}")));
        }
    }
    if dir.join(format!("{UNMIGRATED_GROUPS_LOG}-0")).exists() {
        return Err(refuse(format!("it holds {UNMIGRATED_GROUPS_LOG}-0")));
    }
    Ok(())
}

fn random_id() -> String {
    let id = uuid::Uuid::new_v4();
    id.simple().to_string()
}

impl Topics {
    pub fn open(store: Arc<Store>, config: BrokerConfig) -> std::io::Result<Topics> {
        let path = store.dir().join(TOPICS_FILE);
        let file: TopicsFile = match read_whole(store.storage().as_ref(), &path)? {
            Some(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?,
            None => TopicsFile::default(),
        };
        // Every topic but the internal ones is the cluster metadata's (`refuse_unmigrated`
        // turned away, before anything opened, a directory whose file holds others).
        let dynamic = DynamicConfigs::default();
        let effective = dynamic
            .effective(&config)
            .map_err(|e| std::io::Error::other(format!("the settings: {e}")))?;
        let topics = Topics {
            store,
            config,
            dynamic: RwLock::new(dynamic),
            effective: RwLock::new(Arc::new(effective)),
            topics: RwLock::new(file.topics.into_iter().map(|t| (t.name.clone(), t)).collect()),
            write_lock: std::sync::Mutex::new(()),
        };
        if topics.get(OFFSETS_TOPIC).is_none() {
            topics.create_internal_topic(OFFSETS_TOPIC, topics.config.offsets_topic_segment_bytes)?;
        }
        if topics.get(TRANSACTION_TOPIC).is_none() {
            topics.create_internal_topic(
                TRANSACTION_TOPIC,
                topics.config.transaction_state_log_segment_bytes,
            )?;
        }
        // The internal topics' logs: the coordinators open them at start, before the
        // cluster metadata places them.
        for t in topics.list() {
            for p in 0..t.partitions {
                topics
                    .ensure_log(&t, p)
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
            }
        }
        Ok(topics)
    }

    /// Creates `__consumer_offsets` or `__transaction_state` as Kafka does: one partition here
    /// (a single node), compacted, its segment size from `offsets.topic.segment.bytes` or
    /// `transaction.state.log.segment.bytes`, both as topic configs.
    fn create_internal_topic(&self, name: &str, segment_bytes: u64) -> std::io::Result<()> {
        let configs = BTreeMap::from([
            ("cleanup.policy".to_string(), "compact".to_string()),
            ("segment.bytes".to_string(), segment_bytes.to_string()),
        ]);
        let meta = TopicMeta {
            name: name.to_string(),
            id: random_id(),
            partitions: 1,
            configs,
        };
        let _w = self.write_lock.lock().unwrap();
        self.topics
            .write()
            .unwrap()
            .insert(meta.name.clone(), meta.clone());
        self.persist()?;
        crate::info!("created topic {name} (id {})", meta.id);
        Ok(())
    }

    pub fn list(&self) -> Vec<TopicMeta> {
        self.topics.read().unwrap().values().cloned().collect()
    }

    pub fn get(&self, name: &str) -> Option<TopicMeta> {
        self.topics.read().unwrap().get(name).cloned()
    }

    pub fn by_id(&self, id: &[u8; 16]) -> Option<TopicMeta> {
        self.topics
            .read()
            .unwrap()
            .values()
            .find(|t| &t.uuid() == id)
            .cloned()
    }

    /// The broker settings in effect: those read at start, with the dynamic ones applied.
    pub fn effective_config(&self) -> Arc<BrokerConfig> {
        self.effective.read().unwrap().clone()
    }

    /// The dynamic broker configs, both levels.
    pub fn dynamic_configs(&self) -> DynamicConfigs {
        self.dynamic.read().unwrap().clone()
    }

    /// The log config of a topic: broker defaults, overridden by the topic's configs.
    pub fn log_config(&self, configs: &BTreeMap<String, String>) -> Result<LogConfig, String> {
        log_config(&self.effective_config(), configs)
    }

    /// The settings `dynamic` puts in effect, if they are valid and every topic's logs
    /// accept them.
    pub fn check_dynamic(&self, dynamic: &DynamicConfigs) -> Result<BrokerConfig, String> {
        let effective = dynamic.effective(&self.config)?;
        for t in self.list() {
            log_config(&effective, &t.configs).map_err(|e| format!("topic {}: {e}", t.name))?;
        }
        Ok(effective)
    }

    /// In a cluster: the dynamic broker configs the cluster metadata holds for this broker
    /// (the image is their truth; nothing is written here). Applied to every topic's logs
    /// (those with an override of their own keep it). Blocking (logs are reconfigured).
    pub fn set_dynamic_configs(&self, dynamic: DynamicConfigs) -> Result<(), String> {
        let _w = self.write_lock.lock().unwrap();
        if dynamic == self.dynamic_configs() {
            return Ok(());
        }
        let effective = self.check_dynamic(&dynamic)?;
        crate::info!(
            "dynamic broker configs from the cluster metadata: cluster default {:?}, this broker {:?}",
            dynamic.cluster_default,
            dynamic.broker
        );
        self.install_dynamic(dynamic, effective)
    }

    fn install_dynamic(&self, dynamic: DynamicConfigs, effective: BrokerConfig) -> Result<(), String> {
        *self.dynamic.write().unwrap() = dynamic;
        *self.effective.write().unwrap() = Arc::new(effective);
        // The logs this broker has: in a cluster, a topic's other partitions live elsewhere.
        for t in self.list() {
            for p in 0..t.partitions {
                if self.store.log(&LogId::new(&t.name, p)).is_some() {
                    self.ensure_log(&t, p)?;
                }
            }
        }
        Ok(())
    }
}

/// The log config of a topic with `configs`, on a broker with settings `c`.
fn log_config(c: &BrokerConfig, configs: &BTreeMap<String, String>) -> Result<LogConfig, String> {
    let mut lc = LogConfig {
        segment_bytes: c.log_segment_bytes,
        segment_ms: c.log_roll_ms,
        preallocate_bytes: c.log_preallocate_bytes,
        retention_ms: c.log_retention_ms,
        retention_bytes: c.log_retention_bytes,
        flush_interval_ms: c.log_flush_interval_ms,
        flush_messages: c.log_flush_interval_messages,
        checkpoint_interval_ms: c.log_flush_offset_checkpoint_interval_ms,
        cleanup_delete: c.log_cleanup_policy.delete,
        cleanup_compact: c.log_cleanup_policy.compact,
        min_cleanable_dirty_ratio: c.log_cleaner_min_cleanable_ratio,
        min_compaction_lag_ms: c.log_cleaner_min_compaction_lag_ms,
        max_compaction_lag_ms: c.log_cleaner_max_compaction_lag_ms,
        delete_retention_ms: c.log_cleaner_delete_retention_ms,
        ..LogConfig::default()
    };
    for (k, v) in configs {
        let int = || {
            v.parse::<i64>()
                .map_err(|_| format!("{k}: {v:?} is not an integer"))
        };
        match k.as_str() {
            "retention.ms" => lc.retention_ms = Some(int()?).filter(|v| *v >= 0),
            "retention.bytes" => lc.retention_bytes = Some(int()?).filter(|v| *v >= 0).map(|v| v as u64),
            "segment.bytes" => lc.segment_bytes = int()?.max(0) as u64,
            "segment.ms" => lc.segment_ms = Some(int()?.max(1) as u64),
            "max.message.bytes" => {
                if int()? <= 0 {
                    return Err("max.message.bytes must be positive".into());
                }
            }
            "cleanup.policy" => {
                let p = CleanupPolicy::parse(v)?;
                (lc.cleanup_delete, lc.cleanup_compact) = (p.delete, p.compact);
            }
            "min.cleanable.dirty.ratio" => lc.min_cleanable_dirty_ratio = parse_ratio(k, v)?,
            "min.compaction.lag.ms" => lc.min_compaction_lag_ms = int()?.max(0),
            "max.compaction.lag.ms" => {
                lc.max_compaction_lag_ms = Some(int()?)
                    .filter(|v| *v > 0)
                    .ok_or(format!("{k} must be positive"))?
            }
            "delete.retention.ms" => lc.delete_retention_ms = int()?.max(0),
            // Applied by the produce path, not the log.
            "message.timestamp.type" => {
                crate::config::log_append_time(v)?;
            }
            // Applied by the produce path too.
            "min.insync.replicas" => {
                if int()? < 1 {
                    return Err("min.insync.replicas must be at least 1".into());
                }
            }
            _ => return Err(format!("unknown or unsupported topic config {k:?}")),
        }
    }
    lc.validate()?;
    Ok(lc)
}

impl Topics {
    /// A topic's `min.insync.replicas`: its own, or the broker's.
    pub fn min_insync_replicas(&self, topic: &TopicMeta) -> usize {
        topic
            .configs
            .get("min.insync.replicas")
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(self.effective_config().min_insync_replicas as usize)
    }

    /// Does this topic take the time of append as its records' timestamp?
    pub fn log_append_time(&self, topic: &TopicMeta) -> bool {
        match topic.configs.get("message.timestamp.type") {
            Some(v) => crate::config::log_append_time(v).unwrap_or(false),
            None => self.effective_config().log_message_timestamp_log_append,
        }
    }

    /// The largest batch a producer may send to this topic.
    pub fn max_message_bytes(&self, topic: &TopicMeta) -> usize {
        topic
            .configs
            .get("max.message.bytes")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| self.effective_config().message_max_bytes)
    }

    fn ensure_log(&self, t: &TopicMeta, partition: u32) -> Result<Arc<Log>, String> {
        let id = LogId::new(&t.name, partition);
        let config = self.log_config(&t.configs)?;
        match self.store.log(&id) {
            Some(log) => {
                let compacted = config.cleanup_compact && !log.config().cleanup_compact;
                log.set_config(config)?;
                if compacted {
                    self.store.wake_cleaner();
                }
                Ok(log)
            }
            None => self.store.create_log(&id, config).map_err(|e| e.to_string()),
        }
    }

    /// In a cluster: takes the topics of a new image, creates the logs of the partitions
    /// placed on `node`, and removes the logs of topics deleted and partitions moved away
    /// since `before`. Internal topics' logs stay: the coordinators hold them.
    pub fn apply_image(
        &self,
        before: Option<&ClusterImage>,
        image: &ClusterImage,
        node: laminar_cluster::BrokerId,
    ) {
        let _w = self.write_lock.lock().unwrap();
        let hosted = |t: &laminar_cluster::image::TopicInfo| -> Vec<u32> {
            (0..t.partitions.len() as u32)
                .filter(|p| t.partitions[*p as usize].replicas.contains(&node))
                .collect()
        };
        let metas: BTreeMap<String, TopicMeta> = image
            .topics
            .values()
            .map(|t| {
                let meta = TopicMeta {
                    name: t.name.clone(),
                    id: t.id.clone(),
                    partitions: t.partitions.len() as u32,
                    configs: t.configs.clone(),
                };
                (t.name.clone(), meta)
            })
            .collect();
        for t in image.topics.values() {
            for p in hosted(t) {
                if let Err(e) = self.ensure_log(&metas[&t.name], p) {
                    crate::warn!("creating the log of {}-{p}, placed here: {e}", t.name);
                }
            }
        }
        *self.topics.write().unwrap() = metas;
        let Some(before) = before else {
            for (id, _) in self.store.logs() {
                let known = image
                    .topics
                    .get(&id.topic)
                    .is_some_and(|t| hosted(t).contains(&id.partition));
                if !known && !is_internal(&id.topic) {
                    crate::warn!("{id} is not placed here by the cluster metadata: kept, unserved");
                }
            }
            return;
        };
        for old in before.topics.values() {
            if is_internal(&old.name) {
                continue;
            }
            let kept: Vec<u32> = match image.topics.get(&old.name) {
                Some(t) if t.id == old.id => hosted(t),
                _ => Vec::new(),
            };
            for p in hosted(old) {
                if !kept.contains(&p) {
                    crate::info!("removing {}-{p}: no longer placed here", old.name);
                    if let Err(e) = self.store.delete_log(&LogId::new(&old.name, p)) {
                        crate::warn!("removing {}-{p}: {e}", old.name);
                    }
                }
            }
        }
    }

    /// The internal topics (the others are the cluster metadata's), through the store's
    /// storage interface, like every other file the broker writes.
    fn persist(&self) -> std::io::Result<()> {
        let file = TopicsFile {
            topics: self.list().into_iter().filter(|t| is_internal(&t.name)).collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
        write_atomically(
            self.store.storage().as_ref(),
            self.store.dir(),
            TOPICS_FILE,
            &bytes,
        )
    }

    /// Checks a new topic's name, partition count (-1: `num.partitions`) and configs as
    /// CreateTopics does. Returns the partition count.
    pub fn check_new(
        &self,
        name: &str,
        partitions: i32,
        configs: &BTreeMap<String, String>,
    ) -> Result<u32, BrokerError> {
        if !valid_topic_name(name) {
            return Err(BrokerError::InvalidTopic(format!("invalid topic name {name:?}")));
        }
        let partitions = if partitions == -1 {
            self.config.num_partitions as i32
        } else {
            partitions
        };
        if partitions <= 0 || partitions as u32 > PARTITIONS_MAX {
            return Err(BrokerError::InvalidPartitions(format!(
                "{partitions} partitions: must be 1 to {PARTITIONS_MAX}"
            )));
        }
        self.log_config(configs).map_err(BrokerError::InvalidConfig)?;
        Ok(partitions as u32)
    }

    /// A single node's logs that its own, caught-up cluster metadata no longer places here:
    /// the deletions a crash interrupted (the controller committed them; the directories
    /// were still there). Removed, or re-creating the topic would serve the old records.
    /// Blocking. (In a cluster of several, the first image may come from a voter that is
    /// behind: there only the removals seen between two images are made.)
    pub fn remove_unplaced(&self, image: &ClusterImage, node: laminar_cluster::BrokerId) {
        let _w = self.write_lock.lock().unwrap();
        for (id, _) in self.store.logs() {
            let placed = image.topics.get(&id.topic).is_some_and(|t| {
                t.partitions
                    .get(id.partition as usize)
                    .is_some_and(|p| p.replicas.contains(&node))
            });
            if !placed && !is_internal(&id.topic) {
                crate::warn!("removing {id}: no topic places it here (a deletion a crash interrupted)");
                if let Err(e) = self.store.delete_log(&id) {
                    crate::warn!("removing {id}: {e}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_nodes_directory_from_before_the_cluster_of_one_is_refused() {
        let refused = |setup: &dyn Fn(&std::path::Path)| {
            let dir = tempfile::tempdir().unwrap();
            setup(dir.path());
            refuse_unmigrated(dir.path()).map_err(|e| e.to_string())
        };
        assert!(refused(&|_| {}).is_ok(), "a new directory");
        let topics = |names: &[&str]| {
            let topics: Vec<serde_json::Value> = names
                .iter()
                .map(|n| serde_json::json!({"name": n, "id": "x", "partitions": 1, "configs": {}}))
                .collect();
            serde_json::json!({ "topics": topics }).to_string()
        };
        let internal = topics(&[OFFSETS_TOPIC, TRANSACTION_TOPIC]);
        assert!(refused(&|d| std::fs::write(d.join(TOPICS_FILE), &internal).unwrap()).is_ok());
        let with_orders = topics(&[OFFSETS_TOPIC, "orders"]);
        let e = refused(&|d| std::fs::write(d.join(TOPICS_FILE), &with_orders).unwrap()).unwrap_err();
        assert!(
            e.contains("names topic orders") && e.contains("no longer migrated"),
            "{e}"
        );
        for old in UNMIGRATED_FILES {
            let e = refused(&|d| std::fs::write(d.join(old), "{}").unwrap()).unwrap_err();
            assert!(e.contains(old), "{e}");
        }
        let e = refused(&|d| std::fs::create_dir(d.join("__laminar_groups-0")).unwrap()).unwrap_err();
        assert!(e.contains("__laminar_groups-0"), "{e}");
    }
}
