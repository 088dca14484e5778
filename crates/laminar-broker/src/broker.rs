//! The broker's shared state, and what it answers about leadership. The request dispatch
//! is in `dispatch.rs`, startup and shutdown in `startup.rs`, the group log's writes in
//! `groups/write.rs`.

use laminar_protocol::ErrorCode;
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

use bytes::Bytes;
use laminar_protocol::responses::{FileSlice, ResponseFrame};
use laminar_storage::backend::{read_exact_at, StorageFile};
use laminar_storage::Store;
use tokio::sync::Notify;

use crate::changes::MetadataChanges;
use crate::config::BrokerConfig;
use crate::groups::write::Groups;
use crate::metrics::BrokerMetrics;
use crate::quotas::Quotas;
use crate::topics::Topics;
use laminar_cluster::{Cluster, LeaderEpoch};
use laminar_data::partition::LedPartition;

use crate::txn::service::Txns;
use laminar_data::partition::Partitions;
use laminar_data::producers::ProducerIds;
use laminar_data::storage_pool::StoragePool;
use laminar_net::{IoPool, SendFile};

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
    pub storage: Arc<StoragePool>,
    /// The partitions placed here: each with its log, replica state and producers' state.
    pub partitions: Arc<Partitions>,
    pub producer_ids: Arc<ProducerIds>,
    /// The group coordinator: its state, its log, its hold on `__consumer_offsets-0`.
    pub groups: Arc<Groups>,
    /// The transaction coordinator: its state, its hold on `__transaction_state-0`.
    pub txns: Arc<Txns>,
    /// Woken after every append, for fetches waiting in long poll.
    pub data_arrived: Arc<Notify>,
    pub advertised_host: String,
    pub advertised_port: u16,
    pub cluster_id: String,
    pub metrics: BrokerMetrics,
    pub quotas: Quotas,
    /// Partitions whose fetch reads are stuck on the disk, skipped until they return.
    pub stuck_reads: crate::stuck_reads::StuckReads,
    /// The cluster: several brokers under a controller quorum, or a single node, a quorum of
    /// one voter (itself).
    pub cluster: Arc<Cluster>,
    /// How far this broker has applied the cluster metadata.
    pub applied: crate::applied::AppliedImages,
}

impl Broker {
    /// The leader epoch of a partition this broker leads, or the error code a client gets
    /// for it.
    pub fn leadership(&self, topic: &str, partition: i32) -> Result<LeaderEpoch, ErrorCode> {
        self.partitions.leadership(topic, partition)
    }

    /// A partition this broker leads, with its log: what a read or a write of it works on.
    pub fn led(&self, topic: &str, partition: i32) -> Result<LedPartition, ErrorCode> {
        self.partitions.led(topic, partition)
    }

    /// Whether this broker coordinates groups now: it leads `__consumer_offsets-0` and has
    /// loaded the groups from it. The error code a group request gets if not.
    pub fn group_coordinator_ready(&self) -> Result<(), ErrorCode> {
        self.groups.ready()
    }

    /// The transaction coordinator's epoch if this broker is it: the leader epoch of
    /// `__transaction_state-0`, led here with the transactions loaded from it. The error code
    /// a transaction request gets if not.
    pub fn txn_coordinator_epoch(&self) -> Result<i32, ErrorCode> {
        self.txns.epoch()
    }

    /// What a handler that changes the cluster metadata works with.
    pub fn changes(&self) -> MetadataChanges<'_> {
        MetadataChanges {
            cluster: &self.cluster,
            applied: &self.applied,
            topics: &self.topics,
            config: &self.config,
        }
    }

    /// The transaction coordinator's log, `__transaction_state-0` (as a follower truncates
    /// it, it is reopened: looked up each time).
    pub fn txn_log(&self) -> Option<Arc<laminar_storage::Log>> {
        self.txns.log()
    }
}
