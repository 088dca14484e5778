//! What the group and the transaction coordinators share: each is the state of one internal
//! partition (`__consumer_offsets-0`, `__transaction_state-0`), loaded when this broker
//! becomes its leader and dropped when it stops leading it ([`CoordinatorLog`]), and it
//! answers only while the epoch it loaded is that partition's leader epoch here; its writes
//! go through [`CoordinatorRuntime::write`]: at that epoch, on the partition's storage thread,
//! then the one replicate path. (Kafka's `CoordinatorRuntime` gives its group, transaction
//! and share coordinators this life; KIP-848 groups and share groups will take it here too.)

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use laminar_cluster::LeaderEpoch;
use laminar_data::partition::{Append, Partitions, WriteError};
use laminar_data::storage_pool::StoragePool;
use laminar_protocol::ErrorCode;
use laminar_storage::AppendInfo;

/// What every coordinator writes through: the partitions placed here (a coordinator's log is
/// one of them) and their storage threads.
pub struct CoordinatorRuntime {
    pub partitions: Arc<Partitions>,
    pub storage: Arc<StoragePool>,
}

impl CoordinatorRuntime {
    /// The epoch the coordinator holding `hold` answers at here, or the code its requests
    /// get (see [`CoordinatorLog::ready`]).
    pub fn ready(&self, hold: &CoordinatorLog) -> Result<LeaderEpoch, ErrorCode> {
        hold.ready(self.partitions.leadership(hold.topic, 0))
    }

    /// A coordinator's write to its log: made only while it answers, at the epoch it
    /// answers at. `job` runs on the log's storage thread, where every append to it runs in
    /// turn, checked there to be led at that epoch still (a new leadership reloads the
    /// coordinator, so the same epoch means the same loaded state); then the write waits, at
    /// most `within`, to be durable here and on the in-sync replicas.
    pub async fn write<T: Send + 'static>(
        &self,
        hold: &CoordinatorLog,
        within: Option<Duration>,
        job: impl FnOnce(&Append) -> Result<Option<(AppendInfo, T)>, WriteError> + Send + 'static,
    ) -> Result<Option<(AppendInfo, T)>, WriteError> {
        let epoch = self.ready(hold).map_err(WriteError::Refused)?;
        let led = self
            .partitions
            .led(hold.topic, 0)
            .ok()
            .filter(|led| led.epoch == epoch)
            .ok_or(WriteError::NotLeader)?;
        led.write_with(&self.storage, within, job).await
    }
}

/// A coordinator's hold on its partition.
pub struct CoordinatorLog {
    /// The internal topic whose partition 0 holds the coordinator's state.
    pub topic: &'static str,
    /// The leader epoch whose state is loaded here (`NONE`: none).
    loaded: AtomicI64,
}

const NONE: i64 = -1;

impl CoordinatorLog {
    pub const fn new(topic: &'static str) -> CoordinatorLog {
        CoordinatorLog {
            topic,
            loaded: AtomicI64::new(NONE),
        }
    }

    /// Is `topic`-`partition` this coordinator's partition?
    pub fn is_partition(&self, topic: &str, partition: i32) -> bool {
        topic == self.topic && partition == 0
    }

    /// The epoch this coordinator answers at, given this broker's `leadership` of its
    /// partition: led here with its state loaded at that epoch. Else the code a request
    /// gets: COORDINATOR_LOAD_IN_PROGRESS while the state loads, NOT_COORDINATOR where
    /// another broker leads it.
    pub fn ready(&self, leadership: Result<LeaderEpoch, ErrorCode>) -> Result<LeaderEpoch, ErrorCode> {
        match leadership {
            Ok(epoch) if self.loaded.load(Ordering::Acquire) == epoch.0 as i64 => Ok(epoch),
            Ok(_) => Err(ErrorCode::CoordinatorLoadInProgress),
            Err(_) => Err(ErrorCode::NotCoordinator),
        }
    }

    /// The state read from the partition at `epoch` is in place: it answers from now on.
    pub fn loaded(&self, epoch: LeaderEpoch) {
        self.loaded.store(epoch.0 as i64, Ordering::Release);
    }

    /// It stops answering (its partition is led elsewhere, or nowhere). Whether a state had
    /// been loaded.
    pub fn unloaded(&self) -> bool {
        self.loaded.swap(NONE, Ordering::AcqRel) != NONE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_coordinator_answers_only_at_the_epoch_it_loaded() {
        let c = CoordinatorLog::new("__consumer_offsets");
        assert_eq!(
            c.ready(Ok(LeaderEpoch(3))),
            Err(ErrorCode::CoordinatorLoadInProgress)
        );
        c.loaded(LeaderEpoch(3));
        assert_eq!(c.ready(Ok(LeaderEpoch(3))), Ok(LeaderEpoch(3)));
        // A newer leadership here: its state must be read again first.
        assert_eq!(
            c.ready(Ok(LeaderEpoch(4))),
            Err(ErrorCode::CoordinatorLoadInProgress)
        );
        assert_eq!(
            c.ready(Err(ErrorCode::NotLeaderOrFollower)),
            Err(ErrorCode::NotCoordinator)
        );
        assert!(c.unloaded());
        assert!(!c.unloaded());
        assert_eq!(
            c.ready(Ok(LeaderEpoch(3))),
            Err(ErrorCode::CoordinatorLoadInProgress)
        );
    }
}
