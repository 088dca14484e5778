//! Laminar's Kafka-compatible broker.
//!
//! - [`handlers`]: one module per Kafka API, with its version range in `laminar-protocol`'s
//!   table.
//! - [`broker`]: the state the handlers share; [`dispatch`]: the request dispatch;
//!   [`startup`]: the start, the background tasks and the clean stop.
//! - [`topics`]: the cluster metadata's topics, applied to this broker's logs.
//! - [`groups`], [`txn`]: the group and transaction coordinators.
//! - [`cluster`]: this broker's side of the cluster (images applied, followers' fetches).
//! - [`error`]: what a change to the cluster is refused with.
//! - [`metrics`]: everything measured, and the Prometheus endpoint.
//!
//! The data plane (the replicate path, producers' state, the append threads) is
//! `laminar-data`; the control plane `laminar-cluster`; the network layer `laminar-net`.

pub mod applied;
pub mod broker;
pub mod changes;
pub mod cluster;
pub mod config;
pub mod context;
pub mod dispatch;
pub mod dynamic_configs;
pub mod error;
pub mod handlers;
pub mod listeners;
pub mod metrics;
pub mod quotas;
pub mod response;
pub mod security;
pub mod startup;
pub mod stuck_reads;
pub mod topics;

pub use broker::Broker;
pub use error::BrokerError;
pub use startup::{RunningBroker, Wiring};
// The process's log: `crate::info!` and `crate::warn!` everywhere in this crate.
pub use config::BrokerConfig;
pub use laminar_metrics::{info, warn};
