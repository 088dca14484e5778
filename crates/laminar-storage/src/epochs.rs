//! The leader epoch cache of a log (KIP-101): at which offset each leader epoch began.
//!
//! A follower asks its leader where its own last epoch ends (OffsetForLeaderEpoch) and
//! truncates there, so that a log that diverged under an old leader is cut exactly where
//! the new leader's log differs, never by the high watermark alone.
//!
//! Kept in `leader-epoch-checkpoint` in the log's directory, in Kafka's text format (a
//! version line `0`, a count, then `epoch start_offset` lines). It is replaced, durably,
//! whenever an epoch is added or entries are cut, before the batches of a new epoch are
//! written: after a crash it may name an epoch whose batches never reached the disk, and
//! opening the log cuts entries that start at or past its end.

use std::path::Path;

use crate::backend::{read_whole, write_atomically, Storage};
use crate::error::{IoContext, Result, StorageError};
use crate::types::Offset;

pub const EPOCHS_FILE: &str = "leader-epoch-checkpoint";

/// An epoch a requester does not know, or an offset the cache cannot give (Kafka's
/// UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET).
pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderEpochs {
    /// `(epoch, start offset)`, both strictly increasing.
    entries: Vec<(i32, Offset)>,
}

impl LeaderEpochs {
    pub fn load(storage: &dyn Storage, dir: &Path) -> Result<LeaderEpochs> {
        let path = dir.join(EPOCHS_FILE);
        let Some(bytes) = read_whole(storage, &path).ctx("read", &path)? else {
            return Ok(LeaderEpochs::default());
        };
        let corrupt = |reason: String| StorageError::Corrupt {
            what: "leader epoch checkpoint",
            path: path.clone(),
            reason,
        };
        let text = String::from_utf8(bytes).map_err(|e| corrupt(e.to_string()))?;
        let mut lines = text.lines();
        if lines.next() != Some("0") {
            return Err(corrupt("not version 0".into()));
        }
        let count: usize = lines
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| corrupt("no entry count".into()))?;
        let mut entries = Vec::new();
        for line in lines.take(count) {
            let mut words = line.split_whitespace();
            let epoch: i32 = words
                .next()
                .and_then(|w| w.parse().ok())
                .ok_or_else(|| corrupt(format!("bad line {line:?}")))?;
            let offset: i64 = words
                .next()
                .and_then(|w| w.parse().ok())
                .ok_or_else(|| corrupt(format!("bad line {line:?}")))?;
            if entries
                .last()
                .is_some_and(|&(e, o): &(i32, Offset)| e >= epoch || o.0 > offset)
            {
                return Err(corrupt(format!("entry {line:?} does not follow the one before")));
            }
            entries.push((epoch, Offset(offset)));
        }
        if entries.len() != count {
            return Err(corrupt(format!("{} entries of {count}", entries.len())));
        }
        Ok(LeaderEpochs { entries })
    }

    /// One epoch from `start`, not yet written anywhere.
    pub fn starting(epoch: i32, start: Offset) -> LeaderEpochs {
        LeaderEpochs {
            entries: vec![(epoch, start)],
        }
    }

    fn store(&self, storage: &dyn Storage, dir: &Path) -> Result<()> {
        let mut text = format!("0\n{}\n", self.entries.len());
        for (epoch, offset) in &self.entries {
            text.push_str(&format!("{epoch} {}\n", offset.0));
        }
        let path = dir.join(EPOCHS_FILE);
        write_atomically(storage, dir, EPOCHS_FILE, text.as_bytes()).ctx("write", &path)
    }

    pub fn entries(&self) -> &[(i32, Offset)] {
        &self.entries
    }

    pub fn latest(&self) -> Option<(i32, Offset)> {
        self.entries.last().copied()
    }

    /// Records that `epoch` begins at `start`, durably, if it is newer than every epoch held.
    /// An older or equal epoch changes nothing.
    pub fn assign(&mut self, epoch: i32, start: Offset, storage: &dyn Storage, dir: &Path) -> Result<bool> {
        if epoch < 0 || self.latest().is_some_and(|(e, _)| e >= epoch) {
            return Ok(false);
        }
        // An epoch that began where the last one did replaces it: no batch was written in it.
        if self.latest().is_some_and(|(_, o)| o >= start) {
            self.entries.retain(|&(_, o)| o < start);
        }
        self.entries.push((epoch, start));
        self.store(storage, dir)?;
        Ok(true)
    }

    /// Drops the epochs that begin at or after `end` (the log was cut there).
    pub fn truncate_from_end(&mut self, end: Offset, storage: &dyn Storage, dir: &Path) -> Result<()> {
        let before = self.entries.len();
        self.entries.retain(|&(_, o)| o < end);
        if self.entries.len() != before {
            self.store(storage, dir)?;
        }
        Ok(())
    }

    /// Kafka's `LeaderEpochFileCache.endOffsetFor`: the largest epoch at or below `requested`
    /// and the offset where the epoch after it begins (`log_end` if it is the latest).
    pub fn end_offset_for(&self, requested: i32, log_end: Offset) -> (i32, i64) {
        if requested == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        match self.latest() {
            None => (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET),
            Some((latest, _)) if latest == requested => (requested, log_end.0),
            Some(_) => {
                let Some(&(_, higher_start)) = self.entries.iter().find(|(e, _)| *e > requested) else {
                    return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
                };
                match self.entries.iter().rev().find(|(e, _)| *e <= requested) {
                    Some(&(floor, _)) => (floor, higher_start.0),
                    None => (requested, higher_start.0),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::RealStorage;

    #[test]
    fn epochs_answer_as_kafkas_cache_and_survive_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let storage = RealStorage::new();
        let mut e = LeaderEpochs::default();
        assert_eq!(e.end_offset_for(0, Offset(0)), (-1, -1));
        assert!(e.assign(0, Offset(0), storage.as_ref(), dir.path()).unwrap());
        assert!(!e.assign(0, Offset(5), storage.as_ref(), dir.path()).unwrap());
        e.assign(2, Offset(10), storage.as_ref(), dir.path()).unwrap();
        e.assign(4, Offset(20), storage.as_ref(), dir.path()).unwrap();
        let log_end = Offset(25);
        assert_eq!(e.end_offset_for(4, log_end), (4, 25));
        assert_eq!(e.end_offset_for(2, log_end), (2, 20));
        // Epoch 3 never led here: the epoch below it ends where 4 begins.
        assert_eq!(e.end_offset_for(3, log_end), (2, 20));
        assert_eq!(e.end_offset_for(0, log_end), (0, 10));
        assert_eq!(e.end_offset_for(7, log_end), (-1, -1));
        assert_eq!(e.end_offset_for(-1, log_end), (-1, -1));
        let reloaded = LeaderEpochs::load(storage.as_ref(), dir.path()).unwrap();
        assert_eq!(reloaded, e);
        e.truncate_from_end(Offset(20), storage.as_ref(), dir.path())
            .unwrap();
        assert_eq!(e.latest(), Some((2, Offset(10))));
        assert_eq!(LeaderEpochs::load(storage.as_ref(), dir.path()).unwrap(), e);
        // A new epoch at the start of an empty one replaces it.
        e.assign(5, Offset(10), storage.as_ref(), dir.path()).unwrap();
        assert_eq!(e.entries(), &[(0, Offset(0)), (5, Offset(10))]);
    }
}
