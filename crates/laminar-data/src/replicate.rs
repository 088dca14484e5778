//! A partition leader's one replicate path, used by every write a leader makes: produce, the
//! group log (`__consumer_offsets`), the transaction log (`__transaction_state`) and the
//! transaction markers.
//!
//! After a write is appended on the partition's storage thread, [`LeaderWrite::appended`]
//! lets the high watermark follow (alone in the ISR) and wakes the fetches waiting for data.
//! A write that must be durable then waits ([`Durable::wait`]) for the fsync that covers it
//! here and, in a cluster, for every in-sync replica to have it on its disk (the high
//! watermark passing it), at the leader epoch it was appended at. What went wrong is one of
//! three [`ReplicateError`]s, whichever write it was; each API turns them into its own
//! Kafka error codes in one place ([`ReplicateError::partition_code`],
//! [`ReplicateError::coordinator_code`]), as Kafka's produce path and its coordinators do.

use std::sync::Arc;
use std::time::Duration;

use laminar_storage::{FlushWait, Log, Offset};
use tokio::sync::Notify;

use laminar_cluster::replica::Replica;
use laminar_cluster::LeaderEpoch;
use laminar_protocol::ErrorCode;

/// A write to a partition this broker leads, at the leader epoch it was checked at.
pub struct LeaderWrite {
    /// The leader epoch the write is appended at.
    pub epoch: LeaderEpoch,
    /// The partition's replica state (`None` only in unit tests of this path alone).
    replica: Option<Arc<Replica>>,
    /// The partition's fetches waiting in long poll ([`crate::partition::Partition::arrived`]).
    arrived: Arc<Notify>,
}

/// Why a leader's write did not become durable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicateError {
    /// The fsync failed: the log is offline.
    #[error("the log is offline: {0}")]
    Storage(String),
    /// This broker stopped leading the partition (or was fenced) before every in-sync
    /// replica had the write.
    #[error("leadership moved before the in-sync replicas had the write")]
    NotLeader,
    /// The in-sync replicas did not have the write in time.
    #[error("the in-sync replicas did not have the write within {0:?}")]
    Timeout(Duration),
}

impl ReplicateError {
    /// The code a partition's write answers with (Produce, WriteTxnMarkers).
    pub fn partition_code(&self) -> ErrorCode {
        match self {
            ReplicateError::Storage(_) => ErrorCode::KafkaStorageError,
            ReplicateError::NotLeader => ErrorCode::NotLeaderOrFollower,
            ReplicateError::Timeout(_) => ErrorCode::RequestTimedOut,
        }
    }

    /// The code a coordinator's write to its log answers with (the group and transaction
    /// coordinators), as Kafka maps its log's append errors: the client looks for the
    /// coordinator again, or retries the same one later.
    pub fn coordinator_code(&self) -> ErrorCode {
        match self {
            ReplicateError::Storage(_) | ReplicateError::NotLeader => ErrorCode::NotCoordinator,
            ReplicateError::Timeout(_) => ErrorCode::CoordinatorNotAvailable,
        }
    }
}

/// A durable write's wait, started right after its append (so that the flusher is asked at
/// once: group commit) and awaited when the answer is due.
pub struct Durable {
    flush: FlushWait,
    last: Offset,
    write: LeaderWrite,
    timeout: Duration,
    /// The timeout's end, from the append: the wait may be polled later (a produce's, once
    /// the connection's earlier responses are sent).
    deadline: tokio::time::Instant,
}

/// A write durable here and on every in-sync replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replicated {
    /// In a cluster, how many replicas were in sync once it was replicated (the ISR may
    /// have shrunk after the append).
    pub isr_len: Option<usize>,
}

impl LeaderWrite {
    pub fn new(epoch: LeaderEpoch, replica: Option<Arc<Replica>>, arrived: Arc<Notify>) -> LeaderWrite {
        LeaderWrite {
            epoch,
            replica,
            arrived,
        }
    }

    /// The replica state, in a cluster.
    pub fn replica(&self) -> Option<&Arc<Replica>> {
        self.replica.as_ref()
    }

    /// Right after the append (on the partition's storage thread or just after it): the
    /// high watermark follows the log end when the leader is alone in sync, and the fetches
    /// waiting in long poll on this partition (on it alone) look again.
    pub fn appended(&self, log_end: Offset) {
        if let Some(r) = &self.replica {
            r.on_leader_append(log_end);
        }
        self.arrived.notify_waiters();
    }

    /// Starts waiting for `last` (the write's last offset) to be durable: fsynced here, then
    /// (in a cluster) replicated, for at most `timeout`.
    pub fn durable(self, log: &Log, last: Offset, timeout: Duration) -> Durable {
        Durable {
            flush: log.wait_flushed(last),
            last,
            write: self,
            timeout,
            deadline: tokio::time::Instant::now() + timeout,
        }
    }
}

impl Durable {
    pub async fn wait(self) -> Result<Replicated, ReplicateError> {
        laminar_net::waiting(self.flush)
            .await
            .map_err(|e| ReplicateError::Storage(e.to_string()))?;
        let Some(replica) = &self.write.replica else {
            return Ok(Replicated { isr_len: None });
        };
        let waited = replica.wait_replicated(self.last, self.write.epoch, self.deadline);
        if laminar_net::waiting(waited).await {
            Ok(Replicated {
                isr_len: Some(replica.isr().map_or(0, |isr| isr.len())),
            })
        } else if replica.leader_epoch() != Some(self.write.epoch) {
            Err(ReplicateError::NotLeader)
        } else {
            Err(ReplicateError::Timeout(self.timeout))
        }
    }
}

#[cfg(test)]
mod tests {
    //! Produce, the group log, the transaction log and the markers all wait through
    //! [`LeaderWrite`]: what happens to one write here happens to each of them.

    use std::time::Instant;

    use laminar_records::{BatchBuilder, Compression, RecordSpec};
    use laminar_storage::backend::RealStorage;
    use laminar_storage::{AppendMode, LogConfig, LogId, Store, StoreConfig};

    use super::*;
    use laminar_cluster::image::{BrokerId, PartitionInfo};
    use laminar_cluster::replica::Replicas;

    const NODE: i32 = 1;

    fn placement(leader: i32, leader_epoch: i32) -> PartitionInfo {
        PartitionInfo {
            replicas: vec![BrokerId(1), BrokerId(2)],
            leader: BrokerId(leader),
            leader_epoch: LeaderEpoch(leader_epoch),
            isr: vec![BrokerId(1), BrokerId(2)],
            partition_epoch: leader_epoch,
            adding: vec![],
            removing: vec![],
            offline: vec![],
        }
    }

    fn batch() -> Vec<u8> {
        let mut b = BatchBuilder::new(Compression::None, 0);
        b.push(RecordSpec {
            timestamp_ms: 0,
            key: None,
            value: Some(b"v".to_vec()),
            headers: vec![],
        });
        b.build().unwrap()
    }

    /// A leader of partition `t-0` at epoch 5 with a follower (2) in its ISR that never
    /// fetches, and one write appended at that epoch.
    fn leader_with_a_write(dir: &std::path::Path) -> (Store, Arc<Log>, Replicas, LeaderWrite, Offset) {
        let store = Store::open(dir, RealStorage::new(), StoreConfig::default()).unwrap();
        let log = store
            .create_log(&LogId::new("t", 0), LogConfig::default())
            .unwrap();
        let replicas = Replicas::new(laminar_cluster::BrokerId(NODE));
        replicas.apply("t", 0, Some(&placement(NODE, 5)), false, Offset(0));
        let replica = replicas.get("t", 0).unwrap();
        replica.start_serving();
        let write = LeaderWrite::new(LeaderEpoch(5), Some(replica), Arc::default());
        let info = log
            .append_as(&mut batch(), AppendMode::Leader { epoch: 5 })
            .unwrap();
        write.appended(info.log_end);
        (store, log, replicas, write, info.last_offset)
    }

    #[tokio::test]
    async fn a_write_whose_leadership_moves_before_it_is_replicated_answers_not_leader() {
        let dir = tempfile::tempdir().unwrap();
        let (_store, log, replicas, write, last) = leader_with_a_write(dir.path());
        let started = Instant::now();
        let waiting = tokio::spawn(write.durable(&log, last, Duration::from_secs(30)).wait());
        // Fsynced here, but follower 2 has not fetched it; the controller moves the
        // leadership to 2 at epoch 6.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!waiting.is_finished(), "replicated without the follower");
        replicas.apply("t", 0, Some(&placement(2, 6)), false, log.log_end());
        let result = waiting.await.unwrap();
        assert_eq!(result, Err(ReplicateError::NotLeader));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "answered when the leadership moved, not at the timeout"
        );
        let e = result.unwrap_err();
        // Produce and the markers: the client (or the coordinator) goes to the new leader.
        assert_eq!(e.partition_code(), ErrorCode::NotLeaderOrFollower);
        // The group and transaction logs: the client looks for the new coordinator.
        assert_eq!(e.coordinator_code(), ErrorCode::NotCoordinator);
    }

    #[tokio::test]
    async fn a_write_the_followers_do_not_fetch_in_time_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let (_store, log, _replicas, write, last) = leader_with_a_write(dir.path());
        let result = write.durable(&log, last, Duration::from_millis(300)).wait().await;
        let e = result.unwrap_err();
        assert_eq!(e, ReplicateError::Timeout(Duration::from_millis(300)));
        assert_eq!(e.partition_code(), ErrorCode::RequestTimedOut);
        assert_eq!(e.coordinator_code(), ErrorCode::CoordinatorNotAvailable);
    }

    #[tokio::test]
    async fn a_write_every_in_sync_replica_has_is_replicated() {
        let dir = tempfile::tempdir().unwrap();
        let (_store, log, replicas, write, last) = leader_with_a_write(dir.path());
        let waiting = tokio::spawn(write.durable(&log, last, Duration::from_secs(30)).wait());
        let replica = replicas.get("t", 0).unwrap();
        // Follower 2 fetches from past the write: it has it on its disk.
        replica.on_follower_fetch(laminar_cluster::BrokerId(2), Offset(last.0 + 1), log.log_end());
        assert_eq!(waiting.await.unwrap(), Ok(Replicated { isr_len: Some(2) }));
    }

    #[tokio::test]
    async fn on_a_single_node_a_write_is_durable_once_fsynced() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), RealStorage::new(), StoreConfig::default()).unwrap();
        let log = store
            .create_log(&LogId::new("t", 0), LogConfig::default())
            .unwrap();
        let write = LeaderWrite::new(LeaderEpoch(0), None, Arc::default());
        let info = log
            .append_as(&mut batch(), AppendMode::Leader { epoch: 0 })
            .unwrap();
        write.appended(info.log_end);
        let done = write
            .durable(&log, info.last_offset, Duration::from_secs(1))
            .wait()
            .await;
        assert_eq!(done, Ok(Replicated { isr_len: None }));
        assert!(log.flushed_end() > info.last_offset);
    }
}
