//! Topics: names, ids, partition counts and config overrides, as the cluster metadata's
//! image has them (`apply_image`), applied to this broker's logs. `DATA_DIR/topics.json`
//! keeps the internal topics (written atomically: temp file, fsync, rename, directory fsync),
//! whose logs the coordinators open at start. Every method here may touch the disk: callers
//! run it on the I/O pool, never on a socket thread.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use laminar_storage::backend::{read_whole, remove_durably, write_atomically};
use laminar_storage::{Log, LogConfig, LogId, Store};
use serde::{Deserialize, Serialize};

use crate::config::{parse_ratio, BrokerConfig, CleanupPolicy};
use crate::dynamic_configs::{DynamicConfigs, EffectiveConfig, BROKER_CONFIGS_FILE};
use crate::error::BrokerError;
use laminar_cluster::image::ClusterImage;
use laminar_coordinators::groups::store::{LEGACY_GROUPS_LOG_TOPIC, OFFSETS_TOPIC};
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
    /// What a single node kept itself before it was a cluster of one, read at start.
    legacy: std::sync::Mutex<Option<Legacy>>,
}

/// A single node's topics and dynamic broker configs from before it was a cluster of one
/// voter, for the controller to take (`cluster/migrate.rs`).
#[derive(Debug, Clone, Default)]
pub struct Legacy {
    pub topics: Vec<TopicMeta>,
    pub dynamic: Option<DynamicConfigs>,
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
        // The dynamic broker configs are in the cluster metadata (`set_dynamic_configs`); a
        // file of them is a single node's from before it was a cluster of one, to migrate.
        let path = store.dir().join(BROKER_CONFIGS_FILE);
        let legacy_dynamic: Option<DynamicConfigs> = match read_whole(store.storage().as_ref(), &path)? {
            Some(bytes) => Some(
                serde_json::from_slice(&bytes)
                    .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?,
            ),
            None => None,
        };
        let dynamic = DynamicConfigs::default();
        let effective = dynamic
            .effective(&config)
            .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?;
        // Topics besides the internal ones are a single node's from before it was a cluster
        // of one: the controller takes them (`cluster/migrate.rs`).
        let (internal, legacy_topics): (Vec<TopicMeta>, Vec<TopicMeta>) =
            file.topics.into_iter().partition(|t| is_internal(&t.name));
        let topics = Topics {
            store,
            config,
            dynamic: RwLock::new(dynamic),
            effective: RwLock::new(Arc::new(effective)),
            topics: RwLock::new(internal.into_iter().map(|t| (t.name.clone(), t)).collect()),
            write_lock: std::sync::Mutex::new(()),
            legacy: std::sync::Mutex::new(Some(Legacy {
                topics: legacy_topics,
                dynamic: legacy_dynamic,
            })),
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
                let legacy = self
                    .legacy
                    .lock()
                    .unwrap()
                    .as_ref()
                    .is_some_and(|l| l.topics.iter().any(|t| t.name == id.topic));
                if !known && !legacy && !is_internal(&id.topic) && id.topic != LEGACY_GROUPS_LOG_TOPIC {
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

    /// The single node's topics and dynamic configs from before it was a cluster of one,
    /// until the controller holds them.
    pub fn legacy(&self) -> Legacy {
        self.legacy.lock().unwrap().clone().unwrap_or_default()
    }

    /// Once the controller holds them: the topics file keeps only the internal topics, and
    /// the dynamic configs file goes. Blocking.
    pub fn forget_legacy(&self) -> std::io::Result<()> {
        let _w = self.write_lock.lock().unwrap();
        *self.legacy.lock().unwrap() = None;
        self.persist()?;
        remove_durably(
            self.store.storage().as_ref(),
            self.store.dir(),
            BROKER_CONFIGS_FILE,
        )
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
            if !placed && !is_internal(&id.topic) && id.topic != LEGACY_GROUPS_LOG_TOPIC {
                crate::warn!("removing {id}: no topic places it here (a deletion a crash interrupted)");
                if let Err(e) = self.store.delete_log(&id) {
                    crate::warn!("removing {id}: {e}");
                }
            }
        }
    }
}
