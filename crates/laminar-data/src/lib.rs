//! The data plane: what a partition this broker hosts needs to take writes, apart from the
//! requests that ask for them and the coordinators that make them.
//!
//! - [`partition`]: a partition led here, as a request finds it (log, replica state, epoch).
//! - [`replicate`]: a partition leader's one replicate path, used by every write a leader
//!   makes (produce, the group log, the transaction log, the markers): after the append, the
//!   high watermark and the fetches waiting; then durable here and on the in-sync replicas.
//! - [`producers`]: idempotent and transactional producers' state per partition (sequence
//!   de-duplication, rebuilt from the log when a leadership begins).
//! - [`storage_pool`]: the threads that append, one partition always on the same one, so
//!   that a disk that blocks a `write(2)` holds up its own partitions alone.
//!
//! The log itself (and its transaction index) is `laminar-storage`'s; the replica state
//! (role, ISR, high watermark) is `laminar-cluster`'s.

pub mod partition;
pub mod producers;
pub mod replicate;
pub mod storage_pool;
