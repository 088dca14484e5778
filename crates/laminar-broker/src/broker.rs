//! The broker: shared state, startup and shutdown, and request dispatch.

use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use laminar_protocol::requests::{self, peek_header, Request};
use laminar_protocol::responses::{self, FileSlice, ResponseFrame};
use laminar_protocol::{ApiKey, ProtocolError};
use laminar_storage::backend::{read_exact_at, RealStorage, Storage, StorageFile};
use laminar_storage::cleaner::{CleanerConfig, CleanerEvent, PassLimits};
use laminar_storage::{Store, StoreConfig};
use tokio::net::TcpListener;
use tokio::sync::Notify;

use crate::cluster::{Cluster, ClusterSettings};
use crate::config::BrokerConfig;
use crate::groups::store::{GroupRecord, GroupStore};
use crate::groups::Coordinator;
use crate::handlers;
use crate::metrics::BrokerMetrics;
use crate::producers::Producers;
use crate::quotas::Quotas;
use crate::storage_pool::partition_key;
use crate::storage_pool::StoragePool;
use crate::topics::Topics;
use laminar_net::{
    CloseConnection, Handled, HandlerFuture, IoPool, RequestKind, SendFile, ServerHandle, ServerLimits,
    Service,
};

/// Record data of a fetch response: a range of a segment file.
pub struct RecordsFile {
    pub file: Arc<dyn StorageFile>,
    pub position: u64,
    pub len: u64,
}

impl FileSlice for RecordsFile {
    fn len(&self) -> u64 {
        self.len
    }
}

impl SendFile for RecordsFile {
    fn raw_fd(&self) -> Option<RawFd> {
        self.file.raw_fd()
    }
    fn position(&self) -> u64 {
        self.position
    }
    fn is_resident(&self, offset: u64, len: u64) -> Option<bool> {
        debug_assert!(offset + len <= self.len);
        self.file.is_resident(self.position + offset, len)
    }
    fn read_range(&self, offset: u64, len: u64) -> io::Result<Bytes> {
        assert!(offset + len <= self.len, "a read within the range");
        let mut buf = vec![0u8; len as usize];
        read_exact_at(self.file.as_ref(), &mut buf, self.position + offset)?;
        Ok(Bytes::from(buf))
    }
}

pub type Response = Option<ResponseFrame<RecordsFile>>;

/// A handled request: its response, or (an `acks=all` produce whose appends are done) the
/// rest of it, which only waits for fsyncs and may overlap the connection's next requests.
pub enum Dispatched {
    Now(Response),
    Later(laminar_net::LaterFuture<RecordsFile>),
}

pub struct Broker {
    pub config: BrokerConfig,
    pub store: Arc<Store>,
    pub topics: Arc<Topics>,
    pub io: IoPool,
    pub storage: StoragePool,
    pub producers: Producers,
    pub groups: Coordinator,
    pub group_store: GroupStore,
    pub txns: crate::txn::TxnCoordinator,
    /// Woken after every append, for fetches waiting in long poll.
    pub data_arrived: Notify,
    pub advertised_host: String,
    pub advertised_port: u16,
    pub cluster_id: String,
    pub metrics: BrokerMetrics,
    pub quotas: Quotas,
    /// Partitions whose fetch reads are stuck on the disk, skipped until they return.
    pub stuck_reads: crate::handlers::fetch::StuckReads,
    /// Set in a cluster (`controller.quorum.voters`); `None` on a single node.
    pub cluster: Option<Arc<Cluster>>,
    /// In a cluster: the leader epoch of `__consumer_offsets-0` whose group state is loaded
    /// here (-1: none; this broker does not coordinate groups).
    pub groups_loaded_epoch: std::sync::atomic::AtomicI64,
    /// In a cluster: the leader epoch of `__transaction_state-0` whose transactions are
    /// loaded here (-1: none; this broker is not the transaction coordinator).
    pub txns_loaded_epoch: std::sync::atomic::AtomicI64,
}

impl Service for Broker {
    type File = RecordsFile;

    fn kind(&self, frame: &[u8]) -> RequestKind {
        match peek_header(frame).and_then(|(key, _, _)| ApiKey::from_i16(key)) {
            Some(api) => RequestKind {
                name: api.name(),
                phases: Some(self.metrics.phases(api)),
            },
            None => RequestKind {
                name: "an unknown request",
                phases: None,
            },
        }
    }

    fn call(self: Arc<Self>, frame: Bytes, peer: std::net::SocketAddr) -> HandlerFuture<RecordsFile> {
        Box::pin(async move {
            match self.dispatch(frame, peer).await {
                Ok(Dispatched::Now(response)) => Handled::Now(Ok(response)),
                Ok(Dispatched::Later(rest)) => Handled::Later(rest),
                Err(close) => Handled::Now(Err(close)),
            }
        })
    }
}

impl Broker {
    /// The leader epoch of a partition this broker leads, or the error code a client gets
    /// for it. On a single node every partition is led here, at epoch 0.
    pub fn leadership(&self, topic: &str, partition: i32) -> Result<i32, i16> {
        let Some(c) = &self.cluster else {
            return Ok(0);
        };
        if c.image().partition(topic, partition).is_none() {
            return Err(crate::error_codes::UNKNOWN_TOPIC_OR_PARTITION);
        }
        // Fenced, it may no longer lead (the controller moved its leaderships, or is about
        // to): it takes no writes and serves no reads.
        match c.replicas.get(topic, partition).and_then(|r| r.leader_epoch()) {
            Some(epoch) if !c.is_fenced() => Ok(epoch),
            _ => Err(crate::error_codes::NOT_LEADER_OR_FOLLOWER),
        }
    }

    /// Whether this broker coordinates groups now: in a cluster, it leads
    /// `__consumer_offsets-0` and has loaded the groups from it. The error code a group
    /// request gets if not.
    pub fn group_coordinator_ready(&self) -> Result<(), i16> {
        if self.cluster.is_none() {
            return Ok(());
        }
        match self.leadership(crate::groups::store::OFFSETS_TOPIC, 0) {
            Ok(epoch)
                if self
                    .groups_loaded_epoch
                    .load(std::sync::atomic::Ordering::Acquire)
                    == epoch as i64 =>
            {
                Ok(())
            }
            Ok(_) => Err(crate::error_codes::COORDINATOR_LOAD_IN_PROGRESS),
            Err(_) => Err(crate::error_codes::NOT_COORDINATOR),
        }
    }

    /// The transaction coordinator's epoch if this broker is it: in a cluster, the leader
    /// epoch of `__transaction_state-0`, led here with the transactions loaded from it; 0 on
    /// a single node. The error code a transaction request gets if not.
    pub fn txn_coordinator_epoch(&self) -> Result<i32, i16> {
        if self.cluster.is_none() {
            return Ok(0);
        }
        match self.leadership(crate::txn::log::TRANSACTION_TOPIC, 0) {
            Ok(epoch)
                if self.txns_loaded_epoch.load(std::sync::atomic::Ordering::Acquire) == epoch as i64 =>
            {
                Ok(epoch)
            }
            Ok(_) => Err(crate::error_codes::COORDINATOR_LOAD_IN_PROGRESS),
            Err(_) => Err(crate::error_codes::NOT_COORDINATOR),
        }
    }

    /// The transaction coordinator's log, `__transaction_state-0` (as a follower truncates
    /// it, it is reopened: looked up each time).
    pub fn txn_log(&self) -> Option<Arc<laminar_storage::Log>> {
        self.topics.log(crate::txn::log::TRANSACTION_TOPIC, 0)
    }

    /// What consumers may read of a partition led here: below its high watermark. On a
    /// single node, the whole log.
    pub fn high_watermark(
        &self,
        topic: &str,
        partition: i32,
        log: &laminar_storage::Log,
    ) -> laminar_storage::Offset {
        let end = log.log_end();
        match self
            .cluster
            .as_ref()
            .and_then(|c| c.replicas.get(topic, partition))
        {
            Some(r) => laminar_storage::Offset(r.high_watermark()).min(end),
            None => end,
        }
    }

    /// The broker the clients reach for `topic`'s partition 0 (the coordinators' logs), or
    /// `None` while it has no leader. On a single node, this broker.
    pub fn leader_of(&self, topic: &str) -> Option<(i32, String, u16)> {
        let Some(c) = &self.cluster else {
            return Some((
                self.config.node_id,
                self.advertised_host.clone(),
                self.advertised_port,
            ));
        };
        let image = c.image();
        let leader = image.partition(topic, 0)?.leader;
        let b = image.brokers.get(&leader).filter(|b| !b.fenced)?;
        Some((b.id, b.host.clone(), b.port))
    }

    /// Appends group records to the internal log, waits for their fsync, then applies them.
    /// Returns a Kafka error code.
    pub async fn persist_group_records(self: &Arc<Self>, records: Vec<GroupRecord>) -> i16 {
        if records.is_empty() {
            return crate::error_codes::NONE;
        }
        self.append_group_log(GroupWrite::Records(records)).await
    }

    /// Appends offsets committed in a transaction to the group log, in the producer's
    /// transactional batch, and waits until they are durable (and replicated); they are
    /// applied when the transaction's commit marker is written. Returns a Kafka error code.
    pub async fn persist_txn_offsets(
        self: &Arc<Self>,
        producer_id: i64,
        producer_epoch: i16,
        guard: Option<u64>,
        records: Vec<GroupRecord>,
    ) -> i16 {
        if records.is_empty() {
            return crate::error_codes::NONE;
        }
        self.append_group_log(GroupWrite::Transactional {
            producer_id,
            producer_epoch,
            guard,
            records,
        })
        .await
    }

    /// Makes the coordinator's own changes durable: group metadata that changed, expired
    /// offsets and groups that are gone (see `Coordinator::take_changes`).
    pub async fn persist_group_changes(self: &Arc<Self>) -> i16 {
        let retention = Duration::from_secs(self.config.offsets_retention_minutes * 60);
        self.append_group_log(GroupWrite::Changes(retention)).await
    }

    async fn append_group_log(self: &Arc<Self>, write: GroupWrite) -> i16 {
        // In a cluster, only the coordinator writes the group log, at its leader epoch, and a
        // write counts once the in-sync replicas hold it.
        let epoch = match self.group_coordinator_ready() {
            Ok(()) => self
                .leadership(crate::groups::store::OFFSETS_TOPIC, 0)
                .unwrap_or(0),
            Err(code) => return code,
        };
        let replica = self
            .cluster
            .as_ref()
            .and_then(|c| c.replicas.get(crate::groups::store::OFFSETS_TOPIC, 0));
        let b = self.clone();
        // What to write is settled on the storage thread, which appends every batch of the
        // group log in turn: there, what is appended but not yet applied (`pending`) is
        // exactly what precedes this batch in the log.
        let appended = self
            .storage
            .run(partition_key(crate::groups::store::OFFSETS_TOPIC, 0), move || {
                // Pending first, then memory: a record applied in between is in one of them.
                let pending = b.group_store.pending_view();
                let (records, apply, producer) = match write {
                    GroupWrite::Records(records) => (records, Apply::Now, None),
                    // Already applied to memory by `take_changes`.
                    GroupWrite::Changes(retention) => {
                        (b.groups.take_changes(retention, &pending), Apply::No, None)
                    }
                    GroupWrite::Transactional {
                        producer_id,
                        producer_epoch,
                        guard,
                        records,
                    } => {
                        // As a transactional produce is checked: not from a fenced epoch (a
                        // marker with a newer one was written here), and, when it was only
                        // verified, not after a marker of its own epoch ended the transaction.
                        let (t, p) = (crate::groups::store::OFFSETS_TOPIC, 0);
                        if b.producers
                            .epoch(t, p, producer_id)
                            .is_some_and(|e| e > producer_epoch)
                        {
                            return Err(GroupLogError::Refused(crate::error_codes::INVALID_PRODUCER_EPOCH));
                        }
                        if guard.is_some_and(|token| {
                            !b.producers.guarded(t, p, producer_id, producer_epoch, token)
                        }) {
                            return Err(GroupLogError::Refused(crate::error_codes::INVALID_TXN_STATE));
                        }
                        (
                            records,
                            Apply::AtMarker(producer_id),
                            Some((producer_id, producer_epoch)),
                        )
                    }
                };
                if records.is_empty() {
                    return Ok(None);
                }
                let mut batch = GroupStore::encode(&records, &b.groups, &pending, producer)
                    .map_err(|e| GroupLogError::Encode(e.to_string()))?;
                // On the storage thread, where a fetcher would append: still the leader?
                if b.group_coordinator_ready().is_err() {
                    return Err(GroupLogError::NotCoordinator);
                }
                let log = b.group_store.log();
                let info = log.append_as(&mut batch, laminar_storage::AppendMode::Leader { epoch })?;
                let apply = match apply {
                    Apply::Now => {
                        // In log order: before any later batch exists.
                        b.group_store
                            .pending
                            .lock()
                            .unwrap()
                            .insert(info.last_offset, records);
                        None
                    }
                    Apply::No => None,
                    Apply::AtMarker(producer_id) => {
                        // In log order, before its marker can be appended.
                        b.group_store.add_txn_offsets(producer_id, records);
                        Some(())
                    }
                };
                Ok::<_, GroupLogError>(Some((info, apply)))
            })
            .await;
        let durable = match appended {
            Ok(Ok(None)) => return crate::error_codes::NONE,
            Ok(Ok(Some((info, apply)))) => {
                if let Some(r) = &replica {
                    r.on_leader_append(info.log_end.0);
                }
                let flushed = laminar_net::waiting(self.group_store.flushed(info.last_offset))
                    .await
                    .map(|_| (info.last_offset, apply))
                    .map_err(|e| e.to_string());
                match (&flushed, &replica) {
                    (Ok(_), Some(r))
                        if !r
                            .wait_replicated(info.last_offset.0, epoch, GROUP_WRITE_REPLICATION)
                            .await =>
                    {
                        return crate::error_codes::REQUEST_TIMED_OUT
                    }
                    _ => flushed,
                }
            }
            Ok(Err(GroupLogError::Encode(e))) => {
                crate::warn!("group records refused: {e}");
                return crate::error_codes::INVALID_REQUEST;
            }
            Ok(Err(GroupLogError::NotCoordinator)) => return crate::error_codes::NOT_COORDINATOR,
            Ok(Err(GroupLogError::Refused(code))) => return code,
            Ok(Err(e)) => Err(e.to_string()),
            Err(panicked) => Err(panicked.to_string()),
        };
        match durable {
            Ok((last, txn)) => {
                // A transaction's offsets wait for its marker.
                if txn.is_none() {
                    self.group_store.apply_durable(&self.groups, last);
                }
                crate::error_codes::NONE
            }
            Err(e) => {
                crate::warn!("persisting group records: {e}");
                crate::error_codes::KAFKA_STORAGE_ERROR
            }
        }
    }

    async fn dispatch(
        self: Arc<Self>,
        frame: Bytes,
        peer: std::net::SocketAddr,
    ) -> Result<Dispatched, CloseConnection> {
        let (key, version, correlation_id) =
            peek_header(&frame).ok_or_else(|| CloseConnection("request shorter than its header".into()))?;
        let Some(api) = ApiKey::from_i16(key) else {
            // Kafka closes the connection on an unknown API key; so do we, with a reason.
            return Err(CloseConnection(format!("unknown API key {key}")));
        };
        if !api.supports(version) {
            if api == ApiKey::ApiVersions {
                return Ok(Dispatched::Now(Some(ResponseFrame::from_bytes(
                    responses::api_versions_unsupported(correlation_id),
                ))));
            }
            return Err(CloseConnection(format!("{api:?} v{version} is not supported")));
        }
        if trace_requests() {
            eprintln!("TRACE api {api:?} v{version}");
        }
        let (header, request) = match requests::decode(frame) {
            Ok(r) => r,
            Err(
                e @ (ProtocolError::Truncated { .. }
                | ProtocolError::CountTooLarge { .. }
                | ProtocolError::Malformed(_)),
            ) => {
                return Err(CloseConnection(format!(
                    "malformed {api:?} v{version} request: {e}"
                )));
            }
            Err(e) => return Err(CloseConnection(e.to_string())),
        };
        let b = &self;
        let v = version;
        let c = header.correlation_id;
        if let Err(code) = b.group_coordinator_ready() {
            if let Some(refused) = handlers::not_coordinator::refuse(&request, v, c, code) {
                return refused
                    .map(|bytes| Dispatched::Now(Some(ResponseFrame::from_bytes(bytes))))
                    .map_err(|e| CloseConnection(format!("encoding {api:?} v{version} response: {e}")));
            }
        }
        let client_id = header.client_id.as_deref().unwrap_or("");
        let encoded = match request {
            Request::ApiVersions(r) => handlers::api_versions::handle(b, v, c, r),
            Request::Metadata(r) => handlers::metadata::handle(b, v, c, r).await,
            Request::Produce(r) => return handlers::produce::handle(b, v, c, client_id, r).await,
            Request::Fetch(r) => {
                return Ok(Dispatched::Now(Some(
                    handlers::fetch::handle(b, v, c, client_id, r).await,
                )))
            }
            Request::ListOffsets(r) => handlers::list_offsets::handle(b, v, c, r).await,
            Request::CreateTopics(r) => handlers::create_topics::handle(b, v, c, r).await,
            Request::DeleteTopics(r) => handlers::delete_topics::handle(b, v, c, r).await,
            Request::InitProducerId(r) => handlers::init_producer_id::handle(b, v, c, r).await,
            Request::DescribeConfigs(r) => handlers::describe_configs::handle(b, v, c, r),
            Request::CreatePartitions(r) => handlers::create_partitions::handle(b, v, c, r).await,
            Request::FindCoordinator(r) => handlers::find_coordinator::handle(b, v, c, r),
            Request::JoinGroup(r) => {
                handlers::join_group::handle(b, v, c, client_id, &format!("/{}", peer.ip()), r).await
            }
            Request::SyncGroup(r) => handlers::sync_group::handle(b, v, c, r).await,
            Request::Heartbeat(r) => handlers::heartbeat::handle(b, v, c, r),
            Request::LeaveGroup(r) => handlers::leave_group::handle(b, v, c, r),
            Request::OffsetCommit(r) => handlers::offset_commit::handle(b, v, c, r).await,
            Request::OffsetFetch(r) => handlers::offset_fetch::handle(b, v, c, r),
            Request::ListGroups(r) => handlers::list_groups::handle(b, v, c, r),
            Request::DescribeGroups(r) => handlers::describe_groups::handle(b, v, c, r),
            Request::DeleteGroups(r) => handlers::delete_groups::handle(b, v, c, r).await,
            Request::OffsetDelete(r) => handlers::offset_delete::handle(b, v, c, r).await,
            Request::DescribeClientQuotas(r) => handlers::describe_client_quotas::handle(b, v, c, r),
            Request::AlterClientQuotas(r) => handlers::alter_client_quotas::handle(b, v, c, r).await,
            Request::DescribeLogDirs(r) => handlers::describe_log_dirs::handle(b, v, c, r).await,
            Request::DeleteRecords(r) => handlers::delete_records::handle(b, v, c, r).await,
            Request::DescribeCluster(r) => handlers::describe_cluster::handle(b, v, c, r),
            Request::OffsetForLeaderEpoch(r) => handlers::offset_for_leader_epoch::handle(b, v, c, r),
            Request::AlterConfigs(r) => handlers::alter_configs::handle(b, v, c, r).await,
            Request::ElectLeaders(r) => handlers::elect_leaders::handle(b, v, c, r).await,
            Request::DescribeProducers(r) => handlers::describe_producers::handle(b, v, c, r),
            Request::AlterPartitionReassignments(r) => {
                handlers::alter_partition_reassignments::handle(b, v, c, r).await
            }
            Request::ListPartitionReassignments(r) => {
                handlers::list_partition_reassignments::handle(b, v, c, r)
            }
            Request::AddPartitionsToTxn(r) => handlers::add_partitions_to_txn::handle(b, v, c, r).await,
            Request::AddOffsetsToTxn(r) => handlers::add_offsets_to_txn::handle(b, v, c, r).await,
            Request::EndTxn(r) => handlers::end_txn::handle(b, v, c, r).await,
            Request::TxnOffsetCommit(r) => handlers::txn_offset_commit::handle(b, v, c, r).await,
            Request::WriteTxnMarkers(r) => handlers::write_txn_markers::handle(b, v, c, r).await,
            Request::DescribeTransactions(r) => handlers::describe_transactions::handle(b, v, c, r),
            Request::ListTransactions(r) => handlers::list_transactions::handle(b, v, c, r),
        };
        encoded
            .map(|bytes| Dispatched::Now(Some(ResponseFrame::from_bytes(bytes))))
            .map_err(|e| CloseConnection(format!("encoding {api:?} v{version} response: {e}")))
    }
}

/// `LAMINAR_TRACE` set: print every request's API and version. Read once: `getenv` on every
/// request took measurable time on the socket threads.
fn trace_requests() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("LAMINAR_TRACE").is_some())
}

/// What `append_group_log` writes.
enum GroupWrite {
    /// Records of a request (a commit, a deletion), applied to memory once durable.
    Records(Vec<GroupRecord>),
    /// The coordinator's own changes, taken with this offsets retention.
    Changes(Duration),
    /// Offsets committed in a producer's transaction (TxnOffsetCommit): written in its
    /// transactional batch, applied when its commit marker is.
    Transactional {
        producer_id: i64,
        producer_epoch: i16,
        /// The verification guard set before the transaction coordinator was asked, when it
        /// was only asked whether the group log's partition is in the transaction.
        guard: Option<u64>,
        records: Vec<GroupRecord>,
    },
}

/// When the records of a group write reach memory.
enum Apply {
    /// Once durable, in log order.
    Now,
    /// Never: already there.
    No,
    /// At the marker of this producer's transaction (`GroupStore::end_txn_offsets`).
    AtMarker(i64),
}

#[derive(Debug, thiserror::Error)]
enum GroupLogError {
    #[error("{0}")]
    Encode(String),
    /// In a cluster: this broker stopped leading the group log before the append.
    #[error("no longer the group coordinator")]
    NotCoordinator,
    /// A transaction's offsets that may not be written (a Kafka error code).
    #[error("refused with error code {0}")]
    Refused(i16),
    #[error(transparent)]
    Storage(#[from] laminar_storage::StorageError),
}

/// A broker that is listening.
pub struct RunningBroker {
    pub broker: Arc<Broker>,
    server: ServerHandle,
    retention: tokio::task::JoinHandle<()>,
    producer_expiry: tokio::task::JoinHandle<()>,
    group_timer: tokio::task::JoinHandle<()>,
    group_writer: tokio::task::JoinHandle<()>,
    txn_timer: tokio::task::JoinHandle<()>,
    /// In a cluster: the task that applies each new image to this broker's logs (first:
    /// it runs on while the broker leaves), the heartbeats to the controller and the ISR
    /// checks.
    cluster_tasks: Vec<tokio::task::JoinHandle<()>>,
    metrics_server: Option<(std::net::SocketAddr, tokio::task::JoinHandle<()>)>,
}

/// How long a group write waits for the in-sync replicas (Kafka's
/// `offsets.commit.timeout.ms`).
const GROUP_WRITE_REPLICATION: Duration = Duration::from_secs(5);

/// How often session and rebalance timeouts are checked.
const GROUP_TICK_MS: u64 = 50;

impl RunningBroker {
    /// Opens the store (recovering it if needed), binds the listener and starts serving.
    /// Must be called inside a multi-threaded tokio runtime.
    pub async fn start(config: BrokerConfig) -> io::Result<RunningBroker> {
        if config.queued_max_request_bytes < config.socket_request_max_bytes {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "queued.max.request.bytes ({}) must be at least socket.request.max.bytes ({}), \
                     or the largest frames could never be read",
                    config.queued_max_request_bytes, config.socket_request_max_bytes
                ),
            ));
        }
        let listener = TcpListener::bind(config.listen).await?;
        let bound = listener.local_addr()?;
        let metrics_listener = match config.metrics_listen {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .await
                    .map_err(|e| io::Error::new(e.kind(), format!("metrics.listeners {addr}: {e}")))?,
            ),
            None => None,
        };
        let (advertised_host, advertised_port) = config.advertised(bound);
        let cluster = if config.controller_quorum_voters.is_empty() {
            None
        } else {
            let voters = config.controller_quorum_voters.clone();
            let node_id = config.node_id;
            let dir = config.data_dir.clone();
            let settings = ClusterSettings {
                broker_session_timeout: Duration::from_millis(config.broker_session_timeout_ms),
                broker_heartbeat_interval: Duration::from_millis(config.broker_heartbeat_interval_ms),
                offsets_topic_segment_bytes: config.offsets_topic_segment_bytes,
                transaction_state_log_segment_bytes: config.transaction_state_log_segment_bytes,
                leader_imbalance_check_interval: config
                    .auto_leader_rebalance_enable
                    .then(|| Duration::from_secs(config.leader_imbalance_check_interval_seconds)),
            };
            let started =
                tokio::task::spawn_blocking(move || Cluster::start(node_id, voters, &dir, settings))
                    .await
                    .expect("controller start task");
            Some(started.map_err(io::Error::other)?)
        };
        let cfg = config.clone();
        let (store, topics, producers, groups, group_store, quotas, was_empty, txns) =
            tokio::task::spawn_blocking(move || -> io::Result<_> {
                let mut storage: Arc<dyn Storage> = RealStorage::new();
                if let Some(f) = &cfg.faults {
                    storage = f.clone();
                }
                let store_config = StoreConfig {
                    cleaner: CleanerConfig {
                        enabled: cfg.log_cleaner_enable,
                        threads: cfg.log_cleaner_threads,
                        backoff_ms: cfg.log_cleaner_backoff_ms,
                        limits: PassLimits {
                            dedupe_buffer_bytes: cfg.log_cleaner_dedupe_buffer_size,
                            io_buffer_bytes: cfg.log_cleaner_io_buffer_size,
                            io_max_bytes_per_s: cfg.log_cleaner_io_max_bytes_per_second,
                        },
                    },
                    ..StoreConfig::default()
                };
                let store = Store::open(&cfg.data_dir, storage, store_config).map_err(io::Error::other)?;
                store.set_cleaner_events(Arc::new(|event| match event {
                    CleanerEvent::Cleaned { log, stats } => crate::info!(
                        "cleaned {log}: offsets {} to {} mapped, {} records removed, {} of {} segments left, {} bytes read, {} written, in {:?}",
                        stats.first_dirty,
                        stats.end,
                        stats.records_removed,
                        stats.segments_after,
                        stats.segments_before,
                        stats.bytes_read,
                        stats.bytes_written,
                        stats.elapsed
                    ),
                    CleanerEvent::Failed { log, error } => {
                        crate::warn!("cleaning {log} failed (it waits log.cleaner.backoff.ms): {error}")
                    }
                }));
                let store = Arc::new(store);
                for (id, log) in store.logs() {
                    let r = log.recovery_report();
                    if let Some((offset, pos, reason)) = &r.truncated_at {
                        crate::warn!("recovered {id}: truncated at offset {offset} ({pos}): {reason}");
                    }
                }
                // Before the topics registry creates `__consumer_offsets` in a new directory.
                let was_empty = store.logs().is_empty();
                let topics = Topics::open(store.clone(), cfg.clone())?;
                let quotas = Quotas::open(store.clone())?;
                let producers = if cfg.controller_quorum_voters.is_empty() {
                    Producers::new()
                } else {
                    Producers::for_node(cfg.node_id)
                };
                for t in topics.list() {
                    for p in 0..t.partitions as i32 {
                        if let Some(log) = topics.log(&t.name, p) {
                            if let Err(e) = producers.rebuild_from_log(&t.name, p, &log) {
                                crate::warn!("rebuilding producer state of {}-{p}: {e}", t.name);
                            }
                        }
                    }
                }
                let group_store = GroupStore::open(&store).map_err(io::Error::other)?;
                let groups = Coordinator::new(Duration::from_millis(cfg.group_initial_rebalance_delay_ms));
                let replayed = group_store.replay(&groups).map_err(io::Error::other)?;
                if replayed > 0 {
                    crate::info!("restored {replayed} group records");
                }
                let txn_log = store
                    .log(&laminar_storage::LogId::new(crate::txn::log::TRANSACTION_TOPIC, 0))
                    .ok_or_else(|| io::Error::other("__transaction_state-0 does not exist"))?;
                // In a cluster, read when this broker becomes the log's leader.
                let txns = if cfg.controller_quorum_voters.is_empty() {
                    let restored = crate::txn::log::replay(&txn_log).map_err(io::Error::other)?;
                    if !restored.is_empty() {
                        crate::info!("restored {} transactional ids", restored.len());
                    }
                    crate::txn::TxnCoordinator::new(restored.into_values())
                } else {
                    crate::txn::TxnCoordinator::new([])
                };
                Ok((
                    store,
                    Arc::new(topics),
                    producers,
                    groups,
                    group_store,
                    quotas,
                    was_empty,
                    txns,
                ))
            })
            .await
            .expect("startup task")?;
        crate::info!(
            "laminar listening on {bound} (advertised {advertised_host}:{advertised_port}), data in {}: {}",
            config.data_dir.display(),
            if store.opened_clean() {
                "started after a clean shutdown"
            } else if was_empty {
                "new or empty data directory"
            } else {
                "recovered after an unclean shutdown"
            }
        );
        let residency = laminar_storage::residency::describe();
        if laminar_storage::residency::method() == laminar_storage::residency::Method::Cachestat {
            crate::info!("{residency}");
        } else {
            crate::warn!("{residency}");
        }
        if laminar_storage::backend::noatime_refused() {
            crate::warn!(
                "some log files could not be opened with O_NOATIME (this user does not own them): \
                 reading data written since its last read updates the file's access time, a \
                 journal write that can stall a socket thread; run as their owner or mount the \
                 data directory with noatime"
            );
        }
        crate::info!("settings in effect:\n{}", config.describe());
        let broker = Arc::new(Broker {
            io: IoPool::new(config.num_io_threads),
            storage: StoragePool::new(config.num_storage_threads),
            producers,
            groups,
            group_store,
            txns,
            data_arrived: Notify::new(),
            cluster_id: "laminar-cluster".to_string(),
            advertised_host,
            advertised_port,
            store,
            topics,
            config: config.clone(),
            metrics: BrokerMetrics::default(),
            quotas,
            stuck_reads: Default::default(),
            cluster,
            groups_loaded_epoch: std::sync::atomic::AtomicI64::new(-1),
            txns_loaded_epoch: std::sync::atomic::AtomicI64::new(-1),
        });
        let limits = ServerLimits {
            max_connections: laminar_net::open_files::fit_connections(config.max_connections),
            max_inflight_requests_per_connection: config.max_inflight_requests_per_connection,
            socket_request_max_bytes: config.socket_request_max_bytes,
            queued_max_request_bytes: config.queued_max_request_bytes,
            socket_send_chunk_bytes: config.socket_send_chunk_bytes,
            socket_send_buffer_bytes: config.socket_send_buffer_bytes,
            max_connection_creation_rate: config.max_connection_creation_rate,
            event_loop_stall_threshold: Duration::from_millis(config.event_loop_stall_threshold_ms),
            cold_reads_inline: config.cold_reads_inline,
        };
        let server = laminar_net::serve(
            listener,
            broker.clone(),
            limits,
            broker.io.clone(),
            broker.metrics.net.clone(),
        );
        let metrics_server = match metrics_listener {
            Some(l) => {
                let addr = l.local_addr()?;
                crate::info!("metrics on http://{addr}/metrics");
                Some((addr, crate::metrics::http::serve(l, broker.clone())))
            }
            None => None,
        };
        let b = broker.clone();
        let retention = tokio::spawn(async move {
            let interval = Duration::from_millis(b.config.log_retention_check_interval_ms);
            loop {
                tokio::time::sleep(interval).await;
                let store = b.store.clone();
                let deleted =
                    b.io.run(move || store.apply_retention(laminar_storage::now_ms()))
                        .await;
                if deleted > 0 {
                    crate::info!("retention deleted {deleted} segments");
                }
            }
        });
        let b = broker.clone();
        let producer_expiry = tokio::spawn(async move {
            let interval = Duration::from_millis(b.config.producer_id_expiration_check_interval_ms);
            loop {
                tokio::time::sleep(interval).await;
                let expired = b
                    .producers
                    .expire(laminar_storage::now_ms(), b.config.producer_id_expiration_ms);
                if expired > 0 {
                    crate::info!("forgot {expired} expired idempotent producer states");
                }
            }
        });
        let b = broker.clone();
        let group_timer = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(GROUP_TICK_MS)).await;
                b.groups.tick();
            }
        });
        let b = broker.clone();
        // Apart from the timer, so that a slow disk delays only the writing of group
        // metadata and expiries, never the session timeouts.
        let group_writer = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(GROUP_TICK_MS)).await;
                b.persist_group_changes().await;
            }
        });
        // Transactions found prepared were decided before the stop: end them now.
        for prepared in broker.txns.prepared() {
            crate::info!(
                "completing transaction {:?} ({}) decided before the restart",
                prepared.transactional_id,
                prepared.status.name()
            );
            tokio::spawn(crate::txn::complete::complete(broker.clone(), prepared, 0));
        }
        let b = broker.clone();
        let txn_timer = tokio::spawn(async move {
            let interval = Duration::from_millis(
                b.config
                    .transaction_abort_timed_out_transaction_cleanup_interval_ms,
            );
            loop {
                tokio::time::sleep(interval).await;
                crate::txn::complete::abort_timed_out(&b).await;
                crate::txn::complete::expire_ids(&b).await;
            }
        });
        let mut cluster_tasks = Vec::new();
        if let Some(c) = &broker.cluster {
            cluster_tasks.push(tokio::spawn(crate::cluster::publish::run(
                broker.clone(),
                c.subscribe(),
            )));
            cluster_tasks.push(tokio::spawn(
                c.clone()
                    .run_heartbeats(broker.advertised_host.clone(), broker.advertised_port),
            ));
            cluster_tasks
                .push(tokio::spawn(c.clone().run_isr_checks(Duration::from_millis(
                    config.replica_lag_time_max_ms,
                ))));
        }
        Ok(RunningBroker {
            broker,
            server,
            retention,
            producer_expiry,
            group_timer,
            group_writer,
            txn_timer,
            cluster_tasks,
            metrics_server,
        })
    }

    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.server.local_addr
    }

    /// Where `GET /metrics` is served, unless `metrics.listeners` is `none`.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics_server.as_ref().map(|(a, _)| *a)
    }

    /// Clean shutdown: stop accepting, finish the requests in flight, flush every log and
    /// write the clean-shutdown marker.
    pub async fn shutdown(self) -> io::Result<()> {
        // The heartbeats stop (one would unfence this broker again) but images are still
        // applied while it leaves: its leaderships move first, as Kafka's controlled shutdown.
        for task in self.cluster_tasks.iter().skip(1) {
            task.abort();
        }
        if let Some(c) = &self.broker.cluster {
            c.leave(&self.broker.advertised_host, self.broker.advertised_port)
                .await;
        }
        for task in &self.cluster_tasks {
            task.abort();
        }
        self.retention.abort();
        self.producer_expiry.abort();
        self.group_timer.abort();
        self.group_writer.abort();
        self.txn_timer.abort();
        if let Some((_, task)) = &self.metrics_server {
            task.abort();
        }
        // Requests in flight finish; those waiting on a rebalance are answered now.
        self.broker.groups.shutdown();
        self.server.shutdown().await;
        // The group changes since the writer's last round, the requests just finished
        // included. (A round the abort cut short either appended already or took nothing:
        // the taking happens on the storage thread, with the append.)
        let persisted = self.broker.persist_group_changes().await;
        if persisted != crate::error_codes::NONE && persisted != crate::error_codes::NOT_COORDINATOR {
            crate::warn!("the last group changes were not written: the next start restores older ones");
        }
        let store = self.broker.store.clone();
        tokio::task::spawn_blocking(move || store.close())
            .await
            .expect("close task")
            .map_err(io::Error::other)?;
        crate::info!("laminar stopped cleanly");
        Ok(())
    }
}
