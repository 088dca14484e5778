//! The control plane: several brokers under a controller quorum. It knows the cluster
//! metadata, the controller and its wire, and what this broker hosts; it names no request
//! handler, log or coordinator (Cargo keeps it so: it depends on no broker code).
//!
//! - [`image`]: the cluster metadata (brokers, topics, assignments, leaders, epochs, ISRs,
//!   configs, quotas) and the commands that change it, applied deterministically.
//! - [`raft`]: openraft's storage: the controller log (through the storage backend) and the
//!   state machine.
//! - [`rpc`]: the controller's wire, between controllers and from brokers.
//! - `controller`: a voter's raft node and the active controller's duties.
//! - [`replica`]: each partition this broker hosts: leader or follower, the ISR and the high
//!   watermark.
//! - [`client`]: Kafka requests to other brokers.
//! - [`voters`], [`names`], [`quotas`], [`dynamic`]: the quorum's voters, the internal
//!   topics' names, and the quota and dynamic-config records the metadata holds.
//! - [`topic_partition`]: how a partition is named, here and in the broker.
//!
//! A broker whose `node.id` is listed in `controller.quorum.voters` is also a controller
//! voter (Kafka's combined mode). Without the setting, the broker is a single node: a quorum
//! of one voter, itself, whose controller listens on a loopback port of its own. Topics,
//! partitions, configs and quotas change through the controller either way.

pub mod client;
pub mod image;
pub mod raft;
pub mod rpc;

mod controller;
pub mod dynamic;
pub mod names;
pub mod quotas;
pub mod replica;
pub mod scram;
pub mod topic_partition;
pub mod voters;

pub use image::{BrokerId, Endpoint, LeaderEpoch};
pub use topic_partition::TopicPartition;

use laminar_protocol::ErrorCode;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use image::{ClusterImage, CommandResult, TopicInfo};
use rpc::{Connection, ControllerRequest, ControllerResponse, Heartbeat, TopicRequest};

/// `log.dirs` subdirectory of a voter's controller log (its name is no log's: a log's
/// directory ends in `-<partition>`).
pub const METADATA_DIR: &str = "cluster-metadata";
/// The port a single node's own voter asks for: any (nothing but this broker calls it).
const SINGLE_VOTER_PORT_ANY: u16 = 0;
/// A request to the controller gives up after this long without an active controller.
const CONTROLLER_DEADLINE: Duration = Duration::from_secs(15);
/// A stopping broker tells the controller for at most this long.
const LEAVE_DEADLINE: Duration = Duration::from_secs(3);
/// A stopping broker waits at most this long for its leaderships to move, and then lingers
/// at most this long for the other brokers to learn of them.
const LEAVE_WAIT: Duration = Duration::from_secs(2);
/// How long one exchange with a controller may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a broker waits for its image to show a change it asked the controller for.
const IMAGE_WAIT: Duration = Duration::from_secs(5);
/// While fenced, a broker heartbeats this often, to be unfenced soon after it starts.
const FENCED_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(100);

pub use voters::{parse_voters, Voter};

/// What the controller needs from the broker's settings.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    pub broker_session_timeout: Duration,
    pub broker_heartbeat_interval: Duration,
    pub offsets_topic_segment_bytes: u64,
    pub transaction_state_log_segment_bytes: u64,
    /// How often the active controller gives partitions back to their preferred replicas
    /// (`auto.leader.rebalance.enable`, `leader.imbalance.check.interval.seconds`); `None`:
    /// never by itself.
    pub leader_imbalance_check_interval: Option<Duration>,
    /// How the controller port knows its peers (the controllers' Raft and the brokers'
    /// heartbeats and requests to them): mutual TLS (`controller.listener.names` mapped to
    /// SSL) and a shared secret. A single node with no secret makes its own at start.
    pub controller_auth: rpc::ControllerAuth,
}

/// What went wrong in the control plane. Each is answered with one Kafka error code
/// ([`ClusterError::code`]).
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("no active controller answered within {0:?} (last: {1})")]
    NoController(Duration, String),
    #[error("the controller answered a {0} with something else")]
    Protocol(&'static str),
    #[error("starting the controller: {0}")]
    Start(#[from] std::io::Error),
    /// The change was refused, by the controller's apply or by the check made before it
    /// was sent: the Kafka error code it is refused with, and why.
    #[error("{message}")]
    Refused { code: ErrorCode, message: String },
}

impl ClusterError {
    pub fn refused(code: ErrorCode, message: impl Into<String>) -> ClusterError {
        ClusterError::Refused {
            code,
            message: message.into(),
        }
    }

    /// The code a client gets: a controller that did not answer is a timeout, as Kafka's
    /// forwarded requests time out.
    pub fn code(&self) -> ErrorCode {
        match self {
            ClusterError::NoController(..) => ErrorCode::RequestTimedOut,
            ClusterError::Protocol(_) | ClusterError::Start(_) => ErrorCode::UnknownServerError,
            ClusterError::Refused { code, .. } => *code,
        }
    }
}

impl CommandResult {
    /// The command's outcome as a result: refused with its code and message, or done.
    pub fn into_result(self) -> Result<(), ClusterError> {
        match self.error_code {
            ErrorCode::None => Ok(()),
            code => Err(ClusterError::refused(code, self.message)),
        }
    }
}

/// How this broker is reached: its inter-broker endpoint (`host`, `port`) and every
/// listener's, as its registration carries them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advertised {
    pub host: String,
    pub port: u16,
    pub endpoints: Vec<Endpoint>,
}

/// This broker's view of the cluster, and its way to the controller.
pub struct Cluster {
    pub node_id: BrokerId,
    pub voters: Vec<Voter>,
    /// Chosen at start: the controller tells a restart from a late heartbeat by it.
    pub incarnation: String,
    settings: ClusterSettings,
    image_tx: watch::Sender<Arc<ClusterImage>>,
    /// This broker's connections to each voter (on the broker's runtime).
    connections: Vec<Connection>,
    /// Index in `voters` of the controller believed active.
    active_hint: Mutex<usize>,
    controller: Mutex<Option<controller::Controller>>,
    fenced: AtomicBool,
    /// Whether a heartbeat was answered by the active controller since start: from then on
    /// the image holds what the quorum held then (its ACLs and users among it).
    heard_controller: watch::Sender<bool>,
    /// The controller that answered last (metrics and Metadata's controller id).
    last_controller: AtomicI64,
    /// The partitions placed here: leading, following, or idle.
    pub replicas: replica::Replicas,
    /// Connections to the other brokers, for the transaction coordinator's markers and
    /// checks.
    pub clients: client::BrokerClients,
}

impl Cluster {
    /// Starts this node's controller voter, if it is one. Brokers start heartbeating with
    /// [`Cluster::run_heartbeats`] once they listen.
    pub fn start(
        node_id: BrokerId,
        voters: Vec<Voter>,
        storage: Arc<dyn laminar_storage::backend::Storage>,
        data_dir: &std::path::Path,
        settings: ClusterSettings,
    ) -> Result<Arc<Cluster>, ClusterError> {
        let (image_tx, _) = watch::channel(Arc::new(ClusterImage::default()));
        // A single node is a quorum of one voter, itself (KRaft's combined mode): its
        // controller listens on a loopback port of its own, for its own heartbeats.
        let mut voters = voters;
        let mut settings = settings;
        if voters.is_empty() {
            voters.push(Voter {
                id: node_id,
                addr: format!("127.0.0.1:{}", SINGLE_VOTER_PORT_ANY),
            });
            // Only this process calls it: a secret of its own, which no other local user
            // can learn, so that nobody else who reaches the loopback port is served.
            settings
                .controller_auth
                .secret
                .get_or_insert_with(laminar_auth::peer_secret::PeerSecret::random);
        }
        let controller = match voters.iter().position(|v| v.id == node_id) {
            Some(me) => {
                let c = controller::Controller::start(
                    &voters[me],
                    &voters,
                    storage,
                    data_dir.join(METADATA_DIR),
                    settings.clone(),
                    image_tx.clone(),
                )?;
                voters[me].addr = c.addr.to_string();
                Some(c)
            }
            None => None,
        };
        let connections = voters
            .iter()
            .map(|v| Connection::new(v.addr.clone(), settings.controller_auth.clone()))
            .collect();
        Ok(Arc::new(Cluster {
            node_id,
            voters,
            incarnation: uuid::Uuid::new_v4().simple().to_string(),
            settings,
            image_tx,
            connections,
            active_hint: Mutex::new(0),
            controller: Mutex::new(controller),
            fenced: AtomicBool::new(true),
            heard_controller: watch::channel(false).0,
            last_controller: AtomicI64::new(-1),
            replicas: replica::Replicas::new(node_id),
            clients: client::BrokerClients::new(node_id),
        }))
    }

    /// The newest metadata this broker knows.
    pub fn image(&self) -> Arc<ClusterImage> {
        self.image_tx.borrow().clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<Arc<ClusterImage>> {
        self.image_tx.subscribe()
    }

    /// A quorum of one voter, this broker: a single node.
    pub fn alone(&self) -> bool {
        self.voters.len() == 1 && self.voters[0].id == self.node_id
    }

    pub fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::Relaxed)
    }

    /// The active controller, as far as this broker knows (-1: none known).
    pub fn controller_id(&self) -> BrokerId {
        if let Some(c) = self.controller.lock().unwrap().as_ref() {
            if let Some(l) = c.leader() {
                return BrokerId(l as i32);
            }
        }
        BrokerId(self.last_controller.load(Ordering::Relaxed) as i32)
    }

    /// On a voter that is the active controller: waits until its state machine has applied
    /// everything the quorum committed before now, so that this broker's image is the
    /// quorum's and not only its snapshot's. False elsewhere, or if it could not confirm.
    pub async fn caught_up(&self) -> bool {
        let raft = self.controller.lock().unwrap().as_ref().map(|c| c.raft());
        match raft {
            Some(raft) => raft.ensure_linearizable().await.is_ok(),
            None => false,
        }
    }

    /// Waits until the active controller has answered a heartbeat of this broker, so that
    /// its image holds the quorum's ACLs, users and topics and not only what it last knew:
    /// a broker serves clients only from then on, as Kafka's waits for its initial
    /// metadata catch-up. Logs every `every` while it waits.
    pub async fn wait_for_controller(&self, every: Duration) {
        let mut heard = self.heard_controller.subscribe();
        loop {
            if *heard.borrow_and_update() {
                return;
            }
            if tokio::time::timeout(every, heard.changed()).await.is_err() {
                laminar_metrics::warn!(
                    "broker {}: no answer from an active controller yet; clients are not served until its metadata is here",
                    self.node_id.0
                );
            }
        }
    }

    /// Takes an image from a heartbeat, if it is newer than the one held (a voter's own
    /// state machine publishes into the same channel).
    fn publish(&self, image: ClusterImage) {
        self.image_tx.send_if_modified(|held| {
            if image.version > held.version {
                *held = Arc::new(image);
                true
            } else {
                false
            }
        });
    }

    /// Sends `request` to the active controller, following redirections and trying each
    /// voter in turn until one answers as the active controller.
    async fn call(&self, request: ControllerRequest) -> Result<ControllerResponse, ClusterError> {
        self.call_within(request, CONTROLLER_DEADLINE).await
    }

    async fn call_within(
        &self,
        request: ControllerRequest,
        wait: Duration,
    ) -> Result<ControllerResponse, ClusterError> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut target = *self.active_hint.lock().unwrap();
        let mut last = String::from("no answer yet");
        while tokio::time::Instant::now() < deadline {
            let conn = &self.connections[target];
            match conn.call(&request, CALL_TIMEOUT).await {
                Ok(response) => match response.not_leader() {
                    None => {
                        *self.active_hint.lock().unwrap() = target;
                        self.last_controller
                            .store(self.voters[target].id.0 as i64, Ordering::Relaxed);
                        return Ok(response);
                    }
                    Some(named) => {
                        last = format!("controller {} is not active", self.voters[target].id);
                        match named.and_then(|l| self.voters.iter().position(|v| v.id.0 as u64 == l)) {
                            Some(i) if i != target => target = i,
                            _ => {
                                target = (target + 1) % self.voters.len();
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                        }
                    }
                },
                Err(e) => {
                    last = format!("controller {} at {}: {e}", self.voters[target].id, conn.addr());
                    target = (target + 1) % self.voters.len();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        Err(ClusterError::NoController(wait, last))
    }

    /// Asks the active controller to create a topic, placed on the live brokers.
    pub async fn create_topic(&self, topic: TopicRequest) -> Result<CommandResult, ClusterError> {
        match self.call(ControllerRequest::CreateTopic(topic)).await? {
            ControllerResponse::Write(Ok(r)) => Ok(r),
            _ => Err(ClusterError::Protocol("CreateTopic")),
        }
    }

    /// Asks the active controller to apply a command.
    pub async fn write(&self, command: image::Command) -> Result<CommandResult, ClusterError> {
        match self.call(ControllerRequest::Write(command)).await? {
            ControllerResponse::Write(Ok(r)) => Ok(r),
            _ => Err(ClusterError::Protocol("Write")),
        }
    }

    /// This broker's log of `topic`-`partition` went offline (a failed fsync) or holds a
    /// damaged batch (`why` says which): asks the controller to take this replica out of the
    /// ISR and its leadership elsewhere, until the controller has answered. It rejoins when
    /// this broker registers again (a restart).
    pub async fn replica_offline(self: Arc<Self>, topic: String, partition: i32, why: &'static str) {
        let command = image::Command::ReplicaOffline {
            topic: topic.clone(),
            partition,
            broker: self.node_id,
            incarnation: self.incarnation.clone(),
        };
        loop {
            match self.write(command.clone()).await {
                Ok(r) if r.error_code == ErrorCode::None => {
                    laminar_metrics::warn!(
                        "{topic}-{partition}: {why}; the controller moved its leadership and ISR membership off this broker"
                    );
                    return;
                }
                Ok(r) => {
                    laminar_metrics::warn!(
                        "{topic}-{partition}: {why}; the controller answered: {}",
                        r.message
                    );
                    return;
                }
                Err(e) => {
                    laminar_metrics::warn!("{topic}-{partition}: {why}; telling the controller: {e}");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }

    /// Asks the controller for an ISR change this broker, leading, decided; whatever the
    /// outcome, the partition may ask again (a committed change arrives with the image).
    pub async fn change_isr(self: Arc<Self>, change: replica::IsrChange) {
        let command = image::Command::AlterPartition {
            topic: change.topic.clone(),
            partition: change.partition,
            leader: self.node_id,
            leader_epoch: change.leader_epoch,
            partition_epoch: change.partition_epoch,
            isr: change.isr.clone(),
        };
        let outcome = self.write(command).await;
        let replica = self.replicas.get(&change.topic, change.partition);
        match &outcome {
            Ok(r) if r.error_code == ErrorCode::None => {
                laminar_metrics::info!(
                    "{}-{}: ISR is now {:?}",
                    change.topic,
                    change.partition,
                    change.isr
                );
                // Applied here once the image arrives; until then the change stays pending.
            }
            Ok(r) => {
                laminar_metrics::warn!(
                    "{}-{}: ISR change to {:?} refused: {}",
                    change.topic,
                    change.partition,
                    change.isr,
                    r.message
                );
                if let Some(r) = replica {
                    r.isr_change_refused();
                }
            }
            Err(e) => {
                laminar_metrics::warn!("{}-{}: ISR change: {e}", change.topic, change.partition);
                if let Some(r) = replica {
                    r.isr_change_unknown();
                }
            }
        }
    }

    /// Shrinks the ISR of every partition led here whose followers have not caught up for
    /// `replica.lag.time.max.ms`; runs until dropped.
    pub async fn run_isr_checks(self: Arc<Self>, lag: Duration) {
        loop {
            tokio::time::sleep(lag / 4).await;
            for r in self.replicas.all() {
                if let Some(change) = r.lagging(lag) {
                    tokio::spawn(self.clone().change_isr(change));
                }
            }
        }
    }

    /// Waits until this broker's image satisfies `done`, at most `IMAGE_WAIT`.
    pub async fn wait_for(&self, done: impl Fn(&ClusterImage) -> bool) -> bool {
        self.wait_within(IMAGE_WAIT, done).await
    }

    /// Waits until this broker's image satisfies `done`, at most `wait`.
    pub async fn wait_within(&self, wait: Duration, done: impl Fn(&ClusterImage) -> bool) -> bool {
        let mut rx = self.subscribe();
        let waited = tokio::time::timeout(wait, async {
            loop {
                if done(&rx.borrow_and_update()) {
                    return;
                }
                if rx.changed().await.is_err() {
                    return std::future::pending().await;
                }
            }
        })
        .await;
        waited.is_ok()
    }

    /// Creates a topic through the controller; once created, waits until this broker's
    /// image holds it, so that the client's next Metadata here finds it.
    pub async fn create_topic_here(&self, topic: TopicRequest) -> Result<Option<TopicInfo>, ClusterError> {
        let name = topic.name.clone();
        let validate_only = topic.validate_only;
        self.create_topic(topic).await?.into_result()?;
        if validate_only {
            return Ok(None);
        }
        self.wait_for(|i| i.topics.contains_key(&name)).await;
        Ok(self.image().topics.get(&name).cloned())
    }

    /// Adds partitions to a topic through the controller (placed on the live brokers as a
    /// new topic's are, with the topic's replication factor); once added, waits until this
    /// broker's image has them.
    pub async fn add_partitions_here(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<(), ClusterError> {
        if crate::names::is_internal(name) {
            // The group log lives in its partition 0, and a group's partition follows from
            // the count: it does not change.
            return Err(ClusterError::refused(
                ErrorCode::InvalidTopicException,
                format!("{name} is an internal topic"),
            ));
        }
        let image = self.image();
        let t = image.topics.get(name).ok_or_else(|| {
            ClusterError::refused(ErrorCode::UnknownTopicOrPartition, format!("no topic {name}"))
        })?;
        let have = t.partitions.len();
        if count <= have as i32 || count as u32 > crate::names::PARTITIONS_MAX {
            return Err(ClusterError::refused(
                ErrorCode::InvalidPartitions,
                format!("topic {name} has {have} partitions; asked for {count}"),
            ));
        }
        let rf = t.partitions.first().map_or(1, |p| p.target().len());
        let live = image.live_brokers();
        if rf > live.len() {
            return Err(ClusterError::refused(
                ErrorCode::InvalidReplicationFactor,
                format!("replication factor {rf}: {} brokers are available", live.len()),
            ));
        }
        if validate_only {
            return Ok(());
        }
        let start = (uuid::Uuid::new_v4().as_u128() % live.len() as u128) as usize;
        let assignments = image::assign_replicas(&live, count as usize - have, rf, start);
        self.write(image::Command::CreatePartitions {
            name: name.to_string(),
            assignments,
            partitions_before: Some(have),
        })
        .await?
        .into_result()?;
        self.wait_for(|i| {
            i.topics
                .get(name)
                .is_some_and(|t| t.partitions.len() >= count as usize)
        })
        .await;
        Ok(())
    }

    /// Changes a topic's configs, or a dynamic broker config entity's, through the
    /// controller: `change` makes the new set from the one in this broker's image (and checks
    /// it), and the controller takes it only if the configs are still that one; if another
    /// change came first, it is made again from the newer image (a few times). Waits until
    /// this broker's image has it.
    pub async fn alter_configs_here(
        &self,
        target: image::ConfigTarget,
        change: impl Fn(&mut BTreeMap<String, String>) -> Result<(), ClusterError>,
        validate_only: bool,
    ) -> Result<(), ClusterError> {
        use image::ConfigTarget;
        const ATTEMPTS: usize = 5;
        for _ in 0..ATTEMPTS {
            let image = self.image();
            let previous = image.configs_of(&target).ok_or_else(|| match &target {
                ConfigTarget::Topic(name) => {
                    ClusterError::refused(ErrorCode::UnknownTopicOrPartition, format!("no topic {name}"))
                }
                ConfigTarget::Broker(entity) => {
                    ClusterError::refused(ErrorCode::InvalidRequest, format!("no broker {entity}"))
                }
            })?;
            let mut configs = previous.clone();
            change(&mut configs)?;
            if validate_only {
                return Ok(());
            }
            let command = match &target {
                ConfigTarget::Topic(name) => image::Command::AlterTopicConfigs {
                    name: name.clone(),
                    configs: configs.clone(),
                    previous: Some(previous),
                },
                ConfigTarget::Broker(entity) => image::Command::AlterBrokerConfigs {
                    entity: entity.clone(),
                    configs: configs.clone(),
                    previous,
                },
            };
            let r = self.write(command).await?;
            match r.error_code {
                ErrorCode::None => {
                    self.wait_for(|i| i.configs_of(&target).as_ref() == Some(&configs))
                        .await;
                    return Ok(());
                }
                // Another change came first: this broker's image learns it, then again.
                ErrorCode::InvalidUpdateVersion => {
                    self.wait_for(|i| i.version > image.version).await;
                }
                code => return Err(ClusterError::refused(code, r.message)),
            }
        }
        Err(ClusterError::refused(
            ErrorCode::RequestTimedOut,
            format!("the configs of {target:?} kept changing under {ATTEMPTS} attempts"),
        ))
    }

    /// Deletes a topic through the controller, and waits until this broker's image has
    /// lost it.
    pub async fn delete_topic_here(&self, name: &str) -> Result<(), ClusterError> {
        self.write(image::Command::DeleteTopic {
            name: name.to_string(),
        })
        .await?
        .into_result()?;
        self.wait_for(|i| !i.topics.contains_key(name)).await;
        Ok(())
    }

    async fn heartbeat(&self, me: &Advertised, leaving: bool) -> Result<bool, ClusterError> {
        // A broker that stops with the rest of the cluster may find no quorum left: it
        // does not wait long for one.
        let wait = if leaving {
            LEAVE_DEADLINE
        } else {
            CONTROLLER_DEADLINE
        };
        let h = Heartbeat {
            id: self.node_id,
            incarnation: self.incarnation.clone(),
            host: me.host.clone(),
            port: me.port,
            endpoints: me.endpoints.clone(),
            known_version: self.image().version,
            leaving,
        };
        match self.call_within(ControllerRequest::Heartbeat(h), wait).await? {
            ControllerResponse::Heartbeat(Ok(answer)) => {
                if let Some(image) = answer.image {
                    self.publish(image);
                }
                self.fenced.store(answer.fenced, Ordering::Relaxed);
                // The image held now is at least the active controller's when it answered.
                self.heard_controller.send_replace(true);
                Ok(answer.fenced)
            }
            _ => Err(ClusterError::Protocol("Heartbeat")),
        }
    }

    /// Registers this broker and heartbeats until the task is dropped.
    ///
    /// A broker that cannot reach the controller keeps serving with the metadata it has, as
    /// Kafka's brokers do: its partitions stay safe without it, because their high watermark
    /// needs every ISR member and only the controller changes an ISR. (It does not fence
    /// itself: that would stop every broker while the controller quorum elects a leader.)
    pub async fn run_heartbeats(self: Arc<Self>, me: Advertised) {
        let mut was_fenced = true;
        let mut failing = false;
        loop {
            let fenced = match self.heartbeat(&me, false).await {
                Ok(fenced) => {
                    if failing {
                        laminar_metrics::info!("broker {}: the controller answers again", self.node_id);
                        failing = false;
                    }
                    fenced
                }
                Err(e) => {
                    if !failing {
                        laminar_metrics::warn!("broker {}: heartbeat: {e}", self.node_id);
                        failing = true;
                    }
                    was_fenced
                }
            };
            if fenced != was_fenced {
                if fenced {
                    laminar_metrics::warn!(
                        "broker {} is fenced: it leads nothing until it is unfenced",
                        self.node_id
                    );
                } else {
                    laminar_metrics::info!("broker {} is registered and unfenced", self.node_id);
                }
                was_fenced = fenced;
            }
            tokio::time::sleep(if fenced && self.alone() {
                // Its own voter publishes the image it answers from: it has seen its
                // registration already, and is unfenced at the next heartbeat.
                FENCED_HEARTBEAT_INTERVAL / 10
            } else if fenced {
                FENCED_HEARTBEAT_INTERVAL
            } else {
                self.settings.broker_heartbeat_interval
            })
            .await;
        }
    }

    /// A clean stop (Kafka's controlled shutdown): the controller fences this broker at once,
    /// moving its leaderships, rather than after its session expires. It waits until this
    /// broker has stopped leading (its image applied: produce requests now get
    /// NOT_LEADER_OR_FOLLOWER with the new leader), then serves one heartbeat interval more,
    /// the time the other brokers take to learn that they lead; then this node's voter stops.
    /// The heartbeats must have stopped first (one would unfence it again); the task that
    /// applies images must still run.
    pub async fn leave(&self, me: &Advertised) {
        // Alone, there is no broker to take its leaderships: it stops leading them when the
        // process stops, and leads them again at its next start.
        let told = if self.alone() {
            Ok(false)
        } else {
            self.heartbeat(me, true).await
        };
        match told {
            Ok(_) if self.alone() => {}
            Err(e) => {
                laminar_metrics::warn!("broker {}: telling the controller it leaves: {e}", self.node_id)
            }
            Ok(_) => {
                let leads = || {
                    self.replicas
                        .all()
                        .iter()
                        .filter(|r| matches!(r.role(), replica::Role::Leader(_)))
                        .count()
                };
                let deadline = tokio::time::Instant::now() + LEAVE_WAIT;
                while leads() > 0 && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                match leads() {
                    0 => {
                        let linger = self.settings.broker_heartbeat_interval.min(LEAVE_WAIT);
                        laminar_metrics::info!(
                            "broker {}: its leaderships have moved; stopping in {linger:?}",
                            self.node_id
                        );
                        tokio::time::sleep(linger).await;
                    }
                    n => laminar_metrics::warn!(
                        "broker {}: still leading {n} partitions after {LEAVE_WAIT:?}; stopping",
                        self.node_id
                    ),
                }
            }
        }
        let controller = self.controller.lock().unwrap().take();
        if let Some(c) = controller {
            let _ = tokio::task::spawn_blocking(move || c.shutdown()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voters_parse_as_kafka_spells_them() {
        let v = parse_voters("1@127.0.0.1:9093, 2@localhost:9094").unwrap();
        assert_eq!(
            v,
            vec![
                Voter {
                    id: BrokerId(1),
                    addr: "127.0.0.1:9093".into()
                },
                Voter {
                    id: BrokerId(2),
                    addr: "localhost:9094".into()
                }
            ]
        );
        assert!(parse_voters("1@a:1,1@b:2").is_err());
        assert!(parse_voters("x@a:1").is_err());
        assert!(parse_voters("1@nohost").is_err());
        assert!(parse_voters("").unwrap().is_empty());
    }
}
