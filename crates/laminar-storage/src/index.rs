//! Sparse indexes, held in memory and persisted as append-only files.
//!
//! Lookups never touch a file: there are no mmap page faults on the read path. Each entry in
//! a file carries its own CRC-32C, so a garbled or torn index file is detected entry by entry
//! and only its valid prefix is kept; the rest is rebuilt by scanning the segment.

use std::sync::Arc;

use crate::backend::{read_exact_at, StorageFile};

pub trait IndexEntry: Copy + std::fmt::Debug {
    /// Bytes of one entry on disk, including its CRC.
    const BYTES: usize;
    fn encode(&self, out: &mut Vec<u8>);
    fn decode(bytes: &[u8]) -> Self;
    /// Is `self` a valid successor of `prev`? Entries must strictly advance.
    fn follows(&self, prev: &Self) -> bool;
}

/// `relative_offset` → `position`: the batch whose base offset is `segment_base +
/// relative_offset` starts at byte `position` of the data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetEntry {
    pub relative_offset: u32,
    pub position: u32,
}

/// `timestamp` → `relative_offset`, as in Kafka: `timestamp_ms` is the largest timestamp in
/// the segment up to the point the entry was added, first reached in the batch that starts at
/// `relative_offset`. So no batch before that one holds a timestamp above `timestamp_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeEntry {
    pub timestamp_ms: i64,
    pub relative_offset: u32,
}

impl IndexEntry for OffsetEntry {
    const BYTES: usize = 12;
    fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&self.relative_offset.to_be_bytes());
        out.extend_from_slice(&self.position.to_be_bytes());
        let crc = crc32c::crc32c(&out[start..]);
        out.extend_from_slice(&crc.to_be_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        OffsetEntry {
            relative_offset: u32::from_be_bytes(b[0..4].try_into().unwrap()),
            position: u32::from_be_bytes(b[4..8].try_into().unwrap()),
        }
    }
    fn follows(&self, prev: &Self) -> bool {
        self.relative_offset > prev.relative_offset && self.position > prev.position
    }
}

impl IndexEntry for TimeEntry {
    const BYTES: usize = 16;
    fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&self.timestamp_ms.to_be_bytes());
        out.extend_from_slice(&self.relative_offset.to_be_bytes());
        let crc = crc32c::crc32c(&out[start..]);
        out.extend_from_slice(&crc.to_be_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        TimeEntry {
            timestamp_ms: i64::from_be_bytes(b[0..8].try_into().unwrap()),
            relative_offset: u32::from_be_bytes(b[8..12].try_into().unwrap()),
        }
    }
    fn follows(&self, prev: &Self) -> bool {
        self.timestamp_ms > prev.timestamp_ms && self.relative_offset > prev.relative_offset
    }
}

/// Decodes the longest valid prefix of an index file's bytes. Entries after the first with a
/// bad CRC, or that do not advance, are dropped; so is a partial entry at the end.
pub fn decode_valid_prefix<E: IndexEntry>(bytes: &[u8]) -> Vec<E> {
    let mut out: Vec<E> = Vec::with_capacity(bytes.len() / E::BYTES);
    for chunk in bytes.chunks_exact(E::BYTES) {
        let body = &chunk[..E::BYTES - 4];
        let stored = u32::from_be_bytes(chunk[E::BYTES - 4..].try_into().unwrap());
        if crc32c::crc32c(body) != stored {
            break;
        }
        let entry = E::decode(body);
        if let Some(prev) = out.last() {
            if !entry.follows(prev) {
                break;
            }
        }
        out.push(entry);
    }
    out
}

/// One in-memory index and how much of it has reached its file.
#[derive(Debug)]
pub struct Index<E: IndexEntry> {
    pub entries: Vec<E>,
    /// Entries `[0, persisted)` are in the file, in order.
    pub persisted: usize,
}

impl<E: IndexEntry> Default for Index<E> {
    fn default() -> Self {
        Index {
            entries: Vec::new(),
            persisted: 0,
        }
    }
}

impl<E: IndexEntry> Index<E> {
    /// Loads the valid prefix of an index file.
    pub fn load(file: &Arc<dyn StorageFile>) -> std::io::Result<Index<E>> {
        let len = file.len()? as usize;
        let mut bytes = vec![0u8; len - len % E::BYTES];
        read_exact_at(file.as_ref(), &mut bytes, 0)?;
        let entries = decode_valid_prefix::<E>(&bytes);
        let persisted = entries.len();
        Ok(Index { entries, persisted })
    }

    /// Adds an entry if it advances past the last one (a recovery walk revisits entries
    /// that were loaded from the file; those are skipped).
    pub fn push(&mut self, entry: E) -> bool {
        if let Some(prev) = self.entries.last() {
            if !entry.follows(prev) {
                return false;
            }
        }
        self.entries.push(entry);
        true
    }

    pub fn last(&self) -> Option<E> {
        self.entries.last().copied()
    }

    /// Keeps only the entries for which `keep` holds, from the start; the file is rewritten
    /// from scratch at the next persist.
    pub fn truncate_while(&mut self, keep: impl Fn(&E) -> bool) {
        let n = self.entries.iter().take_while(|e| keep(e)).count();
        self.entries.truncate(n);
        self.persisted = self.persisted.min(n);
    }

    /// The entries not yet in the file, and the file position they go to. Copying them is
    /// all that happens under the segment's index lock; encoding happens outside it, so an
    /// append never waits for a flush to checksum thousands of entries.
    pub fn unpersisted(&self) -> (u64, Vec<E>) {
        (
            (self.persisted * E::BYTES) as u64,
            self.entries[self.persisted..].to_vec(),
        )
    }
}

/// Encodes entries, each with its CRC, for an index file.
pub fn encode_entries<E: IndexEntry>(entries: &[E]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * E::BYTES);
    for e in entries {
        e.encode(&mut out);
    }
    out
}

impl Index<OffsetEntry> {
    /// The last entry whose position is at or before `position`.
    pub fn floor_by_position(&self, position: u32) -> Option<OffsetEntry> {
        let i = self.entries.partition_point(|e| e.position <= position);
        i.checked_sub(1).map(|i| self.entries[i])
    }

    /// The last entry at or before `relative_offset`.
    pub fn floor(&self, relative_offset: u32) -> Option<OffsetEntry> {
        let i = self
            .entries
            .partition_point(|e| e.relative_offset <= relative_offset);
        i.checked_sub(1).map(|i| self.entries[i])
    }
}

impl Index<TimeEntry> {
    /// The last entry whose timestamp is below `timestamp_ms`: no batch before its offset
    /// reaches the target, so a search may start there.
    pub fn last_below(&self, timestamp_ms: i64) -> Option<TimeEntry> {
        let i = self.entries.partition_point(|e| e.timestamp_ms < timestamp_ms);
        i.checked_sub(1).map(|i| self.entries[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbled_entries_are_dropped() {
        let mut bytes = Vec::new();
        for i in 1..=10u32 {
            OffsetEntry {
                relative_offset: i * 10,
                position: i * 4096,
            }
            .encode(&mut bytes);
        }
        assert_eq!(decode_valid_prefix::<OffsetEntry>(&bytes).len(), 10);
        bytes[5 * 12 + 3] ^= 0x40;
        assert_eq!(decode_valid_prefix::<OffsetEntry>(&bytes).len(), 5);
        assert_eq!(decode_valid_prefix::<OffsetEntry>(&bytes[..3 * 12 + 7]).len(), 3);
    }

    #[test]
    fn floor_lookup() {
        let mut idx = Index::<OffsetEntry>::default();
        for i in 1..=5u32 {
            idx.push(OffsetEntry {
                relative_offset: i * 10,
                position: i * 100,
            });
        }
        assert_eq!(idx.floor(5), None);
        assert_eq!(idx.floor(10).unwrap().position, 100);
        assert_eq!(idx.floor(29).unwrap().position, 200);
        assert_eq!(idx.floor(1000).unwrap().position, 500);
    }
}
