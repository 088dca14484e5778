//! The transaction coordinator as a service: its state (`TxnCoordinator`), its hold on
//! `__transaction_state-0`, and what it works with: the coordinators' runtime (its log's
//! writes, and the markers into the partitions led here), the group coordinator (the offsets
//! a transaction commits), the cluster (the markers for partitions other brokers lead) and
//! the producer ids. Its handlers and its completions (`complete.rs`) take it, not the broker.

use std::sync::Arc;

use laminar_cluster::{Cluster, LeaderEpoch};
use laminar_data::producers::ProducerIds;
use laminar_net::IoPool;
use laminar_protocol::ErrorCode;

use super::log::TRANSACTION_TOPIC;
use super::TxnCoordinator;
use crate::groups::write::Groups;
use crate::runtime::{CoordinatorLog, CoordinatorRuntime};

pub struct Txns {
    /// The transactional ids and their transactions.
    pub coordinator: TxnCoordinator,
    /// Its hold on `__transaction_state-0`.
    pub hold: CoordinatorLog,
    pub runtime: Arc<CoordinatorRuntime>,
    pub groups: Arc<Groups>,
    pub cluster: Arc<Cluster>,
    pub producer_ids: Arc<ProducerIds>,
    pub settings: TxnSettings,
}

/// The transaction coordinator's settings, by Kafka's names.
#[derive(Debug, Clone, Copy)]
pub struct TxnSettings {
    /// `transactional.id.expiration.ms`.
    pub id_expiration_ms: u64,
    /// `transaction.max.timeout.ms`.
    pub max_timeout_ms: u64,
}

impl Txns {
    pub fn new(
        coordinator: TxnCoordinator,
        runtime: Arc<CoordinatorRuntime>,
        groups: Arc<Groups>,
        cluster: Arc<Cluster>,
        producer_ids: Arc<ProducerIds>,
        settings: TxnSettings,
    ) -> Txns {
        Txns {
            coordinator,
            hold: CoordinatorLog::new(TRANSACTION_TOPIC),
            runtime,
            groups,
            cluster,
            producer_ids,
            settings,
        }
    }

    /// The transaction coordinator's epoch if this broker is it: the leader epoch of
    /// `__transaction_state-0`, led here with the transactions loaded from it. The error code
    /// a transaction request gets if not.
    pub fn epoch(&self) -> Result<i32, ErrorCode> {
        self.runtime.ready(&self.hold).map(|epoch| epoch.0)
    }

    /// This broker leads the transaction log now, at `epoch`: it becomes the transaction
    /// coordinator once it has read the transactions from it (on the I/O pool), and completes
    /// those it finds prepared (their markers are idempotent). Until then transaction requests
    /// get COORDINATOR_LOAD_IN_PROGRESS.
    pub async fn load(self: &Arc<Self>, io: &IoPool, epoch: LeaderEpoch) {
        let Some(log) = self.log() else {
            crate::warn!("leading the transaction log at epoch {epoch}, but it has no log here");
            return;
        };
        let restored = match io.run(move || super::log::replay(&log)).await {
            Ok(restored) => restored,
            Err(e) => {
                crate::warn!("loading the transactions at epoch {epoch}: {e}");
                return;
            }
        };
        let n = restored.len();
        self.coordinator.reset(restored.into_values());
        self.hold.loaded(epoch);
        crate::info!("coordinating transactions at epoch {epoch}: {n} transactional ids loaded");
        for prepared in self.coordinator.prepared() {
            crate::info!(
                "completing transaction {:?} ({}) decided by the previous coordinator",
                prepared.transactional_id,
                prepared.status.name()
            );
            tokio::spawn(super::complete::complete(self.clone(), prepared, epoch.0));
        }
    }

    /// This broker no longer leads the transaction log: it forgets the transactions; their
    /// completions in progress stop (the next coordinator completes them).
    pub fn unload(&self) {
        if self.hold.unloaded() {
            crate::info!("no longer coordinating transactions");
        }
        self.coordinator.reset([]);
    }

    /// Its log (as a follower truncates it, it is reopened: looked up each time).
    pub fn log(&self) -> Option<Arc<laminar_storage::Log>> {
        let hosted = self.runtime.partitions.get(TRANSACTION_TOPIC, 0)?;
        hosted.log()
    }
}
