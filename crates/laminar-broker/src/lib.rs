//! Laminar's Kafka-compatible broker.
//!
//! - [`handlers`]: one module per Kafka API, with its version range in `laminar-protocol`'s
//!   table.
//! - [`broker`]: the state the handlers share; [`dispatch`]: the request dispatch;
//!   [`context`]: a request's context and a connection's session; [`startup`]: the start,
//!   the background tasks and the clean stop.
//! - [`security`]: the authorization step (`step`, `split`), TLS, the SASL settings.
//! - [`topics`]: the cluster metadata's topics, applied to this broker's logs;
//!   [`dynamic_configs`], [`quotas`]: the dynamic broker configs and client quotas in effect.
//! - [`cluster`]: this broker's side of the cluster (images applied, followers' fetches);
//!   [`applied`], [`changes`]: how far it has applied the metadata, and what the handlers
//!   that change it work with.
//! - [`error`]: what a change to the cluster is refused with.
//! - [`metrics`]: everything measured, and the Prometheus endpoint.
//!
//! The group and transaction coordinators are `laminar-coordinators`; the data plane (the
//! partitions, the replicate path, producers' state, the append threads) `laminar-data`; the
//! control plane `laminar-cluster`; the network layer `laminar-net`.

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
pub mod topics;

pub use broker::Broker;
pub use error::BrokerError;
pub use startup::{RunningBroker, Wiring};
// The process's log: `crate::info!` and `crate::warn!` everywhere in this crate.
pub use config::BrokerConfig;
pub use laminar_metrics::{info, warn};
