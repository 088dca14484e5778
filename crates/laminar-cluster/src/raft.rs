//! The controller quorum's storage for openraft: its log and vote on disk, and the state
//! machine that applies the log to a [`ClusterImage`].
//!
//! Files, in `<log.dirs>/cluster-metadata/`:
//! - `raft.log`: entries, each `[u32 length][u32 crc32c][JSON]` (little-endian), appended and
//!   `fdatasync`ed before openraft is told they are written. A torn or corrupt tail is cut
//!   off at open: such an entry was never reported written, so no vote counted it.
//! - `vote.json`, `purged.json`, `snapshot.json`: replaced whole (a temporary file, fsync,
//!   rename, fsync of the directory).
//!
//! Every file is reached through the storage backend (`laminar_storage::backend`), as the
//! logs are: the simulated crash and the fault injector reach the controller's log too.
//! Everything here blocks on the disk: it runs only on the controller's own thread (see
//! `cluster::Controller`), never on a socket thread.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::{Cursor, ErrorKind};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use laminar_storage::backend::{
    create_dir_all_durably, read_exact_at, read_whole, write_atomically, Storage, StorageFile,
};
use openraft::storage::{LogFlushed, RaftLogStorage, RaftStateMachine};
use openraft::{
    BasicNode, Entry, EntryPayload, ErrorSubject, ErrorVerb, LogId, LogState, RaftLogReader,
    RaftSnapshotBuilder, Snapshot, SnapshotMeta, StorageError, StoredMembership, Vote,
};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use tokio::sync::watch;

use super::image::{ClusterImage, Command, CommandResult};

openraft::declare_raft_types!(
    /// The controller quorum's types: commands in, results out, nodes by `node.id`.
    pub TypeConfig:
        D = Command,
        R = CommandResult,
        NodeId = u64,
        Node = BasicNode,
);

pub type NodeId = u64;
pub type Raft = openraft::Raft<TypeConfig>;
type StorageResult<T> = Result<T, StorageError<NodeId>>;

const LOG_FILE: &str = "raft.log";
const VOTE_FILE: &str = "vote.json";
const PURGED_FILE: &str = "purged.json";
const SNAPSHOT_FILE: &str = "snapshot.json";
/// Bytes before a record's JSON: its length and CRC.
const RECORD_HEADER_BYTES: usize = 8;
/// An entry larger than this is corruption (a topic with 10,000 partitions of 5 replicas is
/// about 1 MiB of JSON).
const RECORD_BYTES_MAX: usize = 64 << 20;
/// The log file is rewritten without its purged entries once they take this many bytes.
const PURGED_BYTES_REWRITE: u64 = 4 << 20;

fn io_err(subject: ErrorSubject<NodeId>, verb: ErrorVerb, e: std::io::Error) -> StorageError<NodeId> {
    StorageError::from_io_error(subject, verb, e)
}

/// Replaces `dir/name` with `value` as JSON, durably.
fn write_json_file<T: Serialize>(
    storage: &dyn Storage,
    dir: &Path,
    name: &str,
    value: &T,
) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    write_atomically(storage, dir, name, &bytes)
}

fn read_json_file<T: DeserializeOwned>(
    storage: &dyn Storage,
    dir: &Path,
    name: &str,
) -> std::io::Result<Option<T>> {
    match read_whole(storage, &dir.join(name))? {
        Some(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| std::io::Error::new(ErrorKind::InvalidData, format!("{name}: {e}"))),
        None => Ok(None),
    }
}

struct LogFiles {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    file: Arc<dyn StorageFile>,
    /// Every entry not purged, with the file position of its record.
    entries: BTreeMap<u64, (Entry<TypeConfig>, u64)>,
    end_pos: u64,
    /// Bytes at the start of the file that hold purged entries.
    purged_bytes: u64,
    last_purged: Option<LogId<NodeId>>,
    vote: Option<Vote<NodeId>>,
}

/// The raft log and vote. Cheap to clone: clones share the files (openraft reads through a
/// clone while it appends through another).
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Mutex<LogFiles>>,
}

impl LogStore {
    pub fn open(storage: Arc<dyn Storage>, dir: &Path) -> std::io::Result<LogStore> {
        create_dir_all_durably(storage.as_ref(), dir)?;
        let last_purged: Option<LogId<NodeId>> = read_json_file(storage.as_ref(), dir, PURGED_FILE)?;
        let vote: Option<Vote<NodeId>> = read_json_file(storage.as_ref(), dir, VOTE_FILE)?;
        let path = dir.join(LOG_FILE);
        let file = storage.open(&path, true)?;
        let mut bytes = vec![0u8; file.len()? as usize];
        read_exact_at(file.as_ref(), &mut bytes, 0)?;
        let mut entries = BTreeMap::new();
        let mut pos = 0usize;
        let mut purged_bytes = 0u64;
        let mut torn = None;
        while pos < bytes.len() {
            match decode_record(&bytes[pos..]) {
                Ok((entry, len)) => {
                    let index = entry.log_id.index;
                    if last_purged.is_some_and(|p| index <= p.index) {
                        purged_bytes = (pos + len) as u64;
                    } else {
                        // Truncation cuts the file, so the entries that remain are contiguous.
                        if let Some((last, _)) = entries.last_key_value() {
                            assert_eq!(index, last + 1, "{}: entries are contiguous", path.display());
                        }
                        entries.insert(index, (entry, pos as u64));
                    }
                    pos += len;
                }
                Err(reason) => {
                    torn = Some(reason);
                    break;
                }
            }
        }
        if let Some(reason) = torn {
            laminar_metrics::warn!(
                "{}: cutting the tail at byte {pos} of {} ({reason}): an append the crash interrupted",
                path.display(),
                bytes.len()
            );
            file.set_len(pos as u64)?;
            file.sync_data()?;
        }
        Ok(LogStore {
            inner: Arc::new(Mutex::new(LogFiles {
                storage,
                dir: dir.to_path_buf(),
                file,
                entries,
                end_pos: pos as u64,
                purged_bytes,
                last_purged,
                vote,
            })),
        })
    }
}

fn encode_record(entry: &Entry<TypeConfig>) -> Vec<u8> {
    let body = serde_json::to_vec(entry).expect("entries serialize");
    let mut out = Vec::with_capacity(RECORD_HEADER_BYTES + body.len());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// One record from the start of `bytes`, and its length; or why there is none.
fn decode_record(bytes: &[u8]) -> Result<(Entry<TypeConfig>, usize), String> {
    if bytes.len() < RECORD_HEADER_BYTES {
        return Err("a short header".into());
    }
    let len = u32::from_le_bytes(bytes[0..4].try_into().unwrap()) as usize;
    let crc = u32::from_le_bytes(bytes[4..8].try_into().unwrap());
    if len > RECORD_BYTES_MAX || bytes.len() < RECORD_HEADER_BYTES + len {
        return Err(format!("a record of {len} bytes does not fit"));
    }
    let body = &bytes[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + len];
    if crc32c::crc32c(body) != crc {
        return Err("a CRC mismatch".into());
    }
    let entry = serde_json::from_slice(body).map_err(|e| format!("undecodable: {e}"))?;
    Ok((entry, RECORD_HEADER_BYTES + len))
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> StorageResult<Vec<Entry<TypeConfig>>> {
        let inner = self.inner.lock().unwrap();
        Ok(inner.entries.range(range).map(|(_, (e, _))| e.clone()).collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> StorageResult<LogState<TypeConfig>> {
        let inner = self.inner.lock().unwrap();
        let last = inner.entries.last_key_value().map(|(_, (e, _))| e.log_id);
        Ok(LogState {
            last_purged_log_id: inner.last_purged,
            last_log_id: last.or(inner.last_purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> StorageResult<()> {
        let mut inner = self.inner.lock().unwrap();
        write_json_file(inner.storage.as_ref(), &inner.dir, VOTE_FILE, vote)
            .map_err(|e| io_err(ErrorSubject::Vote, ErrorVerb::Write, e))?;
        inner.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> StorageResult<Option<Vote<NodeId>>> {
        Ok(self.inner.lock().unwrap().vote)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> StorageResult<()>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut inner = self.inner.lock().unwrap();
        let mut buf = Vec::new();
        let mut positions = Vec::new();
        for entry in entries {
            if let Some((last, _)) = inner.entries.last_key_value() {
                assert_eq!(
                    entry.log_id.index,
                    last + 1,
                    "openraft appends contiguous entries"
                );
            }
            positions.push(inner.end_pos + buf.len() as u64);
            buf.extend_from_slice(&encode_record(&entry));
            let index = entry.log_id.index;
            let pos = *positions.last().unwrap();
            inner.entries.insert(index, (entry, pos));
        }
        let written = inner
            .file
            .write_all_at(&buf, inner.end_pos)
            .and_then(|()| inner.file.sync_data());
        match written {
            Ok(()) => {
                inner.end_pos += buf.len() as u64;
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                // A failed fsync leaves the file's state unknown: this controller stops
                // (openraft turns the error into a fatal one), as a log does on a failed
                // fsync.
                laminar_metrics::warn!("the controller's log {}: {e}", inner.dir.display());
                let kind = e.kind();
                callback.log_io_completed(Err(std::io::Error::new(kind, e.to_string())));
                Err(io_err(ErrorSubject::Logs, ErrorVerb::Write, e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> StorageResult<()> {
        let mut inner = self.inner.lock().unwrap();
        let Some(pos) = inner.entries.get(&log_id.index).map(|(_, pos)| *pos) else {
            return Ok(());
        };
        inner.entries.split_off(&log_id.index);
        inner
            .file
            .set_len(pos)
            .and_then(|()| inner.file.sync_data())
            .map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Delete, e))?;
        inner.end_pos = pos;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> StorageResult<()> {
        let mut inner = self.inner.lock().unwrap();
        assert!(
            inner.last_purged.is_none_or(|p| p.index <= log_id.index),
            "purges move forward"
        );
        write_json_file(inner.storage.as_ref(), &inner.dir, PURGED_FILE, &log_id)
            .map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Delete, e))?;
        inner.last_purged = Some(log_id);
        let kept = inner.entries.split_off(&(log_id.index + 1));
        inner.entries = kept;
        inner.purged_bytes = inner
            .entries
            .first_key_value()
            .map_or(inner.end_pos, |(_, (_, pos))| *pos);
        if inner.purged_bytes >= PURGED_BYTES_REWRITE {
            rewrite(&mut inner).map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Delete, e))?;
        }
        Ok(())
    }
}

/// Writes the entries not purged to a new log file and renames it over the old one.
fn rewrite(inner: &mut LogFiles) -> std::io::Result<()> {
    let tmp = inner.dir.join(format!("{LOG_FILE}.tmp"));
    let file = inner.storage.open(&tmp, true)?;
    file.set_len(0)?;
    let mut pos = 0u64;
    let mut buf = Vec::new();
    for (_, (entry, at)) in inner.entries.iter_mut() {
        let record = encode_record(entry);
        *at = pos;
        pos += record.len() as u64;
        buf.extend_from_slice(&record);
    }
    file.write_all_at(&buf, 0)?;
    file.sync_data()?;
    inner.storage.rename(&tmp, &inner.dir.join(LOG_FILE))?;
    inner.storage.sync_dir(&inner.dir)?;
    inner.file = file;
    inner.end_pos = pos;
    inner.purged_bytes = 0;
    Ok(())
}

/// What a snapshot holds; its JSON is the snapshot's data.
#[derive(Serialize, Deserialize)]
struct SnapshotFile {
    meta: SnapshotMeta<NodeId, BasicNode>,
    image: ClusterImage,
}

struct SmState {
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
    image: ClusterImage,
    /// The last snapshot built or installed, as its JSON.
    snapshot: Option<(SnapshotMeta<NodeId, BasicNode>, Vec<u8>)>,
    snapshots_built: u64,
}

/// Applies committed commands to the image, and publishes each new image.
#[derive(Clone)]
pub struct StateMachine {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    state: Arc<Mutex<SmState>>,
    published: watch::Sender<Arc<ClusterImage>>,
}

impl StateMachine {
    /// Starts from the last snapshot, if any; openraft applies the log after it.
    pub fn open(
        storage: Arc<dyn Storage>,
        dir: &Path,
        published: watch::Sender<Arc<ClusterImage>>,
    ) -> std::io::Result<StateMachine> {
        create_dir_all_durably(storage.as_ref(), dir)?;
        let file: Option<SnapshotFile> = read_json_file(storage.as_ref(), dir, SNAPSHOT_FILE)?;
        let state = match file {
            Some(f) => {
                let data = serde_json::to_vec(&f.image).map_err(std::io::Error::other)?;
                SmState {
                    last_applied: f.meta.last_log_id,
                    membership: f.meta.last_membership.clone(),
                    image: f.image,
                    snapshot: Some((f.meta, data)),
                    snapshots_built: 0,
                }
            }
            None => SmState {
                last_applied: None,
                membership: StoredMembership::default(),
                image: ClusterImage::default(),
                snapshot: None,
                snapshots_built: 0,
            },
        };
        published.send_replace(Arc::new(state.image.clone()));
        Ok(StateMachine {
            storage,
            dir: dir.to_path_buf(),
            state: Arc::new(Mutex::new(state)),
            published,
        })
    }

    fn store_snapshot(
        &self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        image: &ClusterImage,
    ) -> std::io::Result<()> {
        write_json_file(
            self.storage.as_ref(),
            &self.dir,
            SNAPSHOT_FILE,
            &SnapshotFile {
                meta: meta.clone(),
                image: image.clone(),
            },
        )
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<TypeConfig>> {
        let (meta, image, data) = {
            let mut s = self.state.lock().unwrap();
            s.snapshots_built += 1;
            let meta = SnapshotMeta {
                last_log_id: s.last_applied,
                last_membership: s.membership.clone(),
                snapshot_id: format!("{}-{}", s.last_applied.map_or(0, |l| l.index), s.snapshots_built),
            };
            let data = serde_json::to_vec(&s.image).map_err(|e| {
                StorageError::from_io_error(
                    ErrorSubject::Snapshot(None),
                    ErrorVerb::Write,
                    std::io::Error::other(e),
                )
            })?;
            s.snapshot = Some((meta.clone(), data.clone()));
            (meta, s.image.clone(), data)
        };
        self.store_snapshot(&meta, &image)
            .map_err(|e| io_err(ErrorSubject::Snapshot(None), ErrorVerb::Write, e))?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(
        &mut self,
    ) -> StorageResult<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>)> {
        let s = self.state.lock().unwrap();
        Ok((s.last_applied, s.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> StorageResult<Vec<CommandResult>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut s = self.state.lock().unwrap();
        let mut results = Vec::new();
        for entry in entries {
            s.last_applied = Some(entry.log_id);
            results.push(match &entry.payload {
                EntryPayload::Blank => CommandResult::ok(),
                EntryPayload::Normal(command) => s.image.apply(entry.log_id.index, command),
                EntryPayload::Membership(m) => {
                    s.membership = StoredMembership::new(Some(entry.log_id), m.clone());
                    CommandResult::ok()
                }
            });
        }
        self.published.send_replace(Arc::new(s.image.clone()));
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> StorageResult<()> {
        let data = snapshot.into_inner();
        let image: ClusterImage = serde_json::from_slice(&data).map_err(|e| {
            io_err(
                ErrorSubject::Snapshot(Some(meta.signature())),
                ErrorVerb::Read,
                std::io::Error::new(ErrorKind::InvalidData, e),
            )
        })?;
        self.store_snapshot(meta, &image).map_err(|e| {
            io_err(
                ErrorSubject::Snapshot(Some(meta.signature())),
                ErrorVerb::Write,
                e,
            )
        })?;
        let mut s = self.state.lock().unwrap();
        s.last_applied = meta.last_log_id;
        s.membership = meta.last_membership.clone();
        s.image = image;
        s.snapshot = Some((meta.clone(), data));
        self.published.send_replace(Arc::new(s.image.clone()));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        let s = self.state.lock().unwrap();
        Ok(s.snapshot.as_ref().map(|(meta, data)| Snapshot {
            meta: meta.clone(),
            snapshot: Box::new(Cursor::new(data.clone())),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use laminar_storage::backend::{Fault, FaultyStorage, RealStorage, SimStorage};
    use openraft::testing::{StoreBuilder, Suite};

    struct Builder;

    impl StoreBuilder<TypeConfig, LogStore, StateMachine, tempfile::TempDir> for Builder {
        async fn build(&self) -> StorageResult<(tempfile::TempDir, LogStore, StateMachine)> {
            let dir = tempfile::tempdir().unwrap();
            let log = LogStore::open(RealStorage::new(), dir.path()).unwrap();
            let (tx, _) = watch::channel(Arc::new(ClusterImage::default()));
            let sm = StateMachine::open(RealStorage::new(), dir.path(), tx).unwrap();
            Ok((dir, log, sm))
        }
    }

    /// openraft's own conformance suite for storage implementations.
    #[test]
    fn openraft_storage_suite() {
        Suite::test_all(Builder).unwrap();
    }

    fn entry(term: u64, index: u64, command: Option<Command>) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(openraft::CommittedLeaderId::new(term, 1), index),
            payload: command.map_or(EntryPayload::Blank, EntryPayload::Normal),
        }
    }

    async fn append(log: &mut LogStore, entries: Vec<Entry<TypeConfig>>) {
        use openraft::storage::RaftLogStorageExt;
        log.blocking_append(entries).await.unwrap();
    }

    #[tokio::test]
    async fn entries_vote_and_purges_survive_a_reopen_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogStore::open(RealStorage::new(), dir.path()).unwrap();
        let bootstrap = Command::Bootstrap {
            cluster_id: "c".into(),
        };
        append(
            &mut log,
            (1..=5).map(|i| entry(1, i, Some(bootstrap.clone()))).collect(),
        )
        .await;
        log.truncate(LogId::new(openraft::CommittedLeaderId::new(1, 1), 5))
            .await
            .unwrap();
        append(&mut log, vec![entry(2, 5, None)]).await;
        log.purge(LogId::new(openraft::CommittedLeaderId::new(1, 1), 2))
            .await
            .unwrap();
        let vote = Vote::new(2, 3);
        log.save_vote(&vote).await.unwrap();
        drop(log);
        // A torn append: half a record after the last whole one.
        let path = dir.path().join(LOG_FILE);
        let len = std::fs::metadata(&path).unwrap().len();
        let f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, &encode_record(&entry(2, 6, None))[..10], len).unwrap();
        drop(f);
        let mut log = LogStore::open(RealStorage::new(), dir.path()).unwrap();
        assert_eq!(log.read_vote().await.unwrap(), Some(vote));
        let state = log.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id.map(|l| l.index), Some(2));
        assert_eq!(
            state.last_log_id.map(|l| (l.leader_id.term, l.index)),
            Some((2, 5))
        );
        let got: Vec<u64> = log
            .try_get_log_entries(0..100)
            .await
            .unwrap()
            .iter()
            .map(|e| e.log_id.index)
            .collect();
        assert_eq!(got, vec![3, 4, 5]);
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            len,
            "the torn tail is cut"
        );
    }

    /// The controller's log through the simulated disk: at a power cut, every entry whose
    /// append returned and the vote survive; an append whose fsync failed was never
    /// acknowledged, and whatever of it the cut left is either whole or cut off at open.
    #[tokio::test]
    async fn acknowledged_entries_and_the_vote_survive_a_power_cut() {
        let dir = Path::new("/controller/cluster-metadata");
        let index_of = |e: &Entry<TypeConfig>| e.log_id.index;
        for seed in 0..20u64 {
            let sim = SimStorage::new();
            let faulty = FaultyStorage::new(sim.clone());
            let mut log = LogStore::open(faulty.clone(), dir).unwrap();
            let bootstrap = Command::Bootstrap {
                cluster_id: format!("c{seed}"),
            };
            append(
                &mut log,
                (1..=5).map(|i| entry(1, i, Some(bootstrap.clone()))).collect(),
            )
            .await;
            let vote = Vote::new(1, 2);
            log.save_vote(&vote).await.unwrap();
            log.purge(LogId::new(openraft::CommittedLeaderId::new(1, 1), 1))
                .await
                .unwrap();
            // The next append's fsync fails: it is not acknowledged.
            faulty.inject(dir, Fault::FailSyncs);
            let failed = {
                use openraft::storage::RaftLogStorageExt;
                log.blocking_append(vec![entry(1, 6, None), entry(1, 7, None)])
                    .await
            };
            assert!(failed.is_err(), "a failed fsync fails the append");
            drop(log);
            sim.crash(Some(seed));
            let mut log = LogStore::open(sim.clone(), dir).unwrap();
            assert_eq!(log.read_vote().await.unwrap(), Some(vote), "seed {seed}");
            let state = log.get_log_state().await.unwrap();
            assert_eq!(state.last_purged_log_id.map(|l| l.index), Some(1), "seed {seed}");
            let got: Vec<u64> = log
                .try_get_log_entries(0..100)
                .await
                .unwrap()
                .iter()
                .map(index_of)
                .collect();
            assert!(
                got.starts_with(&[2, 3, 4, 5]) && got.len() <= 6,
                "seed {seed}: every acknowledged entry, then at most whole unacknowledged ones: {got:?}"
            );
            // The log takes appends after the cut, where it ends.
            let next = got.last().unwrap() + 1;
            append(&mut log, vec![entry(2, next, None)]).await;
            drop(log);
            sim.crash(None);
            let mut log = LogStore::open(sim.clone(), dir).unwrap();
            let state = log.get_log_state().await.unwrap();
            assert_eq!(state.last_log_id.map(|l| l.index), Some(next), "seed {seed}");
        }
    }
}
