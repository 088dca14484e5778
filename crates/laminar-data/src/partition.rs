//! A partition this broker leads and serves, as one request finds it: its log, its replica
//! state and the leader epoch it is led at, looked up once, so that every step of the
//! request (the epoch check, the read bound, the write) sees the same leadership.

use std::sync::Arc;

use laminar_cluster::replica::Replica;
use laminar_cluster::LeaderEpoch;
use laminar_storage::{Log, Offset};

use crate::replicate::LeaderWrite;

pub struct LedPartition {
    pub epoch: LeaderEpoch,
    pub log: Arc<Log>,
    pub replica: Arc<Replica>,
}

impl LedPartition {
    /// What consumers may read: below the high watermark (what every in-sync replica has),
    /// never past the log end.
    pub fn high_watermark(&self) -> Offset {
        self.replica.high_watermark().min(self.log.log_end())
    }

    /// A write at this leadership's epoch, through the one replicate path.
    pub fn write(&self) -> LeaderWrite {
        LeaderWrite::new(self.epoch, Some(self.replica.clone()))
    }
}
