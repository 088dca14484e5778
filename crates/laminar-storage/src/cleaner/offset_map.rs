//! The newest offset of each key over a stretch of a log, in bounded memory, as Kafka's
//! `SkimpyOffsetMap` (sized by `log.cleaner.dedupe.buffer.size`): keys are held as 128-bit
//! hashes (xxh3), so a key of any length costs the same, and two keys sharing a hash (about
//! 2^-64 for a billion keys) would make the older one's records look superseded.
//!
//! A cleaning pass puts records in offset order until the map is full; it then cleans only
//! up to the first offset it could not put, and the next pass starts there.

use std::collections::HashMap;

use twox_hash::XxHash3_128;

/// What one entry costs, hash table overhead included (16-byte hash, 8-byte offset, and the
/// table's spare capacity at its load factor), for sizing the map from a memory budget.
pub const ENTRY_BYTES: usize = 48;

pub struct OffsetMap {
    offsets: HashMap<u128, i64>,
    capacity: usize,
    /// The highest offset put so far.
    latest: Option<i64>,
}

impl OffsetMap {
    /// A map that holds at most `memory_bytes / ENTRY_BYTES` keys (at least one).
    pub fn with_memory(memory_bytes: usize) -> OffsetMap {
        let capacity = (memory_bytes / ENTRY_BYTES).max(1);
        OffsetMap {
            offsets: HashMap::with_capacity(capacity.min(1 << 20)),
            capacity,
            latest: None,
        }
    }

    fn hash(key: &[u8]) -> u128 {
        XxHash3_128::oneshot(key)
    }

    /// Records `offset` as the newest of `key`. Offsets must be put in increasing order.
    /// Returns false, and records nothing, when `key` is new and the map is full: the pass
    /// then stops at this offset.
    pub fn put(&mut self, key: &[u8], offset: i64) -> bool {
        assert!(
            self.latest.is_none_or(|l| offset > l),
            "offsets are put in order: {offset} after {:?}",
            self.latest
        );
        let h = Self::hash(key);
        if self.offsets.len() >= self.capacity && !self.offsets.contains_key(&h) {
            return false;
        }
        self.offsets.insert(h, offset);
        self.latest = Some(offset);
        true
    }

    /// The newest offset put for `key`.
    pub fn get(&self, key: &[u8]) -> Option<i64> {
        self.offsets.get(&Self::hash(key)).copied()
    }

    /// The highest offset put: records after it are not covered by this map.
    pub fn latest_offset(&self) -> Option<i64> {
        self.latest
    }

    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_offset_of_each_key_wins() {
        let mut m = OffsetMap::with_memory(1 << 20);
        assert!(m.put(b"a", 0));
        assert!(m.put(b"b", 1));
        assert!(m.put(b"a", 2));
        assert_eq!(m.get(b"a"), Some(2));
        assert_eq!(m.get(b"b"), Some(1));
        assert_eq!(m.get(b"c"), None);
        assert_eq!(m.latest_offset(), Some(2));
        assert_eq!(m.len(), 2);
        // A long key costs one entry like any other.
        assert!(m.put(&vec![7u8; 1 << 16], 3));
        assert_eq!(m.get(&vec![7u8; 1 << 16]), Some(3));
    }

    #[test]
    fn a_full_map_takes_known_keys_and_refuses_new_ones() {
        let mut m = OffsetMap::with_memory(3 * ENTRY_BYTES);
        assert_eq!(m.capacity(), 3);
        for (i, k) in [b"a", b"b", b"c"].iter().enumerate() {
            assert!(m.put(*k, i as i64));
        }
        assert!(!m.put(b"d", 3), "a fourth key does not fit");
        assert_eq!(m.latest_offset(), Some(2), "the refused offset is not covered");
        assert!(m.put(b"a", 3), "a known key still moves on");
        assert_eq!(m.get(b"a"), Some(3));
    }

    #[test]
    #[should_panic(expected = "in order")]
    fn offsets_must_increase() {
        let mut m = OffsetMap::with_memory(1 << 10);
        m.put(b"a", 5);
        m.put(b"b", 5);
    }
}
