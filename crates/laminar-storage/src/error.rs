use std::path::{Path, PathBuf};

use laminar_records::RecordsError;

use crate::types::Offset;

/// The storage layer's one error type. It is `Clone` because one fsync failure is reported
/// to every durability waiter of that flush.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StorageError {
    #[error("{op} {path}: {message}")]
    Io {
        op: &'static str,
        path: PathBuf,
        kind: std::io::ErrorKind,
        message: String,
    },
    #[error("invalid record batch: {0}")]
    InvalidBatch(#[from] RecordsError),
    #[error("append of {bytes} bytes is empty or exceeds segment_bytes {segment_bytes}")]
    AppendSize { bytes: usize, segment_bytes: u64 },
    #[error("offset {requested} is out of range: the log holds [{log_start}, {log_end})")]
    OffsetOutOfRange {
        requested: Offset,
        log_start: Offset,
        log_end: Offset,
    },
    #[error("log {log} is offline: {reason}")]
    Offline { log: String, reason: String },
    #[error("log {0} already exists")]
    LogExists(String),
    #[error(
        "log {log}: a replica's batch at offset {base_offset} is below {expected}, where the log continues"
    )]
    ReplicaOffsets {
        log: String,
        base_offset: i64,
        expected: i64,
    },
    #[error("log {log}: an append as leader at epoch {epoch}, older than the log's latest epoch {latest}")]
    StaleEpoch { log: String, epoch: i32, latest: i32 },
    #[error("log {0} does not exist")]
    UnknownLog(String),
    #[error("corrupt {what} in {path}: {reason}")]
    Corrupt {
        what: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("the store is shutting down")]
    ShuttingDown,
}

pub type Result<T, E = StorageError> = std::result::Result<T, E>;

impl StorageError {
    pub fn io(op: &'static str, path: &Path, e: std::io::Error) -> StorageError {
        StorageError::Io {
            op,
            path: path.to_path_buf(),
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}

/// Adds the operation and path to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn ctx(self, op: &'static str, path: &Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, op: &'static str, path: &Path) -> Result<T> {
        self.map_err(|e| StorageError::io(op, path, e))
    }
}
