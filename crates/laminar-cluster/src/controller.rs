//! A controller voter: the raft node, its listener, and what the active controller does
//! besides replicating its log (broker sessions, placement, bootstrapping the cluster).
//!
//! It runs on its own thread (`laminar-controller`) with its own single-threaded tokio
//! runtime: the raft log's `fdatasync`s block that thread, never a socket thread. Brokers
//! reach it only through channels (openraft's) and TCP.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, ServerState};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::image::{assign_replicas, BrokerId, ClusterImage, Command, CommandResult};
use super::raft::{LogStore, NodeId, Raft, StateMachine};
use super::rpc::{
    self, ControllerRequest, ControllerResponse, Heartbeat, HeartbeatAnswer, Network, NotLeader, TopicRequest,
};
use super::{ClusterSettings, Voter};
use crate::names::TRANSACTION_TOPIC;
use laminar_protocol::ErrorCode;

/// How often the active controller looks for expired broker sessions.
const SESSION_CHECK: Duration = Duration::from_millis(200);

pub struct Controller {
    raft: Raft,
    /// Where its listener is bound (the voter's address, with the port chosen if it was 0).
    pub addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Active {
    id: NodeId,
    raft: Raft,
    image: watch::Receiver<Arc<ClusterImage>>,
    settings: ClusterSettings,
    /// When each broker last heartbeat this controller, while it is active.
    sessions: Mutex<HashMap<BrokerId, Instant>>,
    /// Since when this controller has been active (`None`: it is not).
    active_since: Mutex<Option<Instant>>,
    /// When it last looked for partitions to give back to their preferred replicas.
    last_balance: Mutex<Option<Instant>>,
    /// A look for them is under way (in a task of its own: its elections are one raft write
    /// each, and the session checks must not wait behind them).
    balancing: std::sync::atomic::AtomicBool,
    /// How many voters the quorum has: the internal topics get that many replicas, up to 3.
    voters: usize,
    /// Rings for a tick now rather than at the next `SESSION_CHECK`: a broker registered or
    /// was unfenced (a new cluster bootstraps, and gets its internal topics, without waiting).
    wake: tokio::sync::Notify,
}

impl Controller {
    /// Starts the voter `me` of `voters`, its log in `dir`; applied images go to `published`.
    pub fn start(
        me: &Voter,
        voters: &[Voter],
        storage: Arc<dyn laminar_storage::backend::Storage>,
        dir: std::path::PathBuf,
        settings: ClusterSettings,
        published: watch::Sender<Arc<ClusterImage>>,
    ) -> std::io::Result<Controller> {
        let log = LogStore::open(storage.clone(), &dir)?;
        let image = published.subscribe();
        let sm = StateMachine::open(storage, &dir, published)?;
        let listen = me.addr.clone();
        let auth = settings.controller_auth.clone();
        let id = me.id.0 as NodeId;
        let voter_count = voters.len();
        let members: BTreeMap<NodeId, BasicNode> = voters
            .iter()
            .map(|v| (v.id.0 as NodeId, BasicNode::new(v.addr.clone())))
            .collect();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("laminar-controller".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = started_tx.send(Err(e));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let listener = match TcpListener::bind(&listen).await {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = started_tx.send(Err(std::io::Error::new(
                                e.kind(),
                                format!("controller.quorum.voters: listening on {listen}: {e}"),
                            )));
                            return;
                        }
                    };
                    let config = openraft::Config {
                        cluster_name: "laminar".into(),
                        heartbeat_interval: 100,
                        election_timeout_min: 1000,
                        election_timeout_max: 2000,
                        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(1000),
                        ..Default::default()
                    };
                    let config = Arc::new(config.validate().expect("a valid raft config"));
                    let raft = match Raft::new(id, config, Network { auth: auth.clone() }, log, sm).await {
                        Ok(r) => r,
                        Err(e) => {
                            let _ = started_tx.send(Err(std::io::Error::other(format!(
                                "starting the controller: {e}"
                            ))));
                            return;
                        }
                    };
                    // Every voter initializes with the same static membership: the entries
                    // are identical, and once any voter has a log this is refused, harmlessly.
                    if !raft.is_initialized().await.unwrap_or(true) {
                        if let Err(e) = raft.initialize(members).await {
                            laminar_metrics::info!(
                                "controller {id}: the quorum was already initialized ({e})"
                            );
                        }
                    }
                    let active = Arc::new(Active {
                        id,
                        raft: raft.clone(),
                        image,
                        settings,
                        sessions: Mutex::new(HashMap::new()),
                        active_since: Mutex::new(None),
                        last_balance: Mutex::new(None),
                        balancing: std::sync::atomic::AtomicBool::new(false),
                        voters: voter_count,
                        wake: tokio::sync::Notify::new(),
                    });
                    // A quorum of one elects itself: it need not wait out an election timeout
                    // for the votes of nobody (a single node starts in well under a second).
                    if voter_count == 1 {
                        if let Err(e) = raft.trigger().elect().await {
                            laminar_metrics::warn!("controller {id}: electing itself: {e}");
                        }
                    }
                    let addr = match listener.local_addr() {
                        Ok(a) => a,
                        Err(e) => {
                            let _ = started_tx.send(Err(e));
                            return;
                        }
                    };
                    tokio::spawn(accept(listener, active.clone(), auth));
                    tokio::spawn(duties(active));
                    let _ = started_tx.send(Ok((raft.clone(), addr)));
                    let _ = stop_rx.await;
                    if let Err(e) = raft.shutdown().await {
                        laminar_metrics::warn!("controller {id}: shutting raft down: {e}");
                    }
                });
            })?;
        let (raft, addr) = started_rx
            .recv()
            .map_err(|_| std::io::Error::other("the controller thread died starting"))??;
        Ok(Controller {
            raft,
            addr,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// A handle on the raft node, for waits that run outside its thread.
    pub fn raft(&self) -> Raft {
        self.raft.clone()
    }

    /// The active controller, as this voter knows it.
    pub fn leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    pub fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn accept(listener: TcpListener, active: Arc<Active>, auth: rpc::ControllerAuth) {
    loop {
        match listener.accept().await {
            Ok((tcp, peer)) => {
                let (active, auth) = (active.clone(), auth.clone());
                // The handshake runs in the connection's own task: a slow or hostile peer
                // holds up no other.
                tokio::spawn(async move {
                    // Judged against the ACLs as they stand when the peer connects.
                    let image = active.image.borrow().clone();
                    match rpc::accepted(tcp, &auth, &image.acls).await {
                        Ok(stream) => serve(stream, active).await,
                        Err(e) => laminar_metrics::warn!(
                            "controller {}: refusing a connection from {peer}: {e}",
                            active.id
                        ),
                    }
                });
            }
            Err(e) => {
                laminar_metrics::warn!("controller {}: accept: {e}", active.id);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn serve(mut stream: Box<dyn rpc::Stream>, active: Arc<Active>) {
    loop {
        let request: ControllerRequest = match rpc::read_frame(stream.as_mut()).await {
            Ok(r) => r,
            Err(e) => {
                if e.kind() != std::io::ErrorKind::UnexpectedEof {
                    laminar_metrics::warn!("controller {}: closing a connection: {e}", active.id);
                }
                return;
            }
        };
        let response = active.handle(request).await;
        if rpc::write_frame(stream.as_mut(), &response).await.is_err() {
            return;
        }
    }
}

impl Active {
    async fn handle(&self, request: ControllerRequest) -> ControllerResponse {
        match request {
            ControllerRequest::AppendEntries(r) => {
                ControllerResponse::AppendEntries(self.raft.append_entries(r).await)
            }
            ControllerRequest::Vote(r) => ControllerResponse::Vote(self.raft.vote(r).await),
            ControllerRequest::InstallSnapshot(r) => {
                ControllerResponse::InstallSnapshot(self.raft.install_snapshot(r).await)
            }
            ControllerRequest::Heartbeat(h) => ControllerResponse::Heartbeat(self.heartbeat(h).await),
            ControllerRequest::Write(c) => ControllerResponse::Write(self.write(c).await),
            ControllerRequest::CreateTopic(t) => ControllerResponse::Write(self.create_topic(t).await),
        }
    }

    fn is_active(&self) -> bool {
        let m = self.raft.metrics().borrow().clone();
        m.state == ServerState::Leader && m.current_leader == Some(self.id)
    }

    fn not_leader(&self) -> NotLeader {
        NotLeader {
            leader: self
                .raft
                .metrics()
                .borrow()
                .current_leader
                .filter(|l| *l != self.id),
        }
    }

    async fn write(&self, command: Command) -> Result<CommandResult, NotLeader> {
        match self.raft.client_write(command).await {
            Ok(r) => Ok(r.data),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                Err(NotLeader { leader: f.leader_id })
            }
            Err(e) => {
                laminar_metrics::warn!("controller {}: a write failed: {e}", self.id);
                Err(NotLeader { leader: None })
            }
        }
    }

    async fn heartbeat(&self, h: Heartbeat) -> Result<HeartbeatAnswer, NotLeader> {
        if !self.is_active() {
            return Err(self.not_leader());
        }
        self.sessions.lock().unwrap().insert(h.id, Instant::now());
        let image = self.image.borrow().clone();
        match image.brokers.get(&h.id) {
            Some(b)
                if b.incarnation == h.incarnation
                    && b.host == h.host
                    && b.port == h.port
                    && b.endpoints == h.endpoints =>
            {
                if h.leaving {
                    if !b.fenced {
                        laminar_metrics::info!(
                            "controller {}: broker {} is leaving: fencing it",
                            self.id,
                            h.id
                        );
                        self.write(Command::FenceBroker {
                            id: h.id,
                            incarnation: h.incarnation.clone(),
                        })
                        .await?;
                    }
                } else if b.fenced && h.known_version >= b.epoch {
                    // It has seen its own registration: it is caught up enough to serve.
                    self.write(Command::UnfenceBroker {
                        id: h.id,
                        incarnation: h.incarnation.clone(),
                    })
                    .await?;
                    self.wake.notify_one();
                }
            }
            _ if h.leaving => {}
            _ => {
                laminar_metrics::info!(
                    "controller {}: broker {} registers at {}:{} (incarnation {})",
                    self.id,
                    h.id,
                    h.host,
                    h.port,
                    h.incarnation
                );
                self.write(Command::RegisterBroker {
                    id: h.id,
                    host: h.host.clone(),
                    port: h.port,
                    incarnation: h.incarnation.clone(),
                    endpoints: h.endpoints.clone(),
                })
                .await?;
                self.wake.notify_one();
            }
        }
        let image = self.image.borrow().clone();
        let fenced = image
            .brokers
            .get(&h.id)
            .is_none_or(|b| b.fenced || b.incarnation != h.incarnation);
        Ok(HeartbeatAnswer {
            fenced,
            image: (image.version > h.known_version).then(|| (*image).clone()),
        })
    }

    /// Places a new topic's replicas on the live brokers, as Kafka does without racks.
    async fn create_topic(&self, t: TopicRequest) -> Result<CommandResult, NotLeader> {
        if !self.is_active() {
            return Err(self.not_leader());
        }
        let image = self.image.borrow().clone();
        if image.topics.contains_key(&t.name) {
            return Ok(CommandResult::err(
                ErrorCode::TopicAlreadyExists,
                format!("topic {} already exists", t.name),
            ));
        }
        let live = image.live_brokers();
        let rf = t.replication_factor as usize;
        if rf == 0 || rf > live.len() {
            return Ok(CommandResult::err(
                ErrorCode::InvalidReplicationFactor,
                format!("replication factor {rf}: {} brokers are available", live.len()),
            ));
        }
        let start = (uuid::Uuid::new_v4().as_u128() % live.len() as u128) as usize;
        let assignments = assign_replicas(&live, t.partitions as usize, rf, start);
        if t.validate_only {
            return Ok(CommandResult::ok());
        }
        self.write(Command::CreateTopic {
            name: t.name,
            id: uuid::Uuid::new_v4().simple().to_string(),
            configs: t.configs,
            assignments,
        })
        .await
    }

    /// The active controller's periodic work: names the cluster, creates the internal
    /// topics once a broker can host them, and fences brokers whose session expired.
    async fn tick(self: &Arc<Self>) {
        if !self.is_active() {
            *self.active_since.lock().unwrap() = None;
            *self.last_balance.lock().unwrap() = None;
            return;
        }
        let since = *self.active_since.lock().unwrap().get_or_insert_with(|| {
            // A new controller gives every broker a whole session from now: it has no
            // heartbeats to judge by yet.
            self.sessions.lock().unwrap().clear();
            laminar_metrics::info!("controller {}: active", self.id);
            Instant::now()
        });
        let image = self.image.borrow().clone();
        if image.cluster_id.is_empty() {
            let _ = self
                .write(Command::Bootstrap {
                    cluster_id: uuid::Uuid::new_v4().simple().to_string(),
                })
                .await;
        }
        // Kafka's offsets.topic.replication.factor and transaction.state.log.replication.factor
        // are 3: as many replicas, up to 3, as there are voters, once as many brokers are live.
        let internal_rf = self.voters.clamp(1, 3);
        if image.live_brokers().len() >= internal_rf {
            for (name, segment_bytes) in [
                (
                    crate::names::OFFSETS_TOPIC,
                    self.settings.offsets_topic_segment_bytes,
                ),
                (
                    TRANSACTION_TOPIC,
                    self.settings.transaction_state_log_segment_bytes,
                ),
            ] {
                if !image.topics.contains_key(name) {
                    let configs = BTreeMap::from([
                        ("cleanup.policy".to_string(), "compact".to_string()),
                        ("segment.bytes".to_string(), segment_bytes.to_string()),
                    ]);
                    let created = self
                        .create_topic(TopicRequest {
                            name: name.to_string(),
                            partitions: 1,
                            replication_factor: internal_rf as u16,
                            configs,
                            validate_only: false,
                        })
                        .await;
                    if let Ok(r) = created {
                        if r.error_code == ErrorCode::None {
                            laminar_metrics::info!(
                                "controller {}: created the internal topic {name}",
                                self.id
                            );
                        }
                    }
                }
            }
        }
        let now = Instant::now();
        let expired: Vec<(BrokerId, String)> = {
            let sessions = self.sessions.lock().unwrap();
            image
                .brokers
                .values()
                .filter(|b| !b.fenced)
                .filter(|b| {
                    let last = sessions.get(&b.id).copied().unwrap_or(since).max(since);
                    now.duration_since(last) > self.settings.broker_session_timeout
                })
                .map(|b| (b.id, b.incarnation.clone()))
                .collect()
        };
        for (id, incarnation) in expired {
            laminar_metrics::warn!(
                "controller {}: broker {id} missed its heartbeats for broker.session.timeout.ms ({:?}): fencing it",
                self.id,
                self.settings.broker_session_timeout
            );
            let _ = self.write(Command::FenceBroker { id, incarnation }).await;
        }
        if let Some(interval) = self.settings.leader_imbalance_check_interval {
            let due = {
                let mut last = self.last_balance.lock().unwrap();
                let since = *last.get_or_insert(now);
                let due = now.duration_since(since) >= interval;
                if due {
                    *last = Some(now);
                }
                due
            };
            let idle = || !self.balancing.swap(true, std::sync::atomic::Ordering::AcqRel);
            if due && idle() {
                let active = self.clone();
                tokio::spawn(async move {
                    active.balance_leaders().await;
                    active
                        .balancing
                        .store(false, std::sync::atomic::Ordering::Release);
                });
            }
        }
    }

    /// Kafka's automatic leader rebalancing: every partition led by another broker than its
    /// first replica, while that one is live and in sync, is led by it again (a preferred
    /// election, at a new leader epoch), at most `ELECTIONS_PER_BALANCE_MAX` per look.
    /// Kafka's `leader.imbalance.per.broker.percentage` is not read: any such partition is
    /// moved.
    async fn balance_leaders(&self) {
        let image = self.image.borrow().clone();
        let due = image.imbalanced_partitions();
        if due.is_empty() {
            return;
        }
        let mut elected = 0;
        for tp in due.into_iter().take(ELECTIONS_PER_BALANCE_MAX) {
            let command = Command::ElectPreferredLeader {
                topic: tp.topic,
                partition: tp.partition,
            };
            if let Ok(r) = self.write(command).await {
                if r.error_code == ErrorCode::None {
                    elected += 1;
                }
            }
        }
        laminar_metrics::info!(
            "controller {}: {elected} partition(s) led by their preferred replica again (auto.leader.rebalance.enable)",
            self.id
        );
    }
}

/// Preferred elections per look of `balance_leaders` (Kafka's controller bounds them too).
const ELECTIONS_PER_BALANCE_MAX: usize = 1000;

async fn duties(active: Arc<Active>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(SESSION_CHECK) => {}
            _ = active.wake.notified() => {}
        }
        active.tick().await;
    }
}
