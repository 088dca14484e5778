//! The partitions whose fetch reads are stuck on the disk: fetches skip them until the read
//! returns (see `handlers::fetch`), and the metrics endpoint counts them.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use laminar_cluster::TopicPartition;

/// The partitions whose read is stuck on the I/O pool, and how many times one was found.
#[derive(Default)]
pub struct StuckReads {
    partitions: Mutex<HashSet<TopicPartition>>,
    /// The set's size, so that the common case (none) takes no lock.
    len: AtomicUsize,
    /// `laminar_fetch_stuck_reads_total`.
    pub found_total: AtomicU64,
}

impl StuckReads {
    fn set(&self) -> std::sync::MutexGuard<'_, HashSet<TopicPartition>> {
        self.partitions.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn contains(&self, topic: &str, partition: i32) -> bool {
        self.len.load(Ordering::SeqCst) > 0 && self.set().contains(&TopicPartition::new(topic, partition))
    }

    pub(crate) fn mark(&self, topic: &str, partition: i32) -> bool {
        let mut set = self.set();
        let new = set.insert(TopicPartition::new(topic, partition));
        self.len.store(set.len(), Ordering::SeqCst);
        new
    }

    pub(crate) fn clear(&self, topic: &str, partition: i32) {
        if self.len.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut set = self.set();
        set.remove(&TopicPartition::new(topic, partition));
        self.len.store(set.len(), Ordering::SeqCst);
    }

    /// How many partitions fetches skip now (`laminar_fetch_stuck_partitions`).
    pub fn count(&self) -> usize {
        self.len.load(Ordering::SeqCst)
    }
}
