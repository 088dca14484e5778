//! Startup and shutdown: opening (and recovering) the store, binding the listeners, the
//! broker's background tasks, and the clean stop.

use laminar_protocol::ErrorCode;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use laminar_storage::backend::{RealStorage, Storage};
use laminar_storage::cleaner::{CleanerConfig, CleanerEvent, PassLimits};
use laminar_storage::{Store, StoreConfig};
use tokio::net::TcpListener;

use crate::broker::Broker;
use crate::config::BrokerConfig;
use crate::handlers::fetch::FetchService;
use crate::handlers::produce::ProduceService;
use crate::listeners::{Listener, SecurityProtocol};
use crate::metrics::BrokerMetrics;
use crate::quotas::Quotas;
use crate::topics::Topics;
use laminar_cluster::{Cluster, ClusterSettings};
use laminar_coordinators::groups::store::GroupStore;
use laminar_coordinators::groups::write::Groups;
use laminar_coordinators::groups::Coordinator;
use laminar_coordinators::runtime::CoordinatorRuntime;
use laminar_coordinators::txn::service::{TxnSettings, Txns};
use laminar_data::partition::Partitions;
use laminar_data::producers::ProducerIds;
use laminar_data::storage_pool::StoragePool;
use laminar_data::stuck_reads::StuckReads;
use laminar_net::{IoPool, ServerHandle, ServerLimits};

/// What a test may put in place of the broker's own parts. Not configuration: nothing in
/// `laminar.toml` or on the command line reaches it.
#[derive(Default)]
pub struct Wiring {
    /// The storage backend (a fault injector, a simulated disk); the real file system if
    /// `None`.
    pub storage: Option<Arc<dyn Storage>>,
    /// Read cold ranges of fetch responses on the socket threads, as Kafka does, to measure
    /// what the I/O pool prevents.
    pub send_cold_reads_on_socket_threads: bool,
}

/// A broker that is listening.
pub struct RunningBroker {
    pub broker: Arc<Broker>,
    server: ServerHandle,
    retention: tokio::task::JoinHandle<()>,
    producer_expiry: tokio::task::JoinHandle<()>,
    offline_logs: tokio::task::JoinHandle<()>,
    group_timer: tokio::task::JoinHandle<()>,
    group_writer: tokio::task::JoinHandle<()>,
    txn_timer: tokio::task::JoinHandle<()>,
    /// In a cluster: the task that applies each new image to this broker's logs (first:
    /// it runs on while the broker leaves), the heartbeats to the controller and the ISR
    /// checks.
    cluster_tasks: Vec<tokio::task::JoinHandle<()>>,
    metrics_server: Option<(std::net::SocketAddr, tokio::task::JoinHandle<()>)>,
}

/// How often session and rebalance timeouts are checked.
const GROUP_TICK_MS: u64 = 50;
/// How often logs gone offline are looked for, to tell the controller.
const OFFLINE_LOG_CHECK_MS: u64 = 100;

impl RunningBroker {
    /// Opens the store (recovering it if needed), binds the listener and starts serving.
    /// Must be called inside a multi-threaded tokio runtime.
    pub async fn start(config: BrokerConfig) -> io::Result<RunningBroker> {
        Self::start_wired(config, Wiring::default()).await
    }

    /// [`RunningBroker::start`] with parts swapped for tests ([`Wiring`]).
    pub async fn start_wired(config: BrokerConfig, wiring: Wiring) -> io::Result<RunningBroker> {
        // What the broker writes is its own: the cluster metadata holds SCRAM keys, and the
        // logs what clients sent. Files made from here on are readable by this user alone.
        // SAFETY: umask only sets the process's file-creation mask.
        unsafe { libc::umask(0o077) };
        crate::topics::refuse_unmigrated(&config.data_dir)?;
        if config.queued_max_request_bytes < config.socket_request_max_bytes {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "queued.max.request.bytes ({}) must be at least socket.request.max.bytes ({}), \
                     or the largest frames could never be read",
                    config.queued_max_request_bytes, config.socket_request_max_bytes
                ),
            ));
        }
        let settings = &config.listeners;
        settings
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // One TLS configuration per `ssl.client.auth` the TLS listeners ask for (the broker's,
        // or a listener's own), built before anything binds.
        let is_tls = |name: &str| {
            matches!(
                settings.protocol(name),
                Some(SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
            )
        };
        let mut tls_servers: Vec<(Option<String>, Arc<laminar_net::TlsServer>)> = Vec::new();
        let mut tls_of = std::collections::HashMap::new();
        for l in settings.listeners.iter().filter(|l| is_tls(&l.name)) {
            let client_auth = config
                .security
                .of_listener(&l.name, "ssl.client.auth")
                .map(|a| a.trim().to_string());
            let server = match tls_servers.iter().find(|(a, _)| *a == client_auth) {
                Some((_, server)) => server.clone(),
                None => {
                    let built = crate::security::tls::server_config(&config.security, client_auth.as_deref())
                        .map_err(|e| {
                            io::Error::new(io::ErrorKind::InvalidInput, format!("listener {}: {e}", l.name))
                        })?;
                    let kernel = crate::security::tls::kernel_tls(&config.security)
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                    let server = Arc::new(laminar_net::TlsServer::new(built).with_kernel_tls(kernel));
                    tls_servers.push((client_auth, server.clone()));
                    server
                }
            };
            tls_of.insert(l.name.clone(), server);
        }
        let mut tcp_listeners = Vec::new();
        for l in &settings.listeners {
            let host = if l.host.is_empty() {
                "0.0.0.0"
            } else {
                l.host.as_str()
            };
            let bound = TcpListener::bind((host, l.port)).await.map_err(|e| {
                io::Error::new(e.kind(), format!("listener {}://{host}:{}: {e}", l.name, l.port))
            })?;
            tcp_listeners.push(laminar_net::NetListener {
                tcp: bound,
                tls: tls_of.get(&l.name).cloned(),
            });
        }
        let bound: Vec<std::net::SocketAddr> = tcp_listeners
            .iter()
            .map(|l| l.tcp.local_addr())
            .collect::<io::Result<_>>()?;
        let listeners: Vec<Arc<Listener>> = settings.resolve(&bound).into_iter().map(Arc::new).collect();
        let inter_broker = &listeners[settings.inter_broker_index()];
        let advertised = laminar_cluster::Advertised {
            host: inter_broker.host.clone(),
            port: inter_broker.port,
            endpoints: listeners
                .iter()
                .map(|l| laminar_cluster::Endpoint {
                    listener: l.name.clone(),
                    host: l.host.clone(),
                    port: l.port,
                })
                .collect(),
        };
        let metrics_listener = match config.metrics_listen {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .await
                    .map_err(|e| io::Error::new(e.kind(), format!("metrics.listeners {addr}: {e}")))?,
            ),
            None => None,
        };
        let storage: Arc<dyn Storage> = match wiring.storage {
            Some(storage) => storage,
            None => RealStorage::new(),
        };
        let cluster = {
            let voters = config.controller_quorum_voters.clone();
            let node_id = config.node_id;
            let dir = config.data_dir.clone();
            let storage = storage.clone();
            let settings = ClusterSettings {
                broker_session_timeout: Duration::from_millis(config.broker_session_timeout_ms),
                broker_heartbeat_interval: Duration::from_millis(config.broker_heartbeat_interval_ms),
                offsets_topic_segment_bytes: config.offsets_topic_segment_bytes,
                transaction_state_log_segment_bytes: config.transaction_state_log_segment_bytes,
                leader_imbalance_check_interval: config
                    .auto_leader_rebalance_enable
                    .then(|| Duration::from_secs(config.leader_imbalance_check_interval_seconds)),
                controller_auth: crate::security::controller_auth(&config)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
            };
            tokio::task::spawn_blocking(move || {
                Cluster::start(
                    laminar_cluster::BrokerId(node_id),
                    voters,
                    storage,
                    &dir,
                    settings,
                )
            })
            .await
            .expect("controller start task")
            .map_err(io::Error::other)?
        };
        let cfg = config.clone();
        let (store, topics, groups, group_store, quotas, was_empty, txns) =
            tokio::task::spawn_blocking(move || -> io::Result<_> {
                let store_config = StoreConfig {
                    cleaner: CleanerConfig {
                        enabled: cfg.log_cleaner_enable,
                        threads: cfg.log_cleaner_threads,
                        backoff_ms: cfg.log_cleaner_backoff_ms,
                        limits: PassLimits {
                            dedupe_buffer_bytes: cfg.log_cleaner_dedupe_buffer_size,
                            io_buffer_bytes: cfg.log_cleaner_io_buffer_size,
                            io_max_bytes_per_s: cfg.log_cleaner_io_max_bytes_per_second,
                        },
                    },
                    ..StoreConfig::default()
                };
                let store = Store::open(&cfg.data_dir, storage, store_config).map_err(io::Error::other)?;
                store.set_cleaner_events(Arc::new(|event| match event {
                    CleanerEvent::Cleaned { log, stats } => crate::info!(
                        "cleaned {log}: offsets {} to {} mapped, {} records removed, {} of {} segments left, {} bytes read, {} written, in {:?}",
                        stats.first_dirty,
                        stats.end,
                        stats.records_removed,
                        stats.segments_after,
                        stats.segments_before,
                        stats.bytes_read,
                        stats.bytes_written,
                        stats.elapsed
                    ),
                    CleanerEvent::Failed { log, error } => {
                        crate::warn!("cleaning {log} failed (it waits log.cleaner.backoff.ms): {error}")
                    }
                }));
                let store = Arc::new(store);
                for (id, log) in store.logs() {
                    let r = log.recovery_report();
                    if let Some((offset, pos, reason)) = &r.truncated_at {
                        crate::warn!("recovered {id}: truncated at offset {offset} ({pos}): {reason}");
                    }
                }
                // Before the topics registry creates `__consumer_offsets` in a new directory.
                let was_empty = store.logs().is_empty();
                let topics = Topics::open(store.clone(), cfg.clone())?;
                let quotas = Quotas::new();
                // The groups and transactions are read when this broker leads their logs.
                let group_store = GroupStore::open(&store).map_err(io::Error::other)?;
                let groups = Coordinator::new(Duration::from_millis(cfg.group_initial_rebalance_delay_ms));
                let txns = laminar_coordinators::txn::TxnCoordinator::new([]);
                Ok((
                    store,
                    Arc::new(topics),
                    groups,
                    group_store,
                    quotas,
                    was_empty,
                    txns,
                ))
            })
            .await
            .expect("startup task")?;
        crate::info!(
            "laminar opened {}: {}",
            config.data_dir.display(),
            if store.opened_clean() {
                "started after a clean shutdown"
            } else if was_empty {
                "new or empty data directory"
            } else {
                "recovered after an unclean shutdown"
            }
        );
        let residency = laminar_storage::residency::describe();
        if laminar_storage::residency::method() == laminar_storage::residency::Method::Cachestat {
            crate::info!("{residency}");
        } else {
            crate::warn!("{residency}");
        }
        if laminar_storage::backend::noatime_refused() {
            crate::warn!(
                "some log files could not be opened with O_NOATIME (this user does not own them): \
                 reading data written since its last read updates the file's access time, a \
                 journal write that can stall a socket thread; run as their owner or mount the \
                 data directory with noatime"
            );
        }
        crate::info!("settings in effect:\n{}", config.describe());
        // The producers' states are each partition's, rebuilt from its log when this broker
        // begins to lead it (`cluster/publish.rs`).
        let partitions = Arc::new(Partitions::new(
            store.clone(),
            cluster.clone(),
            config.log_read_after_fsync,
        ));
        let storage = Arc::new(StoragePool::new(config.num_storage_threads));
        if config.log_read_after_fsync {
            // Records become visible to consumers when their fsync completes: the fetches
            // waiting on that partition are woken then, as on an append.
            let woken = Arc::downgrade(&partitions);
            let _ = store.metrics().flush_listener.set(Box::new(move |log: &str| {
                if let (Some(partitions), Some(id)) =
                    (woken.upgrade(), laminar_storage::LogId::parse_dir_name(log))
                {
                    partitions.wake(&id.topic, id.partition as i32);
                }
            }));
        }
        let coordinators = Arc::new(CoordinatorRuntime {
            partitions: partitions.clone(),
            storage: storage.clone(),
        });
        let offsets_retention = Duration::from_secs(config.offsets_retention_minutes * 60);
        let groups = Arc::new(Groups::new(
            groups,
            group_store,
            coordinators.clone(),
            offsets_retention,
        ));
        let producer_ids = Arc::new(ProducerIds::for_node(config.node_id));
        let txns = Arc::new(Txns::new(
            txns,
            coordinators,
            groups.clone(),
            cluster.clone(),
            producer_ids.clone(),
            TxnSettings {
                id_expiration_ms: config.transactional_id_expiration_ms,
                max_timeout_ms: config.transaction_max_timeout_ms,
            },
        ));
        let io = IoPool::new(config.num_io_threads);
        let quotas = Arc::new(quotas);
        let stuck_reads = Arc::new(StuckReads::default());
        let produce = Arc::new(ProduceService {
            topics: topics.clone(),
            partitions: partitions.clone(),
            storage: storage.clone(),
            cluster: cluster.clone(),
            txns: txns.clone(),
            quotas: quotas.clone(),
        });
        let fetch = Arc::new(FetchService {
            topics: topics.clone(),
            partitions: partitions.clone(),
            reader: Arc::new(laminar_data::read::Reader {
                partitions: partitions.clone(),
                io: io.clone(),
                stuck_reads: stuck_reads.clone(),
            }),
            quotas: quotas.clone(),
            cluster: cluster.clone(),
        });
        let sasl = crate::security::authenticators(&config.security, &listeners, &cluster)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        if sasl.iter().any(Option::is_some) && !config.security.authorizer {
            crate::warn!(
                "SASL without an authorizer (authorizer.class.name): every authenticated user may do \
                 everything, a follower's Fetch and WriteTxnMarkers included"
            );
        }
        // Before the first image can start a fetcher or a coordinator's call to another broker.
        let inter_broker =
            crate::security::inter_broker(&config.security, &listeners[settings.inter_broker_index()])
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        cluster.clients.set_security(inter_broker);
        let follower = Arc::new(laminar_data::follow::Follower {
            node_id: config.node_id,
            store: store.clone(),
            storage: storage.clone(),
            cluster: cluster.clone(),
            topic_id: {
                let topics = topics.clone();
                Box::new(move |name: &str| topics.get(name).map(|t| t.uuid()))
            },
        });
        let broker = Arc::new(Broker {
            io,
            produce,
            fetch,
            storage,
            partitions,
            producer_ids,
            groups,
            txns,
            cluster_id: "laminar-cluster".to_string(),
            listeners,
            sasl,
            authz: crate::security::authz(&config.security, &cluster),
            tls_principals: crate::security::tls::principal_rules(&config.security)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
            advertised,
            store,
            topics,
            config: config.clone(),
            metrics: BrokerMetrics::default(),
            quotas,
            stuck_reads,
            follower,
            cluster,
            applied: Default::default(),
        });
        let metrics_server = match metrics_listener {
            Some(l) => {
                let addr = l.local_addr()?;
                crate::info!("metrics on http://{addr}/metrics");
                let b = broker.clone();
                let render: crate::metrics::http::Render =
                    Arc::new(move || b.metrics.render(&b.store, &b.stuck_reads, &b.txns.coordinator));
                Some((addr, crate::metrics::http::serve(l, render)))
            }
            None => None,
        };
        let b = broker.clone();
        let retention = tokio::spawn(async move {
            let interval = Duration::from_millis(b.config.log_retention_check_interval_ms);
            loop {
                tokio::time::sleep(interval).await;
                let store = b.store.clone();
                let deleted =
                    b.io.run(move || store.apply_retention(laminar_storage::now_ms()))
                        .await;
                if deleted > 0 {
                    crate::info!("retention deleted {deleted} segments");
                }
            }
        });
        let b = broker.clone();
        // A log a failed fsync took offline must not keep its leadership (nor its place in
        // the ISR): the controller moves them.
        // Nor a leader whose log holds a damaged batch, while another in-sync replica has it
        // whole: that one leads, and this one, following, cuts its log at the damage and
        // fetches the rest again. (The last in-sync replica keeps leading: it serves all but
        // the damaged batch, where the partition would otherwise serve nothing.)
        let offline_logs = tokio::spawn(async move {
            let mut damaged_seen = 0;
            let mut reported = std::collections::HashSet::new();
            loop {
                tokio::time::sleep(Duration::from_millis(OFFLINE_LOG_CHECK_MS)).await;
                for id in b.store.take_offline() {
                    let why = "its log here is offline";
                    tokio::spawn(
                        b.cluster
                            .clone()
                            .replica_offline(id.topic, id.partition as i32, why),
                    );
                }
                let damaged = laminar_storage::metrics::DAMAGED_BATCHES_FOUND
                    .load(std::sync::atomic::Ordering::Relaxed);
                if damaged == damaged_seen {
                    continue;
                }
                damaged_seen = damaged;
                for p in b.partitions.all() {
                    let others_in_sync = p.replica.isr().is_some_and(|isr| isr.len() > 1);
                    let damaged = p.log().and_then(|l| l.damaged_from()).is_some();
                    let key = (p.topic.clone(), p.partition);
                    if p.leader_epoch().is_some() && others_in_sync && damaged && reported.insert(key) {
                        let why = "a damaged batch was found in its log here";
                        tokio::spawn(
                            b.cluster
                                .clone()
                                .replica_offline(p.topic.clone(), p.partition, why),
                        );
                    }
                }
            }
        });
        let b = broker.clone();
        let producer_expiry = tokio::spawn(async move {
            let interval = Duration::from_millis(b.config.producer_id_expiration_check_interval_ms);
            loop {
                tokio::time::sleep(interval).await;
                let expired = b
                    .partitions
                    .expire_producers(laminar_storage::now_ms(), b.config.producer_id_expiration_ms);
                if expired > 0 {
                    crate::info!("forgot {expired} expired idempotent producer states");
                }
            }
        });
        let b = broker.clone();
        let group_timer = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(GROUP_TICK_MS)).await;
                b.groups.coordinator.tick();
            }
        });
        let b = broker.clone();
        // Apart from the timer, so that a slow disk delays only the writing of group
        // metadata and expiries, never the session timeouts.
        let group_writer = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(GROUP_TICK_MS)).await;
                b.groups.persist_changes().await;
            }
        });
        let b = broker.clone();
        let txn_timer = tokio::spawn(async move {
            let interval = Duration::from_millis(
                b.config
                    .transaction_abort_timed_out_transaction_cleanup_interval_ms,
            );
            loop {
                tokio::time::sleep(interval).await;
                laminar_coordinators::txn::complete::abort_timed_out(&b.txns).await;
                laminar_coordinators::txn::complete::expire_ids(&b.txns).await;
            }
        });
        let c = &broker.cluster;
        let mut cluster_tasks = vec![
            tokio::spawn(crate::cluster::publish::run(broker.clone(), c.subscribe())),
            tokio::spawn(c.clone().run_heartbeats(broker.advertised.clone())),
            tokio::spawn(
                c.clone()
                    .run_isr_checks(Duration::from_millis(config.replica_lag_time_max_ms)),
            ),
        ];
        let inter_broker_listener = broker.listeners[config.listeners.inter_broker_index()].clone();
        let inter_broker_tls = matches!(
            inter_broker_listener.protocol,
            SecurityProtocol::Ssl | SecurityProtocol::SaslSsl
        );
        let reload = crate::security::tls::reload_interval(&config.security)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        if let Some(interval) = reload.filter(|_| !tls_servers.is_empty() || inter_broker_tls) {
            cluster_tasks.push(tokio::spawn(crate::security::tls::reload_on_change(
                config.security.clone(),
                interval,
                tls_servers.clone(),
                inter_broker_tls.then(|| (c.clone(), inter_broker_listener)),
            )));
        }
        if c.alone() {
            ready_alone(&broker).await;
            // Its own quorum's image, caught up: what it does not place here was deleted.
            if c.caught_up().await {
                let (topics, image, node) = (broker.topics.clone(), c.image(), c.node_id);
                broker.io.run(move || topics.remove_unplaced(&image, node)).await;
            }
        }
        // The first address is what tests and scripts read; then every listener, by name. The
        // sockets are bound: connections made from now on wait in the listen backlog until
        // the broker serves (below), once its metadata is here.
        let first = &broker.listeners[0];
        let all = broker
            .listeners
            .iter()
            .map(|l| {
                format!(
                    "{}://{} ({}, advertised {}:{})",
                    l.name,
                    l.bound,
                    l.protocol.name(),
                    l.host,
                    l.port
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        crate::info!(
            "laminar listening on {} (advertised {}:{}); listeners: {all}",
            first.bound,
            first.host,
            first.port
        );
        if !c.alone() {
            // Not before its ACLs and SCRAM users are here: started from an empty (or old)
            // image, it would deny what is allowed, or with allow.everyone.if.no.acl.found,
            // allow what a DENY forbids.
            c.wait_for_controller(Duration::from_secs(5)).await;
        }
        // Clients connect from here on; until now their connections waited in the listen
        // backlog, so that a single node's first requests find it leading its partitions.
        let limits = ServerLimits {
            max_connections: laminar_net::open_files::fit_connections(config.max_connections),
            max_inflight_requests_per_connection: config.max_inflight_requests_per_connection,
            socket_request_max_bytes: config.socket_request_max_bytes,
            queued_max_request_bytes: config.queued_max_request_bytes,
            socket_send_chunk_bytes: config.socket_send_chunk_bytes,
            socket_send_buffer_bytes: config.socket_send_buffer_bytes,
            max_connection_creation_rate: config.max_connection_creation_rate,
            max_connections_per_ip: config.max_connections_per_ip,
            max_connections_per_ip_overrides: config.max_connections_per_ip_overrides.clone(),
            queued_max_unauthenticated_request_bytes: config.queued_max_unauthenticated_request_bytes,
            event_loop_stall_threshold: Duration::from_millis(config.event_loop_stall_threshold_ms),
        };
        let server = laminar_net::serve(
            tcp_listeners,
            broker.clone(),
            limits,
            if wiring.send_cold_reads_on_socket_threads {
                IoPool::on_caller_thread()
            } else {
                broker.io.clone()
            },
            broker.metrics.net.clone(),
        );
        Ok(RunningBroker {
            broker,
            server,
            retention,
            producer_expiry,
            offline_logs,
            group_timer,
            group_writer,
            txn_timer,
            cluster_tasks,
            metrics_server,
        })
    }

    /// Where the first listener is bound.
    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.server.local_addrs[0]
    }

    /// Where each listener is bound, in the order of `listeners`.
    pub fn local_addrs(&self) -> &[std::net::SocketAddr] {
        &self.server.local_addrs
    }

    /// Where `GET /metrics` is served, unless `metrics.listeners` is `none`.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics_server.as_ref().map(|(a, _)| *a)
    }

    /// Clean shutdown: stop accepting, finish the requests in flight, flush every log and
    /// write the clean-shutdown marker.
    pub async fn shutdown(self) -> io::Result<()> {
        // The heartbeats stop (one would unfence this broker again) but images are still
        // applied while it leaves: its leaderships move first, as Kafka's controlled shutdown.
        for task in self.cluster_tasks.iter().skip(1) {
            task.abort();
        }
        self.broker.cluster.leave(&self.broker.advertised).await;
        for task in &self.cluster_tasks {
            task.abort();
        }
        self.retention.abort();
        self.producer_expiry.abort();
        self.offline_logs.abort();
        self.group_timer.abort();
        self.group_writer.abort();
        self.txn_timer.abort();
        if let Some((_, task)) = &self.metrics_server {
            task.abort();
        }
        // Requests in flight finish; those waiting on a rebalance are answered now.
        self.broker.groups.coordinator.shutdown();
        self.server.shutdown().await;
        // The group changes since the writer's last round, the requests just finished
        // included. (A round the abort cut short either appended already or took nothing:
        // the taking happens on the storage thread, with the append.)
        let persisted = self.broker.groups.persist_changes().await;
        if persisted != ErrorCode::None && persisted != ErrorCode::NotCoordinator {
            crate::warn!("the last group changes were not written: the next start restores older ones");
        }
        let store = self.broker.store.clone();
        tokio::task::spawn_blocking(move || store.close())
            .await
            .expect("close task")
            .map_err(io::Error::other)?;
        crate::info!("laminar stopped cleanly");
        Ok(())
    }
}

/// How long a single node's start waits to lead its partitions and coordinate.
const READY_WAIT: Duration = Duration::from_secs(10);

/// A single node leads every partition it hosts once its own controller has registered and
/// unfenced it: `start` returns then (and the group and transaction coordinators are
/// loaded), so that its first clients find it serving, as before it was a cluster of one.
async fn ready_alone(b: &Arc<Broker>) {
    let started = std::time::Instant::now();
    let ready = || {
        let image = b.cluster.image();
        let internal = [
            laminar_coordinators::groups::store::OFFSETS_TOPIC,
            laminar_coordinators::txn::log::TRANSACTION_TOPIC,
        ];
        !b.cluster.is_fenced()
            && internal.iter().all(|t| image.topics.contains_key(*t))
            && image
                .topics
                .values()
                .all(|t| (0..t.partitions.len() as i32).all(|p| b.partitions.leadership(&t.name, p).is_ok()))
            && b.groups.ready().is_ok()
            && b.txns.epoch().is_ok()
    };
    while !ready() {
        if started.elapsed() > READY_WAIT {
            crate::warn!("not yet leading every partition {READY_WAIT:?} after the start: serving anyway");
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    crate::info!(
        "leading every partition, {:?} after the controller started",
        started.elapsed()
    );
}
