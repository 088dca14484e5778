//! The coordinators: each is the state of one internal partition, loaded when this broker
//! leads it and written through the data plane's one replicate path.
//!
//! - [`runtime`]: what they share: their hold on their partition (loaded at a leader epoch,
//!   answering only at it) and their one write.
//! - [`groups`]: the group coordinator (`__consumer_offsets`): members, rebalances, committed
//!   offsets, and its log.
//! - [`txn`]: the transaction coordinator (`__transaction_state`): transactional ids, their
//!   transactions and completions (markers into the partitions, offsets into the group log).
//!
//! KIP-848 groups and share groups will be coordinators here too, on the same runtime.

pub mod groups;
pub mod runtime;
pub mod txn;

pub use laminar_metrics::{info, warn};

/// A string as the wire's `StrBytes`.
pub(crate) fn sb(s: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(s.to_string())
}
