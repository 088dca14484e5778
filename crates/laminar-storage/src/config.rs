//! Per-log settings. Names follow Kafka's topic configs, with units last.

/// Kafka's `segment.bytes` is an int; index positions are u32. Either way, 2 GiB - 1.
pub const SEGMENT_BYTES_MAX: u64 = i32::MAX as u64;
pub const SEGMENT_BYTES_MIN: u64 = 1024;
pub const PAGE_BYTES: u64 = 4096;
const _: () = assert!(SEGMENT_BYTES_MAX <= u32::MAX as u64);

#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would exceed this.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the active segment is older than this.
    pub segment_ms: Option<u64>,
    /// Grow data files in steps of this size with `fallocate`, so most appends do not
    /// change the file size. 0 disables it.
    pub preallocate_bytes: u64,
    /// `index.interval.bytes`: one offset-index entry per this many bytes of batches.
    pub index_interval_bytes: u64,
    /// `retention.ms`: delete segments whose newest record is older. `None` keeps forever.
    pub retention_ms: Option<i64>,
    /// `retention.bytes`: delete the oldest segments while the log is larger.
    pub retention_bytes: Option<u64>,
    /// `flush.ms`: fsync at least this often when there is unflushed data. `None`: only when
    /// a durability waiter or `flush_messages` asks.
    pub flush_interval_ms: Option<u64>,
    /// `flush.messages`: fsync once this many records are unflushed.
    pub flush_messages: Option<u64>,
    /// `log.flush.offset.checkpoint.interval.ms`: write the recovery-point checkpoint (and
    /// the active segment's new index entries) at most this often. Every fsync advances the
    /// recovery point in memory, but writing it costs two more fsyncs and a rename, which a
    /// durability waiter must not wait behind; recovery after a crash validates what was
    /// appended since the last checkpoint, at most this long's worth of appends.
    pub checkpoint_interval_ms: u64,
    /// `cleanup.policy` holds `delete`: retention removes old segments.
    pub cleanup_delete: bool,
    /// `cleanup.policy` holds `compact`: the cleaner keeps the newest record of each key.
    pub cleanup_compact: bool,
    /// `min.cleanable.dirty.ratio`: clean once this share of the cleanable bytes is dirty
    /// (written since the last pass).
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: a segment whose newest record is younger is not cleaned.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: clean a log whose oldest dirty segment is older than this,
    /// whatever its dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`: how long a tombstone outlives the pass that first cleaned it.
    pub delete_retention_ms: i64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: Some(7 * 24 * 3600 * 1000),
            preallocate_bytes: 32 << 20,
            index_interval_bytes: 4096,
            retention_ms: Some(7 * 24 * 3600 * 1000),
            retention_bytes: None,
            flush_interval_ms: None,
            flush_messages: None,
            checkpoint_interval_ms: 1000,
            cleanup_delete: true,
            cleanup_compact: false,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 24 * 3600 * 1000,
        }
    }
}

impl LogConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(SEGMENT_BYTES_MIN..=SEGMENT_BYTES_MAX).contains(&self.segment_bytes) {
            return Err(format!(
                "segment_bytes {} is outside [{SEGMENT_BYTES_MIN}, {SEGMENT_BYTES_MAX}]",
                self.segment_bytes
            ));
        }
        if self.index_interval_bytes == 0 {
            return Err("index_interval_bytes must be positive".into());
        }
        if self.preallocate_bytes > SEGMENT_BYTES_MAX {
            return Err(format!(
                "preallocate_bytes {} exceeds {SEGMENT_BYTES_MAX}",
                self.preallocate_bytes
            ));
        }
        if !(0.0..=1.0).contains(&self.min_cleanable_dirty_ratio) {
            return Err(format!(
                "min_cleanable_dirty_ratio {} is outside [0, 1]",
                self.min_cleanable_dirty_ratio
            ));
        }
        if self.min_compaction_lag_ms < 0 || self.max_compaction_lag_ms < 1 || self.delete_retention_ms < 0 {
            return Err("compaction lags and delete retention must not be negative".into());
        }
        if self.flush_messages == Some(0) || self.flush_interval_ms == Some(0) {
            return Err("flush_messages and flush_interval_ms must be positive when set".into());
        }
        Ok(())
    }
}
