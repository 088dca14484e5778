//! Laminar's Kafka-compatible broker.
//!
//! - [`handlers`]: one module per Kafka API, with its version range in `laminar-protocol`'s
//!   table.
//! - [`broker`]: the state the handlers share, and the request dispatch.
//! - [`topics`]: topic names, ids and configs, persisted.
//! - [`storage_pool`]: the threads that append to logs.
//! - [`metrics`]: everything measured, and the Prometheus endpoint.

pub mod broker;
pub mod cluster;
pub mod config;
pub mod context;
pub mod dispatch;
pub mod dynamic_configs;
pub mod error;
pub mod groups;
pub mod handlers;
pub mod metrics;
pub mod producers;
pub mod quotas;
pub mod replicate;
pub mod startup;
pub mod storage_pool;
pub mod stuck_reads;
pub mod topics;
pub mod txn;

pub use broker::Broker;
pub use error::BrokerError;
pub use startup::{RunningBroker, Wiring};
// The process's log: `crate::info!` and `crate::warn!` everywhere in this crate.
pub use config::BrokerConfig;
pub use laminar_metrics::{info, warn};
