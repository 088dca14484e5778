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
        if self.flush_messages == Some(0) || self.flush_interval_ms == Some(0) {
            return Err("flush_messages and flush_interval_ms must be positive when set".into());
        }
        Ok(())
    }
}
