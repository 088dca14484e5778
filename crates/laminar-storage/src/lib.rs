//! Laminar's storage engine.
//!
//! A [`Store`] holds one [`Log`] per partition. A log is a list of segments, each a data
//! file of Kafka record batches (exactly as produced, with only the base offset and leader
//! epoch rewritten) plus a sparse offset index and a time index held in memory.
//!
//! Threads: appends run on the caller's thread, which must be a storage thread, never a
//! socket thread. Reads that may touch disk likewise. Flushes run on the store's flusher
//! threads, and the next segment of each log is made ready (created and allocated) by its
//! preparer threads, so that no append creates or allocates a file. Every file access goes
//! through [`backend::Storage`].

pub mod backend;
pub mod checkpoint;
pub mod cleaner;
pub mod config;
pub mod epochs;
pub mod error;
pub mod flusher;
pub mod index;
pub mod log;
pub mod log_start;
mod log_threads;
pub mod metrics;
pub mod prepare;
pub mod residency;
pub mod segment;
pub mod store;
pub mod txn;
pub mod types;
mod wait;

pub use config::LogConfig;
pub use error::{Result, StorageError};
pub use log::{AppendInfo, AppendMode, FileRange, Flushed, Log, LogRead, RecoveryReport};
pub use metrics::{LatencyHistogram, StorageMetrics};
pub use store::{LogId, Store, StoreConfig};
pub use types::{now_ms, FilePos, Offset, RecoveryPoint};
pub use wait::FlushWait;
