//! The data plane: what a partition this broker hosts needs to take writes, apart from the
//! requests that ask for them and the coordinators that make them.
//!
//! - [`partition`]: the partitions placed here, each with its log, replica state and
//!   producers' state, made and dropped as the cluster metadata places them; and a
//!   partition led here as a request finds it (the partition, its log, the leader epoch).
//! - [`replicate`]: a partition leader's one replicate path, used by every write a leader
//!   makes (produce, the group log, the transaction log, the markers): after the append, the
//!   high watermark and the fetches waiting; then durable here and on the in-sync replicas.
//! - [`produce`]: a producer's append: its batches validated once, in the request's own
//!   buffer; the topic's limits; the transaction and idempotence checks; the leader's write.
//! - [`producers`]: producer ids, and the idempotent and transactional producers' state of a
//!   partition (sequence de-duplication, rebuilt from the log when a leadership begins).
//! - [`follow`]: a follower's replication of a partition: fetch from the leader, truncate
//!   where the logs diverged, append with the leader's offsets.
//! - [`read`]: a partition's reads for Fetch (the I/O pool, stuck reads left behind, an idle
//!   consumer answered from memory) and the leader's side of a follower's fetch;
//!   [`stuck_reads`]: the partitions whose reads are stuck on the disk.
//! - [`storage_pool`]: the threads that append, one partition always on the same one, so
//!   that a disk that blocks a `write(2)` holds up its own partitions alone.
//!
//! The log's files (and its transaction index) are `laminar-storage`'s; the rules of the
//! replica state (role, ISR, high watermark) are `laminar-cluster`'s.

pub mod follow;
pub mod partition;
pub mod produce;
pub mod producers;
pub mod read;
pub mod replicate;
pub mod storage_pool;
pub mod stuck_reads;

/// The clock records and commits are stamped with (milliseconds since the epoch), the log's.
pub use laminar_storage::now_ms;
