//! The store: every partition's log under one data directory, the flusher threads, and
//! the clean-shutdown marker.
//!
//! Layout: `DATA_DIR/<topic>-<partition>/` per log, and `DATA_DIR/.laminar-clean-shutdown`
//! while the store is closed cleanly. The marker is removed (durably) before any log can
//! be written, so a crash after startup is always detected.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use crate::backend::Storage;
use crate::cleaner::{Cleaner, CleanerConfig};
use crate::config::LogConfig;
use crate::error::{IoContext, Result, StorageError};
use crate::flusher::Flusher;
use crate::log::Log;
use crate::metrics::StorageMetrics;
use crate::prepare::Preparer;
use crate::types::Offset;

pub const CLEAN_SHUTDOWN_FILE: &str = ".laminar-clean-shutdown";

#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Threads that fsync logs in the background.
    pub flush_threads: usize,
    /// Threads that make each log's next segment file ahead of its roll.
    pub prepare_threads: usize,
    /// The config of logs found at startup, until their owner sets their own.
    pub default_log: LogConfig,
    pub cleaner: CleanerConfig,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            flush_threads: 2,
            prepare_threads: 2,
            default_log: LogConfig::default(),
            cleaner: CleanerConfig::default(),
        }
    }
}

/// Identifies one log: a topic's partition.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LogId {
    pub topic: String,
    pub partition: u32,
}

impl LogId {
    pub fn new(topic: &str, partition: u32) -> LogId {
        LogId {
            topic: topic.to_string(),
            partition,
        }
    }

    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }

    pub fn parse_dir_name(name: &str) -> Option<LogId> {
        let (topic, partition) = name.rsplit_once('-')?;
        if topic.is_empty()
            || topic.starts_with('.')
            || partition.is_empty()
            || !partition.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        Some(LogId {
            topic: topic.to_string(),
            partition: partition.parse().ok()?,
        })
    }
}

impl std::fmt::Display for LogId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

pub struct Store {
    dir: PathBuf,
    storage: Arc<dyn Storage>,
    metrics: Arc<StorageMetrics>,
    config: StoreConfig,
    flusher: std::sync::Mutex<Flusher>,
    preparer: std::sync::Mutex<Preparer>,
    cleaner: std::sync::Mutex<Cleaner>,
    /// Socket threads read this on every produce and fetch, so it is never held across a
    /// disk call: a log being created is reserved in `creating` instead.
    logs: RwLock<BTreeMap<LogId, Arc<Log>>>,
    creating: std::sync::Mutex<std::collections::BTreeSet<LogId>>,
    opened_clean: bool,
}

impl Store {
    /// Opens every log under `dir`, recovering each from its checkpoint unless the last
    /// shutdown was clean.
    pub fn open(dir: &Path, storage: Arc<dyn Storage>, config: StoreConfig) -> Result<Store> {
        crate::backend::create_dir_all_durably(storage.as_ref(), dir).ctx("create directory", dir)?;
        let marker = dir.join(CLEAN_SHUTDOWN_FILE);
        let clean = storage.exists(&marker);
        let metrics = Arc::new(StorageMetrics::default());
        let flusher = Flusher::start(config.flush_threads);
        let preparer = Preparer::start(config.prepare_threads);
        let cleaner = Cleaner::start(config.cleaner.clone());
        let mut logs = BTreeMap::new();
        for name in storage.list_dir(dir).ctx("list", dir)? {
            let Some(id) = LogId::parse_dir_name(&name) else {
                continue;
            };
            let log = Log::open(
                &id.to_string(),
                &dir.join(&name),
                storage.clone(),
                config.default_log.clone(),
                metrics.clone(),
                clean,
            )?;
            flusher.register(&log);
            preparer.register(&log);
            cleaner.register(&log);
            logs.insert(id, log);
        }
        if clean {
            storage.remove_file(&marker).ctx("remove", &marker)?;
            storage.sync_dir(dir).ctx("fsync directory", dir)?;
        }
        Ok(Store {
            dir: dir.to_path_buf(),
            storage,
            metrics,
            config,
            flusher: std::sync::Mutex::new(flusher),
            preparer: std::sync::Mutex::new(preparer),
            cleaner: std::sync::Mutex::new(cleaner),
            logs: RwLock::new(logs),
            creating: std::sync::Mutex::new(Default::default()),
            opened_clean: clean,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn opened_clean(&self) -> bool {
        self.opened_clean
    }

    /// The logs that went offline since the last call (a failed fsync): their replicas here
    /// should lead and count in no ISR any more.
    pub fn take_offline(&self) -> Vec<LogId> {
        std::mem::take(&mut *self.metrics.went_offline.lock().unwrap())
            .iter()
            .filter_map(|name| LogId::parse_dir_name(name))
            .collect()
    }

    pub fn metrics(&self) -> &Arc<StorageMetrics> {
        &self.metrics
    }

    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    pub fn log(&self, id: &LogId) -> Option<Arc<Log>> {
        self.logs.read().unwrap().get(id).cloned()
    }

    pub fn logs(&self) -> Vec<(LogId, Arc<Log>)> {
        self.logs
            .read()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Creates a new, empty log. Fails if it exists, or is being created.
    ///
    /// The directory, files and fsyncs happen with the id reserved in `creating`, not under
    /// the `logs` lock: on a slow disk they take as long as the disk likes, and every
    /// produce and fetch reads `logs`.
    pub fn create_log(&self, id: &LogId, config: LogConfig) -> Result<Arc<Log>> {
        {
            let mut creating = self.creating.lock().unwrap();
            if self.logs.read().unwrap().contains_key(id) || !creating.insert(id.clone()) {
                return Err(StorageError::LogExists(id.to_string()));
            }
        }
        let created = self.create_reserved(id, config);
        let removed = self.creating.lock().unwrap().remove(id);
        debug_assert!(removed);
        let log = created?;
        let previous = self.logs.write().unwrap().insert(id.clone(), log.clone());
        assert!(previous.is_none(), "{id} was created twice");
        Ok(log)
    }

    fn create_reserved(&self, id: &LogId, config: LogConfig) -> Result<Arc<Log>> {
        let dir = self.dir.join(id.dir_name());
        if self.storage.exists(&dir) {
            return Err(StorageError::LogExists(id.to_string()));
        }
        let log = Log::open(
            &id.to_string(),
            &dir,
            self.storage.clone(),
            config,
            self.metrics.clone(),
            false,
        )?;
        self.storage
            .sync_dir(&self.dir)
            .ctx("fsync directory", &self.dir)?;
        self.flusher.lock().unwrap().register(&log);
        self.preparer.lock().unwrap().register(&log);
        self.cleaner.lock().unwrap().register(&log);
        Ok(log)
    }

    pub fn delete_log(&self, id: &LogId) -> Result<()> {
        let log = self
            .logs
            .write()
            .unwrap()
            .remove(id)
            .ok_or_else(|| StorageError::UnknownLog(id.to_string()))?;
        log.delete()?;
        self.storage.sync_dir(&self.dir).ctx("fsync directory", &self.dir)
    }

    /// Cuts a log back to `to` (see `Log::cut_closed`): a follower whose log diverged from
    /// its leader's. The log is closed, cut, and opened again, recovering what remains; the
    /// new log replaces it here. Appends to the old one fail from the close on.
    pub fn truncate_log(&self, id: &LogId, to: Offset) -> Result<Arc<Log>> {
        let log = self
            .log(id)
            .ok_or_else(|| StorageError::UnknownLog(id.to_string()))?;
        if to >= log.log_end() {
            return Ok(log);
        }
        log.close()?;
        let end = log.cut_closed(to)?;
        let reopened = self.reopen(id, &log)?;
        assert_eq!(
            reopened.log_end(),
            end,
            "{id}: the reopened log ends where it was cut"
        );
        Ok(reopened)
    }

    /// Empties a log and starts it again at `start` (see `Log::empty_closed`): a follower
    /// whose fetch offset is below its leader's log start.
    pub fn reset_log(&self, id: &LogId, start: Offset) -> Result<Arc<Log>> {
        let log = self
            .log(id)
            .ok_or_else(|| StorageError::UnknownLog(id.to_string()))?;
        log.close()?;
        log.empty_closed(start)?;
        let reopened = self.reopen(id, &log)?;
        assert!(
            reopened.log_start() == start && reopened.log_end() == start,
            "{id}: the emptied log starts and ends at {start:?}"
        );
        Ok(reopened)
    }

    /// Opens a closed log's directory again, in its place here.
    fn reopen(&self, id: &LogId, log: &Log) -> Result<Arc<Log>> {
        let reopened = Log::open(
            &id.to_string(),
            log.dir(),
            self.storage.clone(),
            log.open_config(),
            self.metrics.clone(),
            false,
        )?;
        self.flusher.lock().unwrap().register(&reopened);
        self.preparer.lock().unwrap().register(&reopened);
        self.cleaner.lock().unwrap().register(&reopened);
        self.logs.write().unwrap().insert(id.clone(), reopened.clone());
        Ok(reopened)
    }

    /// Applies retention to every log; returns the number of segments deleted.
    pub fn apply_retention(&self, now_ms: i64) -> usize {
        self.logs()
            .iter()
            .map(|(_, log)| log.apply_retention(now_ms).unwrap_or(0))
            .sum()
    }

    /// Flushes and closes every log, then writes the clean-shutdown marker. If any log
    /// failed to close cleanly the marker is not written, so the next start recovers.
    pub fn close(&self) -> Result<()> {
        self.cleaner.lock().unwrap().stop();
        self.preparer.lock().unwrap().stop();
        self.flusher.lock().unwrap().stop();
        let mut first_error = None;
        for (_, log) in self.logs() {
            if let Err(e) = log.close() {
                first_error.get_or_insert(e);
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        let marker = self.dir.join(CLEAN_SHUTDOWN_FILE);
        let f = self.storage.open(&marker, true).ctx("create", &marker)?;
        f.sync_data().ctx("fdatasync", &marker)?;
        self.storage.sync_dir(&self.dir).ctx("fsync directory", &self.dir)
    }

    /// Where the cleaner reports its passes and failures.
    pub fn set_cleaner_events(&self, sink: crate::cleaner::EventSink) {
        self.cleaner.lock().unwrap().set_event_sink(sink);
    }

    /// Has the cleaner look at every log now (a log's config changed).
    pub fn wake_cleaner(&self) {
        self.cleaner.lock().unwrap().wake();
    }

    pub fn config(&self) -> &StoreConfig {
        &self.config
    }
}
