//! Histograms of every disk call the storage engine makes, so that a stall is visible
//! without kprobes. The broker exports them; `perf log` prints them.

pub use laminar_metrics::LatencyHistogram;

#[derive(Default)]
pub struct StorageMetrics {
    /// `pwrite` of appended batches into a segment's data file.
    pub segment_write_us: LatencyHistogram,
    /// `fdatasync` of a segment's data file.
    pub segment_fsync_us: LatencyHistogram,
    /// Reads of batch headers and data through the storage interface.
    pub segment_read_us: LatencyHistogram,
    /// One whole flush of one log: its data syncs, index writes and checkpoint.
    pub log_flush_us: LatencyHistogram,
    /// `fallocate` of a prepared segment's file (on a preparer thread, never an append's).
    pub segment_allocate_us: LatencyHistogram,
    /// Creation of a prepared segment's file.
    pub segment_create_us: LatencyHistogram,
    /// The flusher's rename of a rolled segment's file to its base offset's name.
    pub segment_rename_us: LatencyHistogram,
    /// The flusher's trim of a sealed segment's preallocated tail.
    pub segment_trim_us: LatencyHistogram,
    /// Appends that wrote past their segment's allocation (the file grew with the write).
    pub appends_past_allocation: std::sync::atomic::AtomicU64,
    /// Appends whose due roll waited because the preparer had no file ready (the segment
    /// grew past `segment.bytes` or `segment.ms`).
    pub rolls_deferred: std::sync::atomic::AtomicU64,
    /// Rolls that had to create their file on the append path (a segment at its 2 GiB limit
    /// with no file ready).
    pub rolls_inline: std::sync::atomic::AtomicU64,
    /// Preparations of a next segment's file that failed (its log asks again later).
    pub prepare_failures: std::sync::atomic::AtomicU64,
    /// Preparations whose `fallocate` failed (the file was used unallocated).
    pub allocate_failures: std::sync::atomic::AtomicU64,
    /// Checkpoint, index and directory syncs.
    pub metadata_fsync_us: LatencyHistogram,
    /// Checkpoint (or active index) writes that failed after a successful data fsync; the
    /// log stayed online and kept its previous checkpoint.
    pub checkpoint_failures: std::sync::atomic::AtomicU64,
    /// Cleaning passes finished, and what they read, wrote and removed.
    pub cleaner_passes: std::sync::atomic::AtomicU64,
    pub cleaner_bytes_read: std::sync::atomic::AtomicU64,
    pub cleaner_bytes_written: std::sync::atomic::AtomicU64,
    pub cleaner_records_removed: std::sync::atomic::AtomicU64,
    /// Passes (or examinations) that failed; the log waits a backoff before the next.
    pub cleaner_failures: std::sync::atomic::AtomicU64,
    /// The time of one whole pass.
    pub cleaner_pass_us: LatencyHistogram,
    /// The names of logs gone offline that the broker has not taken yet
    /// (`Store::take_offline`).
    pub went_offline: std::sync::Mutex<Vec<String>>,
    /// Called on the flusher thread, with the log's name (`topic-partition`), after a flush
    /// made more of that log durable: the broker wakes the fetches that wait on it for
    /// records to become visible (consumers read only what is on the disk). It must not
    /// block.
    pub flush_listener: std::sync::OnceLock<FlushListener>,
}

/// What [`StorageMetrics::flush_listener`] holds: called with a log's name.
pub type FlushListener = Box<dyn Fn(&str) + Send + Sync>;

/// Batches found damaged on disk (a CRC, length or offsets that do not fit) by reads that
/// check before they send, and by recovery; none of them was served
/// (`laminar_damaged_batches_found_total`).
pub static DAMAGED_BATCHES_FOUND: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
