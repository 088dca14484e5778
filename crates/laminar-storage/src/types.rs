//! Each kind of position gets its own type, so a file position can never be passed where a
//! Kafka offset is expected, and an exclusive end is never confused with a record's offset.

use std::fmt;

/// The offset of one record in a partition (Kafka's offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Offset(pub i64);

/// A byte position inside one segment's data file. Not an offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FilePos(pub u64);

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for FilePos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@{}", self.0)
    }
}

/// The point up to which a log is known to be on disk: every record below `next_offset` has
/// been fsynced. `segment_base` and `position` say where that point is in the files, so
/// recovery can start scanning there instead of at the start of the segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecoveryPoint {
    /// Exclusive: the offset of the first record that may not be durable.
    pub next_offset: Offset,
    /// The base offset of the segment that holds `next_offset`.
    pub segment_base: Offset,
    /// Where `next_offset` starts (or will start) in that segment's data file.
    pub position: FilePos,
}

/// Milliseconds since the Unix epoch, as Kafka timestamps are.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
