//! The broker's shared state: the services the handlers take (the dispatch, `dispatch.rs`,
//! hands each handler the ones it needs), and what startup, the image publisher and the
//! background tasks hold. Startup and shutdown are in `startup.rs`.

use std::sync::Arc;

use laminar_storage::Store;

use crate::changes::MetadataChanges;
use crate::config::BrokerConfig;
use crate::metrics::BrokerMetrics;
use crate::quotas::Quotas;
use crate::topics::Topics;
use laminar_cluster::Cluster;
use laminar_coordinators::groups::write::Groups;

use crate::handlers::fetch::FetchService;
use crate::handlers::produce::ProduceService;
use laminar_coordinators::txn::service::Txns;
use laminar_data::partition::Partitions;
use laminar_data::producers::ProducerIds;
use laminar_data::storage_pool::StoragePool;
use laminar_net::IoPool;

pub struct Broker {
    pub config: BrokerConfig,
    pub store: Arc<Store>,
    pub topics: Arc<Topics>,
    pub io: IoPool,
    pub storage: Arc<StoragePool>,
    /// The partitions placed here: each with its log, replica state and producers' state.
    pub partitions: Arc<Partitions>,
    pub producer_ids: Arc<ProducerIds>,
    /// The group coordinator: its state, its log, its hold on `__consumer_offsets-0`.
    pub groups: Arc<Groups>,
    /// The transaction coordinator: its state, its hold on `__transaction_state-0`.
    pub txns: Arc<Txns>,
    /// What Produce and Fetch work with.
    pub produce: Arc<ProduceService>,
    pub fetch: Arc<FetchService>,
    /// The listeners, bound, in the order of `listeners`.
    pub listeners: Vec<Arc<crate::listeners::Listener>>,
    /// Each listener's SASL exchanges (`None`: a listener without SASL), in the same order.
    pub sasl: Vec<Option<Arc<laminar_auth::Authenticator>>>,
    /// How a TLS client certificate's subject becomes a principal on SSL listeners.
    pub tls_principals: laminar_auth::principal::MappingRules,
    /// What each request may do (`authorizer.class.name`).
    pub authz: Arc<crate::security::authz::Authz>,
    /// What this broker's registration advertises: the inter-broker listener's endpoint and
    /// every listener's.
    pub advertised: laminar_cluster::Advertised,
    pub cluster_id: String,
    pub metrics: BrokerMetrics,
    pub quotas: Arc<Quotas>,
    /// Partitions whose fetch reads are stuck on the disk, skipped until they return.
    pub stuck_reads: Arc<laminar_data::stuck_reads::StuckReads>,
    /// What this broker's fetchers work with, as a follower.
    pub follower: Arc<laminar_data::follow::Follower>,
    /// The cluster: several brokers under a controller quorum, or a single node, a quorum of
    /// one voter (itself).
    pub cluster: Arc<Cluster>,
    /// How far this broker has applied the cluster metadata.
    pub applied: crate::applied::AppliedImages,
}

impl Broker {
    /// What a handler that changes the cluster metadata works with.
    pub fn changes(&self) -> MetadataChanges<'_> {
        MetadataChanges {
            cluster: &self.cluster,
            applied: &self.applied,
            topics: &self.topics,
            config: &self.config,
        }
    }
}
