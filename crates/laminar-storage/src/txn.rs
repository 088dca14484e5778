//! Transactions in one log: which producers have a transaction open here (the first offset of
//! each bounds the last stable offset, LSO), and the aborted-transaction index of each segment
//! that `read_committed` consumers need to drop aborted records.
//!
//! A transactional data batch opens its producer's transaction at its base offset, unless
//! one is open already. A control batch (a commit or abort marker the coordinator writes)
//! closes it; an abort adds an entry to the index of the segment that holds the marker, as
//! Kafka's `.txnindex` does. What is open at the recovery point is kept in the checkpoint,
//! and recovery rebuilds the rest from the batches it validates.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use laminar_records::{BatchHeader, ControlType};

use crate::backend::{read_exact_at, Storage, StorageFile};
use crate::error::{IoContext, Result};
use crate::types::Offset;

pub const TXN_INDEX_SUFFIX: &str = ".txnindex";
/// A cleaning pass's merged index, renamed over the segment's when its swap completes.
pub const TXN_INDEX_CLEANED_SUFFIX: &str = ".txnindex.cleaned";
/// One entry, in Kafka's layout: version i16 (0), producer id i64, first offset i64, last
/// offset i64 (the marker's), last stable offset i64 (after the marker), big-endian.
pub const ABORTED_TXN_BYTES: usize = 34;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: Offset,
    /// The offset of the abort marker.
    pub last_offset: Offset,
    pub last_stable_offset: Offset,
}

impl AbortedTxn {
    pub fn encode(&self) -> [u8; ABORTED_TXN_BYTES] {
        let mut out = [0u8; ABORTED_TXN_BYTES];
        out[0..2].copy_from_slice(&0i16.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.0.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.0.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.0.to_be_bytes());
        out
    }

    /// `None` for an entry that cannot be one this log wrote (a torn or zeroed tail).
    pub fn decode(b: &[u8]) -> Option<AbortedTxn> {
        let at = |i: usize| i64::from_be_bytes(b[i..i + 8].try_into().unwrap());
        // Zeros are what a torn append leaves, not an entry.
        if b.len() < ABORTED_TXN_BYTES
            || i16::from_be_bytes([b[0], b[1]]) != 0
            || b[..ABORTED_TXN_BYTES].iter().all(|&x| x == 0)
        {
            return None;
        }
        let t = AbortedTxn {
            producer_id: at(2),
            first_offset: Offset(at(10)),
            last_offset: Offset(at(18)),
            last_stable_offset: Offset(at(26)),
        };
        (t.producer_id >= 0 && t.first_offset.0 >= 0 && t.first_offset <= t.last_offset).then_some(t)
    }
}

/// The transactions open in a log: producer id to the offset of its first batch here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenTxns {
    by_producer: BTreeMap<i64, Offset>,
    by_first: BTreeSet<(Offset, i64)>,
}

impl OpenTxns {
    pub fn from_entries(entries: impl IntoIterator<Item = (i64, Offset)>) -> OpenTxns {
        let mut open = OpenTxns::default();
        for (pid, first) in entries {
            open.by_producer.insert(pid, first);
            open.by_first.insert((first, pid));
        }
        open
    }

    /// Keeps the transactions whose first offset `keep` accepts (recovery truncated the log
    /// below the others).
    pub fn retain(&mut self, mut keep: impl FnMut(Offset) -> bool) {
        self.by_producer.retain(|_, first| keep(*first));
        self.by_first.retain(|(first, _)| keep(*first));
    }

    pub fn entries(&self) -> impl Iterator<Item = (i64, Offset)> + '_ {
        self.by_producer.iter().map(|(p, o)| (*p, *o))
    }

    pub fn is_empty(&self) -> bool {
        self.by_producer.is_empty()
    }

    pub fn len(&self) -> usize {
        self.by_producer.len()
    }

    /// The first offset of the oldest open transaction: the last stable offset, unless the
    /// log ends below it.
    pub fn first_unstable(&self) -> Option<Offset> {
        self.by_first.first().map(|(o, _)| *o)
    }

    /// The open transaction of `producer_id`, by its first offset.
    pub fn first_offset_of(&self, producer_id: i64) -> Option<Offset> {
        self.by_producer.get(&producer_id).copied()
    }

    /// Accounts for one appended batch (its base offset assigned). `marker` is what a control
    /// batch holds. Returns the entry for the aborted-transaction index if it ends one.
    pub fn on_batch(
        &mut self,
        h: &BatchHeader,
        marker: Option<ControlType>,
        log_end: Offset,
    ) -> Option<AbortedTxn> {
        if !h.is_transactional() || h.producer_id < 0 {
            return None;
        }
        if !h.is_control() {
            // A batch the cleaner emptied (kept as its segment's last) is no producer's: it
            // must not open a transaction when recovery reads the log again.
            if h.records_count == 0 {
                return None;
            }
            if let std::collections::btree_map::Entry::Vacant(v) = self.by_producer.entry(h.producer_id) {
                v.insert(Offset(h.base_offset));
                self.by_first.insert((Offset(h.base_offset), h.producer_id));
            }
            return None;
        }
        // A marker with nothing open here (the transaction wrote no data to this partition,
        // or the marker is written again after a restart) changes nothing.
        let first = self.by_producer.remove(&h.producer_id)?;
        self.by_first.remove(&(first, h.producer_id));
        (marker == Some(ControlType::Abort)).then(|| AbortedTxn {
            producer_id: h.producer_id,
            first_offset: first,
            last_offset: Offset(h.base_offset),
            last_stable_offset: self.first_unstable().unwrap_or(log_end),
        })
    }
}

/// The aborted-transaction index of one segment: its entries, and how many of them are in
/// the file and synced. Entries are in marker order.
#[derive(Debug, Default)]
pub struct TxnIndex {
    pub entries: Vec<AbortedTxn>,
    pub written: usize,
    pub synced: usize,
    file: Option<Arc<dyn StorageFile>>,
    /// Loaded from a file that holds exactly `entries` (nothing torn after them).
    pub exact: bool,
}

impl TxnIndex {
    /// Loads the entries of `path` (none if it is missing), up to the first invalid one.
    pub fn load(storage: &dyn Storage, path: &Path) -> Result<TxnIndex> {
        let Ok(file) = storage.open(path, false) else {
            return Ok(TxnIndex {
                exact: true,
                ..Default::default()
            });
        };
        let len = file.len().ctx("stat", path)? as usize;
        let mut buf = vec![0u8; len - len % ABORTED_TXN_BYTES];
        read_exact_at(file.as_ref(), &mut buf, 0).ctx("read", path)?;
        // Markers are appended in offset order: an entry that goes back is garbage too.
        let mut entries: Vec<AbortedTxn> = Vec::new();
        for e in buf.chunks_exact(ABORTED_TXN_BYTES).map_while(AbortedTxn::decode) {
            if entries.last().is_some_and(|l| l.last_offset >= e.last_offset) {
                break;
            }
            entries.push(e);
        }
        let exact = entries.len() * ABORTED_TXN_BYTES == len;
        Ok(TxnIndex {
            written: entries.len(),
            synced: entries.len(),
            entries,
            file: Some(file),
            exact,
        })
    }

    /// Adds `entries` (in memory: readers see them at once). The append path calls it, so
    /// it does no I/O: the flusher writes and syncs them with [`TxnIndex::persist`] before
    /// the checkpoint passes their markers, and recovery rebuilds any it did not.
    pub fn append(index: &std::sync::Mutex<TxnIndex>, entries: Vec<AbortedTxn>) {
        index.lock().unwrap().entries.extend(entries);
    }

    /// Whether some entries are not yet written and synced.
    pub fn pending(&self) -> bool {
        self.synced < self.entries.len()
    }

    /// Writes and fsyncs the entries of `index` that are not yet in its file at `path`,
    /// creating the file if needed, without holding the lock across the I/O (fetches read
    /// the entries under it). Only the log's flusher calls it for one index at a time.
    /// Returns whether it created the file: the directory then needs a sync.
    pub fn persist(index: &std::sync::Mutex<TxnIndex>, storage: &dyn Storage, path: &Path) -> Result<bool> {
        let (file, at, bytes, count) = {
            let idx = index.lock().unwrap();
            if idx.synced == idx.entries.len() {
                return Ok(false);
            }
            let at = (idx.written * ABORTED_TXN_BYTES) as u64;
            let bytes: Vec<u8> = idx.entries[idx.written..]
                .iter()
                .flat_map(|e| e.encode())
                .collect();
            (idx.file.clone(), at, bytes, idx.entries.len())
        };
        let (file, created) = match file {
            Some(f) => (f, false),
            None => (storage.open(path, true).ctx("open", path)?, true),
        };
        if !bytes.is_empty() {
            file.write_all_at(&bytes, at).ctx("write", path)?;
        }
        {
            let mut idx = index.lock().unwrap();
            idx.file = Some(file.clone());
            idx.written = idx.written.max(count);
        }
        file.sync_data().ctx("fdatasync", path)?;
        let mut idx = index.lock().unwrap();
        idx.synced = idx.synced.max(count);
        Ok(created)
    }

    /// Replaces the file with exactly `entries`, synced (recovery, cleaning).
    pub fn rewrite(storage: &dyn Storage, path: &Path, entries: Vec<AbortedTxn>) -> Result<TxnIndex> {
        if entries.is_empty() {
            match storage.remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(crate::StorageError::io("remove", path, e)),
            }
            return Ok(TxnIndex::default());
        }
        let file = storage.open(path, true).ctx("open", path)?;
        let bytes: Vec<u8> = entries.iter().flat_map(|e| e.encode()).collect();
        file.write_all_at(&bytes, 0).ctx("write", path)?;
        file.set_len(bytes.len() as u64).ctx("truncate", path)?;
        file.sync_data().ctx("fdatasync", path)?;
        Ok(TxnIndex {
            written: entries.len(),
            synced: entries.len(),
            entries,
            file: Some(file),
            exact: true,
        })
    }
}

pub fn txn_index_path(dir: &Path, base: Offset) -> PathBuf {
    dir.join(crate::segment::file_name(base, TXN_INDEX_SUFFIX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use laminar_records::{control_batch, validate_batch, BatchBuilder, Compression, RecordSpec};

    fn data(pid: i64, base: i64, transactional: bool) -> BatchHeader {
        let mut b = BatchBuilder::new(Compression::None, 0).producer(pid, 0, 0);
        if transactional {
            b = b.transactional();
        }
        b.push(RecordSpec::default());
        let mut h = validate_batch(&b.build().unwrap()).unwrap();
        h.base_offset = base;
        h
    }

    fn marker(pid: i64, base: i64, m: ControlType) -> BatchHeader {
        let mut h = validate_batch(&control_batch(m, pid, 0, 0, 0)).unwrap();
        h.base_offset = base;
        h
    }

    #[test]
    fn open_transactions_bound_the_stable_offset_and_aborts_are_indexed() {
        let mut open = OpenTxns::default();
        assert_eq!(open.on_batch(&data(7, 0, false), None, Offset(1)), None);
        assert_eq!(open.first_unstable(), None, "idempotent batches open nothing");
        open.on_batch(&data(1, 1, true), None, Offset(2));
        open.on_batch(&data(2, 2, true), None, Offset(3));
        open.on_batch(&data(1, 3, true), None, Offset(4));
        assert_eq!(open.first_unstable(), Some(Offset(1)));
        assert_eq!(open.first_offset_of(1), Some(Offset(1)));
        assert_eq!(
            open.on_batch(
                &marker(1, 4, ControlType::Commit),
                Some(ControlType::Commit),
                Offset(5)
            ),
            None
        );
        assert_eq!(open.first_unstable(), Some(Offset(2)));
        let aborted = open.on_batch(
            &marker(2, 5, ControlType::Abort),
            Some(ControlType::Abort),
            Offset(6),
        );
        assert_eq!(
            aborted,
            Some(AbortedTxn {
                producer_id: 2,
                first_offset: Offset(2),
                last_offset: Offset(5),
                last_stable_offset: Offset(6)
            })
        );
        assert!(open.is_empty());
        // A marker again (a coordinator completing it after a restart) changes nothing.
        assert_eq!(
            open.on_batch(
                &marker(2, 6, ControlType::Abort),
                Some(ControlType::Abort),
                Offset(7)
            ),
            None
        );
        // A batch the cleaner emptied opens nothing when recovery reads it again.
        let mut emptied = data(3, 7, true);
        emptied.records_count = 0;
        assert_eq!(open.on_batch(&emptied, None, Offset(8)), None);
        assert!(open.is_empty());
    }

    #[test]
    fn entries_round_trip_and_garbage_ends_the_index() {
        let e = AbortedTxn {
            producer_id: 9,
            first_offset: Offset(10),
            last_offset: Offset(20),
            last_stable_offset: Offset(21),
        };
        assert_eq!(AbortedTxn::decode(&e.encode()), Some(e));
        assert_eq!(
            AbortedTxn::decode(&[0u8; ABORTED_TXN_BYTES]),
            None,
            "zeros are no entry"
        );
        let mut bad = e.encode();
        bad[0] = 1;
        assert_eq!(AbortedTxn::decode(&bad), None);
    }
}
