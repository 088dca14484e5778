//! The partitions this broker hosts. A [`Partition`] is what the data plane knows of one:
//! its log, its replica state (leading, following, idle; the ISR and the high watermark) and
//! its producers' state. It lives as long as the cluster metadata places the partition here:
//! [`Partitions::apply`] makes and drops it with the replica state, so a request, the
//! replicate path, a follower's fetcher and the coordinators all find the same one, by one
//! lookup.
//!
//! The store keeps the log's files (a follower's truncation reopens the log, so the log is
//! looked up through the store, never held); the replica state's rules are the cluster's
//! (`laminar-cluster`, `replica.rs`), which also reads it for the ISR checks.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use laminar_cluster::image::PartitionInfo;
use laminar_cluster::replica::{Replica, Transition};
use laminar_cluster::{Cluster, LeaderEpoch};
use laminar_protocol::ErrorCode;
use laminar_records::ValidBatches;
use laminar_storage::{AppendInfo, AppendMode, Log, LogId, Offset, StorageError, Store};
use tokio::sync::Notify;

use crate::producers::ProducerState;
use crate::replicate::{Durable, LeaderWrite, ReplicateError};
use crate::storage_pool::StoragePool;

/// A partition placed on this broker.
pub struct Partition {
    pub topic: String,
    pub partition: i32,
    log_id: LogId,
    store: Arc<Store>,
    cluster: Arc<Cluster>,
    /// Its role here, the ISR and the high watermark.
    pub replica: Arc<Replica>,
    /// Its idempotent and transactional producers: checked and recorded on its storage
    /// thread with each append, rebuilt from the log when a leadership begins.
    pub producers: ProducerState,
    /// Consumers see only what the leader has synced, too (`log.read.after.fsync`).
    pub read_after_fsync: bool,
    /// Wakes the fetches waiting in long poll on this partition: an append here, a flush
    /// that made more of it visible, a high watermark that moved, a change of its place
    /// (this partition replaced or dropped). A fetch waits on the partitions it asked for
    /// only, so an append costs nothing to the consumers idle on other partitions.
    pub arrived: Arc<Notify>,
}

impl Partition {
    /// The leader epoch it is led at here, unless this broker is fenced (the controller
    /// moved its leaderships, or is about to: it takes no writes and serves no reads).
    pub fn leader_epoch(&self) -> Option<LeaderEpoch> {
        self.replica.leader_epoch().filter(|_| !self.cluster.is_fenced())
    }

    /// Its log, if this broker has one for it (created when the metadata placed it here).
    pub fn log(&self) -> Option<Arc<Log>> {
        self.store.log(&self.log_id)
    }

    /// The key of its storage thread (`storage_pool.rs`): its appends, truncations and
    /// producer-state rebuilds run there, one after another.
    pub fn storage_key(&self) -> u64 {
        crate::storage_pool::partition_key(&self.topic, self.partition)
    }

    /// Whether this producer's transaction is in progress here at `epoch`: a batch of it
    /// appended, no marker since.
    pub fn in_transaction(&self, producer_id: i64, epoch: i16) -> bool {
        self.producers.epoch(producer_id) == Some(epoch)
            && self
                .log()
                .is_some_and(|log| log.open_txns().iter().any(|(p, _)| *p == producer_id))
    }

    /// Rebuilds its producers' state from its log as it is now (a leadership begins, or a
    /// follower truncated). Reads from disk: on its storage thread.
    pub fn rebuild_producers(&self, log: &Log) -> Result<usize, crate::producers::RebuildError> {
        self.producers.rebuild_from_log(log)
    }
}

/// A partition this broker leads and serves, as one request finds it: its log and the
/// leader epoch it is led at, looked up once, so that every step of the request (the epoch
/// check, the read bound, the write) sees the same leadership.
pub struct LedPartition {
    pub epoch: LeaderEpoch,
    pub log: Arc<Log>,
    pub partition: Arc<Partition>,
}

impl LedPartition {
    /// What consumers may read: below the high watermark (what every in-sync follower has
    /// on its disk), never past the log end; with `log.read.after.fsync`, never past what
    /// this leader has synced either, so that no power cut takes back a record a consumer
    /// has read (and no offset it read is used again for another record).
    pub fn high_watermark(&self) -> Offset {
        let hw = self.partition.replica.high_watermark().min(self.log.log_end());
        if self.partition.read_after_fsync {
            hw.min(self.log.flushed_end())
        } else {
            hw
        }
    }

    /// [`Self::high_watermark`] for a consumer's read. When the synced end is what holds it
    /// back, the log's flush is asked for (of the flusher, not waited for): records become
    /// visible once a consumer is there to read them, and appends that nobody reads cost no
    /// fsync. The flush's end wakes the fetches waiting on the partition.
    pub fn high_watermark_for_reader(&self) -> Offset {
        let hw = self.high_watermark();
        if self.partition.read_after_fsync && hw < self.replicated_end() {
            self.log.request_flush();
        }
        hw
    }

    /// What every in-sync replica has (the log end when the leader is alone in sync).
    fn replicated_end(&self) -> Offset {
        self.partition.replica.high_watermark().min(self.log.log_end())
    }

    /// A write at this leadership's epoch, through the one replicate path.
    fn write(&self) -> LeaderWrite {
        LeaderWrite::new(
            self.epoch,
            Some(self.partition.replica.clone()),
            self.partition.arrived.clone(),
        )
    }

    /// The one sequence of every write a leader makes (a produce, the coordinators' records,
    /// the transaction markers): on the partition's storage thread (where every append to it
    /// runs in turn, a follower's fetcher's too), `job` makes its batch and appends it through
    /// [`Append`], which checks that the partition is still led here at this epoch right
    /// before the write, with whatever must happen in log order; then the high watermark and
    /// the waiting fetches follow. The write's wait to be durable ([`Written::durable`]) is
    /// the caller's: a produce's `acks=all` overlaps its connection's next requests.
    pub async fn append_with<T, E>(
        &self,
        storage: &StoragePool,
        job: impl FnOnce(&Append) -> Result<Option<(AppendInfo, T)>, E> + Send + 'static,
    ) -> Result<Option<(Written, T)>, E>
    where
        T: Send + 'static,
        E: From<WriteError> + Send + 'static,
    {
        let write = self.write();
        let (epoch, hosted) = (self.epoch, self.partition.clone());
        let key = hosted.storage_key();
        let done = storage
            .run(key, move || -> Result<_, E> {
                let log = hosted.log().ok_or(WriteError::NotLeader)?;
                let append = Append {
                    log: &log,
                    epoch,
                    producers: &hosted.producers,
                    partition: &hosted,
                };
                append.check_leader()?;
                Ok(job(&append)?.map(|(info, t)| (log, info, t)))
            })
            .await
            .map_err(|e| E::from(WriteError::Lost(e.to_string())))??;
        let Some((log, info, t)) = done else {
            return Ok(None);
        };
        write.appended(info.log_end);
        Ok(Some((Written { info, log, write }, t)))
    }

    /// A leader's write, whole ([`Self::append_with`]), and with `durable_within` its wait
    /// for its fsync here and its in-sync replicas: how the coordinators and the transaction
    /// markers write.
    pub async fn write_with<T: Send + 'static>(
        self,
        storage: &StoragePool,
        durable_within: Option<Duration>,
        job: impl FnOnce(&Append) -> Result<Option<(AppendInfo, T)>, WriteError> + Send + 'static,
    ) -> Result<Option<(AppendInfo, T)>, WriteError> {
        let Some((written, t)) = self.append_with(storage, job).await? else {
            return Ok(None);
        };
        let info = written.info;
        if let Some(within) = durable_within {
            written
                .durable(within)
                .wait()
                .await
                .map_err(WriteError::Replicate)?;
        }
        Ok(Some((info, t)))
    }
}

/// A leader's write as it left its storage thread: appended, the high watermark and the
/// waiting fetches told.
pub struct Written {
    pub info: AppendInfo,
    log: Arc<Log>,
    write: LeaderWrite,
}

impl Written {
    /// Starts waiting for the write to be fsynced here and (in a cluster) on every in-sync
    /// replica, for at most `within`.
    pub fn durable(self, within: Duration) -> Durable {
        self.write.durable(&self.log, self.info.last_offset, within)
    }
}

/// A leader's append as [`LedPartition::append_with`]'s job makes it: its log, at the epoch
/// it is led at, with its producers' state, on its storage thread.
pub struct Append<'a> {
    pub log: &'a Arc<Log>,
    pub epoch: LeaderEpoch,
    pub producers: &'a ProducerState,
    partition: &'a Partition,
}

impl Append<'_> {
    /// The partition written.
    pub fn partition(&self) -> &Partition {
        self.partition
    }

    /// Whether the partition is led here at the write's epoch still: a large batch's
    /// validation, a transaction's implicit add or a coordinator's encoding may have taken
    /// long enough for the leadership to move.
    fn check_leader(&self) -> Result<(), WriteError> {
        if self.partition.leader_epoch() == Some(self.epoch) {
            Ok(())
        } else {
            Err(WriteError::NotLeader)
        }
    }

    /// Appends `batch`, validating it, its offsets assigned here (in `batch` too), at the
    /// leader epoch, if the partition is led here at it still.
    pub fn append(&self, batch: &mut [u8]) -> Result<AppendInfo, WriteError> {
        self.check_leader()?;
        let mode = AppendMode::Leader { epoch: self.epoch.0 };
        Ok(self.log.append_as(batch, mode)?)
    }

    /// Appends batches validated already, from their own buffer (only read: the offsets are
    /// assigned in the headers written), at the leader epoch, if the partition is led here
    /// at it still.
    pub fn append_valid(&self, batches: ValidBatches<'_>) -> Result<AppendInfo, WriteError> {
        self.check_leader()?;
        let mode = AppendMode::Leader { epoch: self.epoch.0 };
        Ok(self.log.append_valid(batches, mode)?)
    }
}

/// Why a leader's write ([`LedPartition::append_with`]) was not made, or not made durable.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The partition is no longer led here at the write's epoch: nothing was appended.
    #[error("no longer the leader")]
    NotLeader,
    /// Refused by the write's own checks, with the code its request answers.
    #[error("refused: {0}")]
    Refused(ErrorCode),
    /// The records could not be encoded.
    #[error("{0}")]
    Encode(String),
    /// The append failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// Appended, but not made durable here and on the in-sync replicas.
    #[error(transparent)]
    Replicate(ReplicateError),
    /// The storage thread's job panicked (a bug).
    #[error("the append job failed: {0}")]
    Lost(String),
}

impl WriteError {
    /// The code a partition's write answers with (a transaction marker), as produce's.
    pub fn partition_code(&self) -> ErrorCode {
        match self {
            WriteError::NotLeader => ErrorCode::NotLeaderOrFollower,
            WriteError::Refused(code) => *code,
            WriteError::Encode(_) => ErrorCode::InvalidRecord,
            WriteError::Storage(e) => match e {
                StorageError::InvalidBatch(_) => ErrorCode::CorruptMessage,
                StorageError::AppendSize { .. } => ErrorCode::MessageTooLarge,
                StorageError::StaleEpoch { .. } => ErrorCode::NotLeaderOrFollower,
                _ => ErrorCode::KafkaStorageError,
            },
            WriteError::Replicate(e) => e.partition_code(),
            WriteError::Lost(_) => ErrorCode::UnknownServerError,
        }
    }

    /// The code a coordinator's write to its log answers with (see
    /// [`ReplicateError::coordinator_code`]): the client looks for the coordinator again,
    /// or retries the same one later.
    pub fn coordinator_code(&self) -> ErrorCode {
        match self {
            WriteError::NotLeader | WriteError::Storage(_) => ErrorCode::NotCoordinator,
            WriteError::Refused(code) => *code,
            WriteError::Encode(_) => ErrorCode::InvalidRequest,
            WriteError::Replicate(e) => e.coordinator_code(),
            WriteError::Lost(_) => ErrorCode::UnknownServerError,
        }
    }
}

/// Every partition placed here, by topic and then partition: a lookup by the topic's name
/// allocates nothing (one is made for every partition of every produce and fetch).
pub struct Partitions {
    store: Arc<Store>,
    cluster: Arc<Cluster>,
    hosted: RwLock<HashMap<String, HashMap<i32, Arc<Partition>>>>,
    read_after_fsync: bool,
}

impl Partitions {
    /// `read_after_fsync`: see `Partition::read_after_fsync`.
    pub fn new(store: Arc<Store>, cluster: Arc<Cluster>, read_after_fsync: bool) -> Partitions {
        Partitions {
            store,
            cluster,
            hosted: RwLock::new(HashMap::new()),
            read_after_fsync,
        }
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<Arc<Partition>> {
        let hosted = self.hosted.read().unwrap();
        hosted.get(topic).and_then(|ps| ps.get(&partition)).cloned()
    }

    /// Wakes the fetches waiting on a partition (its high watermark or visible end moved).
    pub fn wake(&self, topic: &str, partition: i32) {
        if let Some(p) = self.get(topic, partition) {
            p.arrived.notify_waiters();
        }
    }

    /// Wakes the fetches waiting on every partition (an image changed ISRs or leaders).
    pub fn wake_all(&self) {
        let hosted = self.hosted.read().unwrap();
        for p in hosted.values().flat_map(|ps| ps.values()) {
            p.arrived.notify_waiters();
        }
    }

    pub fn all(&self) -> Vec<Arc<Partition>> {
        let hosted = self.hosted.read().unwrap();
        hosted.values().flat_map(|ps| ps.values().cloned()).collect()
    }

    /// Applies a partition's place in a new image: its replica state's transition (see
    /// `Replicas::apply`), with the partition made when it is placed here and dropped when
    /// it no longer is. `fenced`: this broker may lead nothing. Only the image publisher
    /// calls it, one image at a time.
    pub fn apply(
        &self,
        topic: &str,
        partition: i32,
        info: Option<&PartitionInfo>,
        fenced: bool,
    ) -> Option<Transition> {
        let log_id = LogId::new(topic, partition.max(0) as u32);
        let log_end = self.store.log(&log_id).map_or(Offset(0), |l| l.log_end());
        let replicas = &self.cluster.replicas;
        let transition = replicas.apply(topic, partition, info, fenced, log_end);
        let mut hosted = self.hosted.write().unwrap();
        match replicas.get(topic, partition) {
            Some(replica) => {
                let ps = hosted.entry(topic.to_string()).or_default();
                let current = ps
                    .get(&partition)
                    .is_some_and(|p| Arc::ptr_eq(&p.replica, &replica));
                if !current {
                    let replaced = ps.insert(
                        partition,
                        Arc::new(Partition {
                            topic: topic.to_string(),
                            partition,
                            log_id,
                            store: self.store.clone(),
                            cluster: self.cluster.clone(),
                            replica,
                            producers: ProducerState::default(),
                            read_after_fsync: self.read_after_fsync,
                            arrived: Arc::default(),
                        }),
                    );
                    // Its waiting fetches look again, and find the new one.
                    if let Some(old) = replaced {
                        old.arrived.notify_waiters();
                    }
                }
            }
            None => {
                if let Some(ps) = hosted.get_mut(topic) {
                    if let Some(old) = ps.remove(&partition) {
                        old.arrived.notify_waiters();
                    }
                    if ps.is_empty() {
                        hosted.remove(topic);
                    }
                }
            }
        }
        transition
    }

    /// DeleteRecords on a partition led here: its log start moved up to `offset` (-1: the
    /// high watermark; never above it, what consumers may read), durably. Followers learn
    /// the new start from their fetches, as Kafka's do. Returns the new low watermark.
    /// Writes and fsyncs: on the I/O pool.
    pub fn delete_records(&self, topic: &str, partition: i32, offset: i64) -> Result<i64, ErrorCode> {
        /// The offset that asks for "up to the high watermark".
        const HIGH_WATERMARK: i64 = -1;
        let led = self.led(topic, partition)?;
        let high_watermark = led.high_watermark();
        let before = match offset {
            HIGH_WATERMARK => high_watermark,
            o if o < 0 || o > high_watermark.0 => return Err(ErrorCode::OffsetOutOfRange),
            o => Offset(o),
        };
        match led.log.delete_records(before) {
            Ok(start) => Ok(start.0),
            Err(StorageError::OffsetOutOfRange { .. }) => Err(ErrorCode::OffsetOutOfRange),
            Err(e) => {
                laminar_metrics::warn!("delete records of {topic}-{partition} below {}: {e}", before.0);
                Err(ErrorCode::KafkaStorageError)
            }
        }
    }

    /// A partition this broker leads and serves, or the error code a client gets for it.
    fn leading(&self, topic: &str, partition: i32) -> Result<(LeaderEpoch, Arc<Partition>), ErrorCode> {
        let c = &self.cluster;
        if c.image().partition(topic, partition).is_none() {
            return Err(ErrorCode::UnknownTopicOrPartition);
        }
        let p = self.get(topic, partition).ok_or(ErrorCode::NotLeaderOrFollower)?;
        match p.leader_epoch() {
            Some(epoch) => Ok((epoch, p)),
            None => Err(ErrorCode::NotLeaderOrFollower),
        }
    }

    /// The leader epoch of a partition this broker leads, or the error code a client gets
    /// for it.
    pub fn leadership(&self, topic: &str, partition: i32) -> Result<LeaderEpoch, ErrorCode> {
        self.leading(topic, partition).map(|(epoch, _)| epoch)
    }

    /// A partition this broker leads, with its log: what a read or a write of it works on.
    /// Led here without a log (it could not be created), it answers as unknown.
    pub fn led(&self, topic: &str, partition: i32) -> Result<LedPartition, ErrorCode> {
        let (epoch, partition) = self.leading(topic, partition)?;
        let log = partition.log().ok_or(ErrorCode::UnknownTopicOrPartition)?;
        Ok(LedPartition {
            epoch,
            log,
            partition,
        })
    }

    /// Forgets the producers whose last batch is older than `expiration_ms` on every
    /// partition here; returns how many (producer, partition) states went.
    pub fn expire_producers(&self, now_ms: i64, expiration_ms: u64) -> usize {
        self.all()
            .iter()
            .map(|p| p.producers.expire(now_ms, expiration_ms))
            .sum()
    }
}
