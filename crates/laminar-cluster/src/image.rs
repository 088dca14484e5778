//! The cluster metadata: what the controller quorum agrees on, and the commands that change
//! it.
//!
//! Applying a command is deterministic and depends only on the image and the command, so
//! every controller that applies the same log holds the same image. Decisions that need
//! randomness or the clock (a topic id, a replica placement, that a broker's session
//! expired) are taken by the proposer and written into the command; decisions that follow
//! from the image (who leads a partition once its leader is fenced) are taken here, in
//! `apply`, so that no proposer can get them wrong.

use crate::TopicPartition;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use laminar_protocol::ErrorCode;

/// A Kafka broker id (`node.id`). Stored as its number (`serde(transparent)`), so the
/// controller's log and snapshots read the same as when it was a plain integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BrokerId(pub i32);

impl std::fmt::Display for BrokerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl From<BrokerId> for kafka_protocol::messages::BrokerId {
    fn from(id: BrokerId) -> Self {
        kafka_protocol::messages::BrokerId(id.0)
    }
}

/// A partition's leader epoch: raised at every change of its leader, stamped on the batches
/// appended in it, and compared on every request that names one (KIP-320). Stored as its
/// number, as [`BrokerId`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LeaderEpoch(pub i32);

impl LeaderEpoch {
    /// The epoch a new leader takes.
    pub fn next(self) -> LeaderEpoch {
        LeaderEpoch(self.0 + 1)
    }
}

impl std::fmt::Display for LeaderEpoch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// No leader: the partition is offline.
pub const NO_LEADER: BrokerId = BrokerId(-1);

/// Where one of a broker's listeners is reached, by Kafka's listener name (Kafka's
/// `BrokerEndpoint`). A client is told the endpoints of the listener it came in on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub listener: String,
    pub host: String,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerInfo {
    pub id: BrokerId,
    /// The endpoint of the inter-broker listener: where followers fetch from this broker
    /// and coordinators send it markers.
    pub host: String,
    pub port: u16,
    /// Every listener's advertised endpoint (empty in a registration from before there were
    /// several: then every listener is `host:port`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<Endpoint>,
    /// Chosen at every start: a registration with a new one is a restart.
    pub incarnation: String,
    /// The metadata version at which it registered (Kafka's broker epoch).
    pub epoch: u64,
    /// Fenced brokers lead nothing and are not in any ISR they could leave. A broker is
    /// fenced when it registers and unfenced by its first heartbeat; fenced again when its
    /// session expires or it restarts.
    pub fenced: bool,
}

impl BrokerInfo {
    /// Where a client that came in on `listener` reaches this broker: `None` if it has no
    /// such listener (Kafka leaves the broker out of that client's metadata).
    pub fn endpoint(&self, listener: &str) -> Option<(&str, u16)> {
        if self.endpoints.is_empty() {
            return Some((&self.host, self.port));
        }
        self.endpoints
            .iter()
            .find(|e| e.listener == listener)
            .map(|e| (e.host.as_str(), e.port))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionInfo {
    /// In preference order: the first live member of the ISR leads.
    pub replicas: Vec<BrokerId>,
    pub leader: BrokerId,
    pub leader_epoch: LeaderEpoch,
    /// Never empty (KIP-841): when its last member is fenced it stays, and the partition is
    /// offline until that broker returns.
    pub isr: Vec<BrokerId>,
    /// Bumped by every change to this partition.
    pub partition_epoch: i32,
    /// A reassignment in progress (Kafka's KIP-455): `replicas` holds the target replicas
    /// followed by those being removed; `adding` are target replicas not in the original set,
    /// `removing` original replicas not in the target. Both empty when none is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adding: Vec<BrokerId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removing: Vec<BrokerId>,
    /// Replicas whose log went offline (a failed fsync) on the broker as it runs now: they
    /// lead nothing and join no ISR until that broker registers again (its restart
    /// recovers the log).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offline: Vec<BrokerId>,
}

impl PartitionInfo {
    /// Whether `r` may lead: an ISR member, live, with its log online.
    fn may_lead(&self, r: BrokerId, live: &[BrokerId]) -> bool {
        self.isr.contains(&r) && live.contains(&r) && !self.offline.contains(&r)
    }

    /// The first replica, in preference order, that may lead (`NO_LEADER` if none), leaving
    /// out `except`.
    fn first_to_lead(&self, live: &[BrokerId], except: Option<BrokerId>) -> BrokerId {
        self.replicas
            .iter()
            .copied()
            .find(|r| Some(*r) != except && self.may_lead(*r, live))
            .unwrap_or(NO_LEADER)
    }

    /// Where the partition is headed: its replicas once a reassignment in progress is done.
    pub fn target(&self) -> Vec<BrokerId> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.removing.contains(r))
            .collect()
    }

    /// Where it came from: its replicas before the reassignment in progress.
    fn original(&self) -> Vec<BrokerId> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.adding.contains(r))
            .collect()
    }

    pub fn reassigning(&self) -> bool {
        !self.adding.is_empty() || !self.removing.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicInfo {
    pub name: String,
    /// 32 hex digits.
    pub id: String,
    pub configs: BTreeMap<String, String>,
    pub partitions: Vec<PartitionInfo>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterImage {
    pub cluster_id: String,
    pub brokers: BTreeMap<BrokerId, BrokerInfo>,
    pub topics: BTreeMap<String, TopicInfo>,
    /// Client quotas (AlterClientQuotas), the same on every broker.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quotas: Vec<crate::quotas::QuotaEntry>,
    /// Dynamic broker configs (`kafka-configs --entity-type brokers`), by entity: `""` the
    /// cluster default, else a broker's id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// SCRAM credentials (AlterUserScramCredentials), sorted by user and mechanism.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scram: Vec<crate::scram::ScramCredential>,
    /// ACLs (CreateAcls), sorted, each once.
    #[serde(default, skip_serializing_if = "laminar_auth::acl::Acls::is_empty")]
    pub acls: laminar_auth::acl::Acls,
    /// The index of the last command applied (0: none).
    pub version: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Command {
    /// Names the cluster; applied once, the first one wins.
    Bootstrap {
        cluster_id: String,
    },
    RegisterBroker {
        id: BrokerId,
        host: String,
        port: u16,
        incarnation: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        endpoints: Vec<Endpoint>,
    },
    /// The broker's session expired, or it asked to leave.
    FenceBroker {
        id: BrokerId,
        incarnation: String,
    },
    /// The broker heartbeats.
    UnfenceBroker {
        id: BrokerId,
        incarnation: String,
    },
    CreateTopic {
        name: String,
        id: String,
        configs: BTreeMap<String, String>,
        /// One replica list per partition.
        assignments: Vec<Vec<BrokerId>>,
    },
    DeleteTopic {
        name: String,
    },
    /// Adds partitions, one replica list each, to a topic that has `partitions_before`
    /// (refused if it has another count by then: two requests raced).
    CreatePartitions {
        name: String,
        assignments: Vec<Vec<BrokerId>>,
        #[serde(default)]
        partitions_before: Option<usize>,
    },
    /// Replaces a topic's configs, if they are still `previous` (the ones the change was
    /// made from: two changes that raced do not lose one).
    AlterTopicConfigs {
        name: String,
        configs: BTreeMap<String, String>,
        #[serde(default)]
        previous: Option<BTreeMap<String, String>>,
    },
    /// A leader changes its partition's ISR (Kafka's AlterPartition): applied only if the
    /// leader, its epoch and the partition epoch are still those it saw.
    AlterPartition {
        topic: String,
        partition: i32,
        leader: BrokerId,
        leader_epoch: LeaderEpoch,
        partition_epoch: i32,
        isr: Vec<BrokerId>,
    },
    /// AlterPartitionReassignments: move the partition to `target` (in preference order), or
    /// with `None` cancel the move in progress. The new replicas join as followers; the move
    /// completes when all of the target is in the ISR.
    ReassignPartition {
        topic: String,
        partition: i32,
        target: Option<Vec<BrokerId>>,
    },
    /// CreateAcls: bindings added (one already there stays once).
    CreateAcls {
        bindings: Vec<laminar_auth::acl::AclBinding>,
    },
    /// DeleteAcls: these bindings removed (the broker found them with the request's filters).
    DeleteAcls {
        bindings: Vec<laminar_auth::acl::AclBinding>,
    },
    /// AlterUserScramCredentials: (user, mechanism) pairs removed, then credentials set.
    AlterScramCredentials {
        deletions: Vec<(String, String)>,
        upsertions: Vec<crate::scram::ScramCredential>,
    },
    /// AlterClientQuotas: per client-id (`None`: the default entity), quota values set or
    /// (`None`) removed; checked by the broker that took the request.
    AlterClientQuotas {
        changes: Vec<crate::quotas::QuotaChange>,
    },
    /// Replaces the dynamic broker configs of `entity` (`""`: the cluster default; else a
    /// broker's id), if they are still `previous`.
    AlterBrokerConfigs {
        entity: String,
        configs: BTreeMap<String, String>,
        previous: BTreeMap<String, String>,
    },
    /// ElectLeaders, preferred: the partition's first replica leads again, at a new epoch,
    /// if it is live and in the ISR.
    ElectPreferredLeader {
        topic: String,
        partition: i32,
    },
    /// `broker`'s log of the partition went offline (a failed fsync) while it ran as
    /// `incarnation`: it leaves the ISR (unless it is the last member, KIP-841) and its
    /// leadership moves to a replica that may lead, until it registers again.
    ReplicaOffline {
        topic: String,
        partition: i32,
        broker: BrokerId,
        incarnation: String,
    },
}

/// Whose configs a change is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigTarget {
    Topic(String),
    /// A dynamic broker config entity: `""` the cluster default, else a broker's id.
    Broker(String),
}

/// What applying a command did: a Kafka error code and message, or nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandResult {
    #[serde(with = "code_on_the_wire")]
    pub error_code: ErrorCode,
    pub message: String,
}

/// An error code kept as Kafka's number, as it always was in the quorum's log and snapshots.
mod code_on_the_wire {
    use laminar_protocol::ErrorCode;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(code: &ErrorCode, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i16(code.code())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ErrorCode, D::Error> {
        i16::deserialize(d).map(ErrorCode::from_wire)
    }
}

impl CommandResult {
    pub fn ok() -> CommandResult {
        CommandResult {
            error_code: ErrorCode::None,
            message: String::new(),
        }
    }

    pub fn err(error_code: ErrorCode, message: String) -> CommandResult {
        CommandResult { error_code, message }
    }
}

impl ClusterImage {
    /// Whether broker `id`, started as `incarnation`, may lead and follow what this image
    /// places on it: only under its own registration, unfenced. After a restart a
    /// controller voter rebuilds, from the quorum's log, an image that still names its
    /// previous incarnation, unfenced if the controller has not noticed the restart yet;
    /// leading from it would serve, at an epoch the controller is about to end, a log and
    /// a high watermark the dead process's followers no longer back. Kafka's broker, too,
    /// is fenced from its start until the controller has its new registration.
    pub fn serves(&self, id: BrokerId, incarnation: &str) -> bool {
        self.brokers
            .get(&id)
            .is_some_and(|b| !b.fenced && b.incarnation == incarnation)
    }

    /// The partitions a preferred election would move (Kafka's automatic leader rebalancing):
    /// led by another broker than their first replica while that replica is live and in the
    /// ISR, and not being reassigned.
    pub fn imbalanced_partitions(&self) -> Vec<TopicPartition> {
        let live = self.live_brokers();
        let mut out = Vec::new();
        for (name, t) in &self.topics {
            for (i, p) in t.partitions.iter().enumerate() {
                let preferred = p.replicas[0];
                if p.leader != preferred
                    && !p.reassigning()
                    && live.contains(&preferred)
                    && p.isr.contains(&preferred)
                {
                    out.push(TopicPartition::new(name.clone(), i as i32));
                }
            }
        }
        out
    }

    /// The live broker that leads `topic`-`partition`, as clients reach it: id, host, port.
    /// `None` while the partition has no leader (or its leader is fenced).
    /// The partition's leader, where a client that came in on `listener` reaches it.
    pub fn leader_endpoint(
        &self,
        topic: &str,
        partition: i32,
        listener: &str,
    ) -> Option<(BrokerId, String, u16)> {
        let leader = self.partition(topic, partition)?.leader;
        let b = self.brokers.get(&leader).filter(|b| !b.fenced)?;
        let (host, port) = b.endpoint(listener)?;
        Some((b.id, host.to_string(), port))
    }

    pub fn live_brokers(&self) -> Vec<BrokerId> {
        self.brokers
            .values()
            .filter(|b| !b.fenced)
            .map(|b| b.id)
            .collect()
    }

    /// The configs of `target`: a topic's (`None` if there is no such topic), or a dynamic
    /// broker config entity's (empty if none are set).
    pub fn configs_of(&self, target: &ConfigTarget) -> Option<BTreeMap<String, String>> {
        match target {
            ConfigTarget::Topic(name) => self.topics.get(name).map(|t| t.configs.clone()),
            ConfigTarget::Broker(entity) => {
                Some(self.broker_configs.get(entity).cloned().unwrap_or_default())
            }
        }
    }

    /// This broker's dynamic configs: the cluster default and its own.
    pub fn dynamic_configs_of(&self, node: BrokerId) -> crate::dynamic::DynamicConfigs {
        crate::dynamic::DynamicConfigs {
            cluster_default: self.broker_configs.get("").cloned().unwrap_or_default(),
            broker: self
                .broker_configs
                .get(&node.to_string())
                .cloned()
                .unwrap_or_default(),
        }
    }

    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionInfo> {
        let p = usize::try_from(partition).ok()?;
        self.topics.get(topic)?.partitions.get(p)
    }

    /// Applies a command at log index `version`.
    pub fn apply(&mut self, version: u64, command: &Command) -> CommandResult {
        debug_assert!(version > self.version, "commands are applied in log order");
        self.version = version;
        match command {
            Command::Bootstrap { cluster_id } => {
                if self.cluster_id.is_empty() {
                    self.cluster_id = cluster_id.clone();
                }
                CommandResult::ok()
            }
            Command::RegisterBroker {
                id,
                host,
                port,
                incarnation,
                endpoints,
            } => {
                // A new incarnation is a restart: whatever the old one led or held in an
                // ISR must move before the new one, which may have lost unflushed data,
                // serves anything.
                self.fence(*id);
                for p in self.topics.values_mut().flat_map(|t| t.partitions.iter_mut()) {
                    p.offline.retain(|r| r != id);
                }
                self.brokers.insert(
                    *id,
                    BrokerInfo {
                        id: *id,
                        host: host.clone(),
                        port: *port,
                        endpoints: endpoints.clone(),
                        incarnation: incarnation.clone(),
                        epoch: version,
                        fenced: true,
                    },
                );
                CommandResult::ok()
            }
            Command::FenceBroker { id, incarnation } => {
                if self
                    .brokers
                    .get(id)
                    .is_some_and(|b| &b.incarnation == incarnation)
                {
                    self.fence(*id);
                }
                CommandResult::ok()
            }
            Command::UnfenceBroker { id, incarnation } => {
                match self.brokers.get_mut(id) {
                    Some(b) if &b.incarnation == incarnation => {
                        if b.fenced {
                            b.fenced = false;
                            self.unfence(*id);
                        }
                    }
                    _ => {
                        return CommandResult::err(
                            ErrorCode::StaleBrokerEpoch,
                            format!("broker {id} has registered again since"),
                        )
                    }
                }
                CommandResult::ok()
            }
            Command::CreateTopic {
                name,
                id,
                configs,
                assignments,
            } => {
                if self.topics.contains_key(name) {
                    return CommandResult::err(
                        ErrorCode::TopicAlreadyExists,
                        format!("topic {name} already exists"),
                    );
                }
                if let Err(e) = self.check_assignments(assignments) {
                    return e;
                }
                let partitions = assignments.iter().map(|r| self.new_partition(r)).collect();
                self.topics.insert(
                    name.clone(),
                    TopicInfo {
                        name: name.clone(),
                        id: id.clone(),
                        configs: configs.clone(),
                        partitions,
                    },
                );
                CommandResult::ok()
            }
            Command::DeleteTopic { name } => match self.topics.remove(name) {
                Some(_) => CommandResult::ok(),
                None => CommandResult::err(ErrorCode::UnknownTopicOrPartition, format!("no topic {name}")),
            },
            Command::CreatePartitions {
                name,
                assignments,
                partitions_before,
            } => {
                if let Err(e) = self.check_assignments(assignments) {
                    return e;
                }
                let new: Vec<PartitionInfo> = assignments.iter().map(|r| self.new_partition(r)).collect();
                match self.topics.get_mut(name) {
                    Some(t) if partitions_before.is_some_and(|n| n != t.partitions.len()) => {
                        CommandResult::err(
                            ErrorCode::InvalidPartitions,
                            format!("topic {name} has {} partitions now", t.partitions.len()),
                        )
                    }
                    Some(t) => {
                        t.partitions.extend(new);
                        CommandResult::ok()
                    }
                    None => {
                        CommandResult::err(ErrorCode::UnknownTopicOrPartition, format!("no topic {name}"))
                    }
                }
            }
            Command::AlterPartition {
                topic,
                partition,
                leader,
                leader_epoch,
                partition_epoch,
                isr,
            } => self.alter_partition(topic, *partition, *leader, *leader_epoch, *partition_epoch, isr),
            Command::ReassignPartition {
                topic,
                partition,
                target,
            } => self.reassign(topic, *partition, target.as_deref()),
            Command::AlterClientQuotas { changes } => {
                crate::quotas::apply_changes(&mut self.quotas, changes);
                CommandResult::ok()
            }
            Command::CreateAcls { bindings } => {
                self.acls.insert(bindings.iter().cloned());
                CommandResult::ok()
            }
            Command::DeleteAcls { bindings } => {
                self.acls.remove(bindings);
                CommandResult::ok()
            }
            Command::AlterScramCredentials {
                deletions,
                upsertions,
            } => {
                crate::scram::apply_changes(&mut self.scram, deletions, upsertions);
                CommandResult::ok()
            }
            Command::AlterBrokerConfigs {
                entity,
                configs,
                previous,
            } => {
                if self.broker_configs.get(entity).unwrap_or(&BTreeMap::new()) != previous {
                    return CommandResult::err(
                        ErrorCode::InvalidUpdateVersion,
                        format!("the broker configs of {entity:?} changed meanwhile"),
                    );
                }
                if configs.is_empty() {
                    self.broker_configs.remove(entity);
                } else {
                    self.broker_configs.insert(entity.clone(), configs.clone());
                }
                CommandResult::ok()
            }
            Command::ReplicaOffline {
                topic,
                partition,
                broker,
                incarnation,
            } => self.replica_offline(topic, *partition, *broker, incarnation),
            Command::ElectPreferredLeader { topic, partition } => {
                let live = self.live_brokers();
                let Some(p) = usize::try_from(*partition)
                    .ok()
                    .and_then(|i| self.topics.get_mut(topic)?.partitions.get_mut(i))
                else {
                    return CommandResult::err(
                        ErrorCode::UnknownTopicOrPartition,
                        format!("no partition {topic}-{partition}"),
                    );
                };
                let preferred = p.replicas[0];
                if p.leader == preferred {
                    return CommandResult::err(
                        ErrorCode::ElectionNotNeeded,
                        format!("broker {preferred}, the preferred replica, leads"),
                    );
                }
                if !p.may_lead(preferred, &live) {
                    return CommandResult::err(
                        ErrorCode::PreferredLeaderNotAvailable,
                        format!("broker {preferred}, the preferred replica, is not live and in sync"),
                    );
                }
                p.leader = preferred;
                p.leader_epoch = p.leader_epoch.next();
                p.partition_epoch += 1;
                CommandResult::ok()
            }
            Command::AlterTopicConfigs {
                name,
                configs,
                previous,
            } => match self.topics.get_mut(name) {
                Some(t) if previous.as_ref().is_some_and(|p| *p != t.configs) => CommandResult::err(
                    ErrorCode::InvalidUpdateVersion,
                    format!("the configs of {name} changed meanwhile"),
                ),
                Some(t) => {
                    t.configs = configs.clone();
                    CommandResult::ok()
                }
                None => CommandResult::err(ErrorCode::UnknownTopicOrPartition, format!("no topic {name}")),
            },
        }
    }

    fn alter_partition(
        &mut self,
        topic: &str,
        partition: i32,
        leader: BrokerId,
        leader_epoch: LeaderEpoch,
        partition_epoch: i32,
        isr: &[BrokerId],
    ) -> CommandResult {
        let live: Vec<BrokerId> = self.live_brokers();
        let p = match self.partition_mut(topic, partition) {
            Ok(p) => p,
            Err(e) => return e,
        };
        if p.leader != leader || p.leader_epoch != leader_epoch {
            return CommandResult::err(
                ErrorCode::FencedLeaderEpoch,
                format!(
                    "{topic}-{partition} is led by {} at epoch {}, not {leader} at {leader_epoch}",
                    p.leader, p.leader_epoch
                ),
            );
        }
        if p.partition_epoch != partition_epoch {
            return CommandResult::err(
                ErrorCode::InvalidUpdateVersion,
                format!("{topic}-{partition} is at partition epoch {}", p.partition_epoch),
            );
        }
        if !isr.contains(&leader) || isr.iter().any(|r| !p.replicas.contains(r)) {
            return CommandResult::err(
                ErrorCode::InvalidRequest,
                format!("ISR {isr:?} of replicas {:?}", p.replicas),
            );
        }
        // A fenced broker joins no ISR (KIP-841): it could not lead. Nor does a replica whose
        // log went offline.
        if let Some(r) = isr
            .iter()
            .find(|r| !p.isr.contains(r) && (!live.contains(r) || p.offline.contains(r)))
        {
            return CommandResult::err(
                ErrorCode::IneligibleReplica,
                format!("broker {r} is fenced, or its log of {topic}-{partition} is offline"),
            );
        }
        p.isr = isr.to_vec();
        p.partition_epoch += 1;
        Self::complete_reassignment(p, &live);
        CommandResult::ok()
    }

    fn replica_offline(
        &mut self,
        topic: &str,
        partition: i32,
        broker: BrokerId,
        incarnation: &str,
    ) -> CommandResult {
        if self
            .brokers
            .get(&broker)
            .is_none_or(|b| b.incarnation != incarnation)
        {
            return CommandResult::err(
                ErrorCode::StaleBrokerEpoch,
                format!("broker {broker} has registered again since"),
            );
        }
        let live = self.live_brokers();
        let p = match self.partition_mut(topic, partition) {
            Ok(p) => p,
            Err(e) => return e,
        };
        if !p.replicas.contains(&broker) {
            return CommandResult::err(
                ErrorCode::NotLeaderOrFollower,
                format!("broker {broker} holds no replica of {topic}-{partition}"),
            );
        }
        if p.offline.contains(&broker) {
            return CommandResult::ok();
        }
        p.offline.push(broker);
        if p.isr.contains(&broker) && p.isr.len() > 1 {
            p.isr.retain(|r| *r != broker);
        }
        if p.leader == broker {
            p.leader = p.first_to_lead(&live, Some(broker));
            p.leader_epoch = p.leader_epoch.next();
        }
        p.partition_epoch += 1;
        CommandResult::ok()
    }

    fn partition_mut(&mut self, topic: &str, partition: i32) -> Result<&mut PartitionInfo, CommandResult> {
        usize::try_from(partition)
            .ok()
            .and_then(|i| self.topics.get_mut(topic)?.partitions.get_mut(i))
            .ok_or_else(|| {
                CommandResult::err(
                    ErrorCode::UnknownTopicOrPartition,
                    format!("no partition {topic}-{partition}"),
                )
            })
    }

    fn reassign(&mut self, topic: &str, partition: i32, target: Option<&[BrokerId]>) -> CommandResult {
        if let Some(target) = target {
            if let Err(e) = self.check_assignments(&[target.to_vec()]) {
                return e;
            }
        }
        let live: Vec<BrokerId> = self.live_brokers();
        let p = match self.partition_mut(topic, partition) {
            Ok(p) => p,
            Err(e) => return e,
        };
        if target.is_none() && !p.reassigning() {
            return CommandResult::err(
                ErrorCode::NoReassignmentInProgress,
                format!("{topic}-{partition} is not being reassigned"),
            );
        }
        // A move in progress is undone first, as Kafka's controller does, whether it is
        // cancelled or replaced by another: back to the original replicas, those of them in
        // sync staying in the ISR, a leader no longer among them replaced.
        if p.reassigning() {
            let original = p.original();
            let isr: Vec<BrokerId> = p.isr.iter().copied().filter(|r| original.contains(r)).collect();
            if isr.is_empty() {
                return CommandResult::err(
                    ErrorCode::InvalidReplicaAssignment,
                    format!("none of {topic}-{partition}'s original replicas {original:?} is in sync"),
                );
            }
            p.replicas = original;
            p.isr = isr;
            p.adding.clear();
            p.removing.clear();
            p.partition_epoch += 1;
            Self::lead_from_replicas(p, &live);
        }
        let Some(target) = target else {
            return CommandResult::ok();
        };
        let original = p.replicas.clone();
        if target == original.as_slice() {
            return CommandResult::ok(); // already there
        }
        let mut replicas = target.to_vec();
        replicas.extend(original.iter().copied().filter(|r| !target.contains(r)));
        p.adding = target.iter().copied().filter(|r| !original.contains(r)).collect();
        p.removing = original.iter().copied().filter(|r| !target.contains(r)).collect();
        p.replicas = replicas;
        p.partition_epoch += 1;
        Self::complete_reassignment(p, &live);
        CommandResult::ok()
    }

    /// A reassignment whose target is all in sync is done: the replicas become the target,
    /// the removed ones leave the ISR, and if the leader was removed a target replica in
    /// sync leads at a new epoch (KIP-455).
    fn complete_reassignment(p: &mut PartitionInfo, live: &[BrokerId]) {
        if !p.reassigning() {
            return;
        }
        let target = p.target();
        if !target.iter().all(|r| p.isr.contains(r)) {
            return;
        }
        p.isr.retain(|r| target.contains(r));
        p.replicas = target;
        p.adding.clear();
        p.removing.clear();
        p.partition_epoch += 1;
        Self::lead_from_replicas(p, live);
    }

    /// A leader no longer among the replicas hands over to the first live ISR member.
    fn lead_from_replicas(p: &mut PartitionInfo, live: &[BrokerId]) {
        if p.replicas.contains(&p.leader) {
            return;
        }
        p.leader = p.first_to_lead(live, None);
        p.leader_epoch = p.leader_epoch.next();
    }

    fn check_assignments(&self, assignments: &[Vec<BrokerId>]) -> Result<(), CommandResult> {
        for replicas in assignments {
            let mut seen = replicas.clone();
            seen.sort_unstable();
            seen.dedup();
            if replicas.is_empty() || seen.len() != replicas.len() {
                return Err(CommandResult::err(
                    ErrorCode::InvalidReplicaAssignment,
                    format!("replicas {replicas:?}: must be distinct brokers, at least one"),
                ));
            }
            if let Some(unknown) = replicas.iter().find(|r| !self.brokers.contains_key(r)) {
                return Err(CommandResult::err(
                    ErrorCode::InvalidReplicaAssignment,
                    format!("broker {unknown} is not registered"),
                ));
            }
        }
        Ok(())
    }

    fn new_partition(&self, replicas: &[BrokerId]) -> PartitionInfo {
        let leader = replicas
            .iter()
            .copied()
            .find(|r| self.brokers.get(r).is_some_and(|b| !b.fenced))
            .unwrap_or(NO_LEADER);
        PartitionInfo {
            replicas: replicas.to_vec(),
            leader,
            leader_epoch: LeaderEpoch(0),
            isr: replicas.to_vec(),
            partition_epoch: 0,
            adding: Vec::new(),
            removing: Vec::new(),
            offline: Vec::new(),
        }
    }

    /// Takes `id` out of every ISR it is not the last member of, and moves its leaderships
    /// to the first live ISR member; a partition with none goes offline.
    fn fence(&mut self, id: BrokerId) {
        let Some(b) = self.brokers.get_mut(&id) else {
            return;
        };
        b.fenced = true;
        let live: Vec<BrokerId> = self.live_brokers();
        for t in self.topics.values_mut() {
            for p in &mut t.partitions {
                let mut changed = false;
                if p.isr.contains(&id) && p.isr.len() > 1 {
                    p.isr.retain(|r| *r != id);
                    changed = true;
                }
                if p.leader == id {
                    p.leader = p.first_to_lead(&live, Some(id));
                    p.leader_epoch = p.leader_epoch.next();
                    changed = true;
                }
                if changed {
                    p.partition_epoch += 1;
                }
                debug_assert!(!p.isr.is_empty(), "an ISR is never empty");
            }
        }
    }

    /// Offline partitions whose ISR holds `id` get it as their leader (no unclean election:
    /// only an ISR member can lead).
    fn unfence(&mut self, id: BrokerId) {
        for t in self.topics.values_mut() {
            for p in &mut t.partitions {
                if p.leader == NO_LEADER
                    && p.isr.contains(&id)
                    && p.replicas.contains(&id)
                    && !p.offline.contains(&id)
                {
                    p.leader = id;
                    p.leader_epoch = p.leader_epoch.next();
                    p.partition_epoch += 1;
                }
            }
        }
    }
}

/// Kafka's placement without racks: partition `p`'s first replica is broker
/// `(start + p) mod n`, and the others follow it in order, shifted by `(start + p) / n` so
/// that followers spread too. `brokers` must be sorted.
pub fn assign_replicas(
    brokers: &[BrokerId],
    partitions: usize,
    replication_factor: usize,
    start: usize,
) -> Vec<Vec<BrokerId>> {
    assert!(replication_factor >= 1 && replication_factor <= brokers.len());
    let n = brokers.len();
    (0..partitions)
        .map(|p| {
            let first = (start + p) % n;
            let shift = 1 + (start + p) / n % (n.max(2) - 1);
            (0..replication_factor)
                .map(|r| {
                    if r == 0 {
                        brokers[first]
                    } else {
                        brokers[(first + shift * r) % n]
                    }
                })
                .collect::<Vec<_>>()
        })
        .map(|mut replicas| {
            // With n = 2 the shift is always 1, but guard against repeats for any n.
            let mut seen = std::collections::BTreeSet::new();
            replicas.retain(|r| seen.insert(*r));
            for b in brokers {
                if replicas.len() == replication_factor {
                    break;
                }
                if !replicas.contains(b) {
                    replicas.push(*b);
                }
            }
            replicas
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_result_keeps_kafkas_number_in_the_quorums_log() {
        let r = CommandResult::err(ErrorCode::TopicAlreadyExists, "t".into());
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(json, r#"{"error_code":36,"message":"t"}"#);
        assert_eq!(serde_json::from_str::<CommandResult>(&json).unwrap(), r);
    }

    fn ids(ids: &[i32]) -> Vec<BrokerId> {
        ids.iter().copied().map(BrokerId).collect()
    }

    /// A broker id is stored as its number, as before it had a type of its own: a controller
    /// log or snapshot written by an older build reads the same.
    #[test]
    fn broker_ids_and_leader_epochs_are_stored_as_plain_numbers() {
        let mut image = image_with(&ids(&[1, 2]));
        create(&mut image, vec![ids(&[2, 1])]);
        let json = serde_json::to_string(&image).unwrap();
        assert!(json.contains(r#""1":{"id":1,"#), "{json}");
        assert!(
            json.contains(r#""replicas":[2,1],"leader":2,"leader_epoch":0,"#),
            "{json}"
        );
        let back: ClusterImage = serde_json::from_str(&json).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), json);
    }

    /// A restarted broker serves nothing from an image that still holds its previous
    /// incarnation unfenced (the clock round's non-monotonic poll, issue 29): only its own
    /// registration, once unfenced, lets it lead or follow.
    #[test]
    fn a_broker_serves_only_under_its_own_unfenced_registration() {
        let mut image = image_with(&ids(&[1, 2]));
        assert!(image.serves(BrokerId(1), "i1"));
        assert!(
            !image.serves(BrokerId(1), "restarted"),
            "the old incarnation's image"
        );
        assert!(!image.serves(BrokerId(3), "i3"), "not registered");
        let v = image.version;
        let register = Command::RegisterBroker {
            id: BrokerId(1),
            host: "127.0.0.1".into(),
            port: 9001,
            incarnation: "restarted".into(),
            endpoints: Vec::new(),
        };
        image.apply(v + 1, &register);
        assert!(
            !image.serves(BrokerId(1), "restarted"),
            "registered, still fenced"
        );
        assert!(!image.serves(BrokerId(1), "i1"));
        let unfence = Command::UnfenceBroker {
            id: BrokerId(1),
            incarnation: "restarted".into(),
        };
        image.apply(v + 2, &unfence);
        assert!(image.serves(BrokerId(1), "restarted"));
        assert!(!image.serves(BrokerId(1), "i1"));
    }

    fn image_with(brokers: &[BrokerId]) -> ClusterImage {
        let mut image = ClusterImage::default();
        let mut v = 0;
        for id in brokers {
            v += 1;
            image.apply(
                v,
                &Command::RegisterBroker {
                    id: *id,
                    host: "127.0.0.1".into(),
                    port: 9000 + id.0 as u16,
                    incarnation: format!("i{id}"),
                    endpoints: Vec::new(),
                },
            );
            v += 1;
            image.apply(
                v,
                &Command::UnfenceBroker {
                    id: *id,
                    incarnation: format!("i{id}"),
                },
            );
        }
        image
    }

    /// `leader`, leading `t-0` as `p` has it, asks for the ISR `isr`.
    fn set_isr(p: &PartitionInfo, leader: i32, isr: &[i32]) -> Command {
        Command::AlterPartition {
            topic: "t".into(),
            partition: 0,
            leader: BrokerId(leader),
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            isr: ids(isr),
        }
    }

    /// Applies `c` as the next version.
    fn apply(image: &mut ClusterImage, c: Command) -> CommandResult {
        let v = image.version + 1;
        image.apply(v, &c)
    }

    fn create(image: &mut ClusterImage, assignments: Vec<Vec<BrokerId>>) -> CommandResult {
        let v = image.version + 1;
        image.apply(
            v,
            &Command::CreateTopic {
                name: "t".into(),
                id: "00".repeat(16),
                configs: BTreeMap::new(),
                assignments,
            },
        )
    }

    #[test]
    fn a_fenced_leader_hands_over_to_the_next_isr_member_with_a_new_epoch() {
        let mut image = image_with(&ids(&[1, 2, 3]));
        assert_eq!(create(&mut image, vec![ids(&[1, 2, 3])]), CommandResult::ok());
        let p = image.partition("t", 0).unwrap().clone();
        assert_eq!(
            (p.leader, p.leader_epoch, p.isr.clone()),
            (BrokerId(1), LeaderEpoch(0), ids(&[1, 2, 3]))
        );
        let v = image.version + 1;
        image.apply(
            v,
            &Command::FenceBroker {
                id: BrokerId(1),
                incarnation: "i1".into(),
            },
        );
        let p = image.partition("t", 0).unwrap();
        assert_eq!(
            (p.leader, p.leader_epoch, p.isr.clone()),
            (BrokerId(2), LeaderEpoch(1), ids(&[2, 3]))
        );
        assert_eq!(p.partition_epoch, 1);
    }

    /// Issue 29, item 3: a replica whose log went offline leaves the ISR and its leadership,
    /// cannot join again while its broker runs, and may again once the broker restarts; a
    /// partition with no other replica goes offline.
    #[test]
    fn a_replica_whose_log_went_offline_leads_nothing_until_its_broker_restarts() {
        let mut image = image_with(&ids(&[1, 2, 3]));
        create(&mut image, vec![ids(&[1, 2, 3])]);
        let offline = |broker: i32, incarnation: &str| Command::ReplicaOffline {
            topic: "t".into(),
            partition: 0,
            broker: BrokerId(broker),
            incarnation: incarnation.into(),
        };
        assert_eq!(
            apply(&mut image, offline(1, "old")).error_code,
            ErrorCode::StaleBrokerEpoch
        );
        assert_eq!(apply(&mut image, offline(1, "i1")), CommandResult::ok());
        let p = image.partition("t", 0).unwrap().clone();
        assert_eq!(
            (p.leader, p.leader_epoch, p.isr.clone(), p.offline.clone()),
            (BrokerId(2), LeaderEpoch(1), ids(&[2, 3]), ids(&[1]))
        );
        // Broker 2, leading, asks for broker 1 back in the ISR.
        let rejoin = |p: &PartitionInfo| set_isr(p, 2, &[2, 3, 1]);
        assert_eq!(
            apply(&mut image, rejoin(&p)).error_code,
            ErrorCode::IneligibleReplica
        );
        // Its restart recovered the log: it may join again.
        apply(
            &mut image,
            Command::RegisterBroker {
                id: BrokerId(1),
                host: "127.0.0.1".into(),
                port: 9001,
                incarnation: "i1b".into(),
                endpoints: Vec::new(),
            },
        );
        apply(
            &mut image,
            Command::UnfenceBroker {
                id: BrokerId(1),
                incarnation: "i1b".into(),
            },
        );
        let p = image.partition("t", 0).unwrap().clone();
        assert!(p.offline.is_empty());
        assert_eq!(apply(&mut image, rejoin(&p)), CommandResult::ok());

        // A single replica: the partition goes offline, its ISR kept (KIP-841).
        let mut image = image_with(&ids(&[1]));
        create(&mut image, vec![ids(&[1])]);
        assert_eq!(apply(&mut image, offline(1, "i1")), CommandResult::ok());
        let p = image.partition("t", 0).unwrap();
        assert_eq!((p.leader, p.isr.clone()), (NO_LEADER, ids(&[1])));
    }

    #[test]
    fn a_preferred_election_needs_the_first_replica_live_and_in_sync() {
        let mut image = image_with(&ids(&[1, 2, 3]));
        create(&mut image, vec![ids(&[1, 2, 3])]);
        let elect = || Command::ElectPreferredLeader {
            topic: "t".into(),
            partition: 0,
        };
        assert_eq!(
            apply(&mut image, elect()).error_code,
            ErrorCode::ElectionNotNeeded
        );
        assert!(image.imbalanced_partitions().is_empty());
        apply(
            &mut image,
            Command::FenceBroker {
                id: BrokerId(1),
                incarnation: "i1".into(),
            },
        );
        apply(
            &mut image,
            Command::UnfenceBroker {
                id: BrokerId(1),
                incarnation: "i1".into(),
            },
        );
        // Back, but not in sync yet: it cannot lead.
        assert_eq!(
            apply(&mut image, elect()).error_code,
            ErrorCode::PreferredLeaderNotAvailable
        );
        let p = image.partition("t", 0).unwrap().clone();
        assert_eq!(p.leader, BrokerId(2));
        assert!(
            image.imbalanced_partitions().is_empty(),
            "its first replica is not in sync"
        );
        apply(&mut image, set_isr(&p, 2, &[2, 3, 1]));
        assert_eq!(image.imbalanced_partitions(), vec![TopicPartition::new("t", 0)]);
        assert_eq!(apply(&mut image, elect()), CommandResult::ok());
        assert!(image.imbalanced_partitions().is_empty());
        let q = image.partition("t", 0).unwrap();
        assert_eq!((q.leader, q.leader_epoch), (BrokerId(1), p.leader_epoch.next()));
        assert_eq!(q.partition_epoch, p.partition_epoch + 2);
        assert_eq!(
            apply(
                &mut image,
                Command::ElectPreferredLeader {
                    topic: "u".into(),
                    partition: 0
                }
            )
            .error_code,
            ErrorCode::UnknownTopicOrPartition
        );
    }

    #[test]
    fn the_last_isr_member_stays_and_leads_again_when_it_returns() {
        let mut image = image_with(&ids(&[1, 2]));
        create(&mut image, vec![ids(&[1])]);
        let v = image.version + 1;
        image.apply(
            v,
            &Command::FenceBroker {
                id: BrokerId(1),
                incarnation: "i1".into(),
            },
        );
        let p = image.partition("t", 0).unwrap();
        assert_eq!((p.leader, p.isr.clone()), (NO_LEADER, ids(&[1])));
        // Broker 2 is not in the ISR: no unclean election.
        let v = image.version + 1;
        image.apply(
            v,
            &Command::UnfenceBroker {
                id: BrokerId(2),
                incarnation: "i2".into(),
            },
        );
        assert_eq!(image.partition("t", 0).unwrap().leader, NO_LEADER);
        let v = image.version + 1;
        image.apply(
            v,
            &Command::UnfenceBroker {
                id: BrokerId(1),
                incarnation: "i1".into(),
            },
        );
        let p = image.partition("t", 0).unwrap();
        assert_eq!((p.leader, p.leader_epoch), (BrokerId(1), LeaderEpoch(2)));
    }

    #[test]
    fn a_restart_fences_the_old_incarnation_and_a_stale_one_cannot_unfence() {
        let mut image = image_with(&ids(&[1, 2]));
        create(&mut image, vec![ids(&[1, 2])]);
        let v = image.version + 1;
        image.apply(
            v,
            &Command::RegisterBroker {
                id: BrokerId(1),
                host: "127.0.0.1".into(),
                port: 9001,
                incarnation: "again".into(),
                endpoints: Vec::new(),
            },
        );
        let p = image.partition("t", 0).unwrap();
        assert_eq!((p.leader, p.isr.clone()), (BrokerId(2), ids(&[2])));
        assert!(image.brokers[&BrokerId(1)].fenced);
        let v = image.version + 1;
        let stale = image.apply(
            v,
            &Command::UnfenceBroker {
                id: BrokerId(1),
                incarnation: "i1".into(),
            },
        );
        assert_eq!(stale.error_code, ErrorCode::StaleBrokerEpoch);
        assert!(image.brokers[&BrokerId(1)].fenced);
    }

    #[test]
    fn a_reassignment_completes_when_its_target_is_in_sync_and_moves_a_removed_leader() {
        let mut image = image_with(&ids(&[1, 2, 3, 4]));
        create(&mut image, vec![ids(&[1, 2, 3])]);
        let reassign = |target: Option<Vec<BrokerId>>| Command::ReassignPartition {
            topic: "t".into(),
            partition: 0,
            target,
        };
        assert_eq!(
            apply(&mut image, reassign(Some(ids(&[2, 3, 4])))),
            CommandResult::ok()
        );
        let p = image.partition("t", 0).unwrap().clone();
        assert_eq!(
            p.replicas,
            ids(&[2, 3, 4, 1]),
            "the target first, then the removed"
        );
        assert_eq!((p.adding.clone(), p.removing.clone()), (ids(&[4]), ids(&[1])));
        assert_eq!(
            (p.leader, p.leader_epoch, p.isr.clone()),
            (BrokerId(1), LeaderEpoch(0), ids(&[1, 2, 3]))
        );
        // Broker 4 catches up: the leader adds it to the ISR, and the move is done.
        let alter = Command::AlterPartition {
            topic: "t".into(),
            partition: 0,
            leader: BrokerId(1),
            leader_epoch: LeaderEpoch(0),
            partition_epoch: p.partition_epoch,
            isr: ids(&[1, 2, 3, 4]),
        };
        assert_eq!(apply(&mut image, alter), CommandResult::ok());
        let p = image.partition("t", 0).unwrap().clone();
        assert_eq!(p.replicas, ids(&[2, 3, 4]));
        assert!(!p.reassigning());
        assert_eq!(
            (p.leader, p.leader_epoch, p.isr.clone()),
            (BrokerId(2), LeaderEpoch(1), ids(&[2, 3, 4]))
        );
        assert_eq!(
            apply(&mut image, reassign(None)).error_code,
            ErrorCode::NoReassignmentInProgress
        );
        assert_eq!(
            apply(&mut image, reassign(Some(ids(&[2, 2])))).error_code,
            ErrorCode::InvalidReplicaAssignment
        );
    }

    #[test]
    fn partitions_are_added_only_to_the_count_they_were_asked_from() {
        let mut image = image_with(&ids(&[1, 2]));
        create(&mut image, vec![ids(&[1, 2])]);
        let add = |before| Command::CreatePartitions {
            name: "t".into(),
            assignments: vec![ids(&[2, 1])],
            partitions_before: Some(before),
        };
        let v = image.version + 1;
        assert_eq!(image.apply(v, &add(1)), CommandResult::ok());
        // A second request made from the same count lost the race.
        let v = image.version + 1;
        assert_eq!(image.apply(v, &add(1)).error_code, ErrorCode::InvalidPartitions);
        let t = &image.topics["t"];
        assert_eq!(t.partitions.len(), 2);
        assert_eq!(
            (t.partitions[1].leader, t.partitions[1].isr.clone()),
            (BrokerId(2), ids(&[2, 1]))
        );
    }

    #[test]
    fn a_reassignment_replacing_one_in_progress_undoes_it_first() {
        let mut image = image_with(&ids(&[1, 2, 3, 4, 5, 6]));
        create(&mut image, vec![ids(&[1, 2, 3])]);
        let reassign = |target: Vec<BrokerId>| Command::ReassignPartition {
            topic: "t".into(),
            partition: 0,
            target: Some(target),
        };
        apply(&mut image, reassign(ids(&[4, 5, 6])));
        let epoch = image.partition("t", 0).unwrap().partition_epoch;
        let alter = Command::AlterPartition {
            topic: "t".into(),
            partition: 0,
            leader: BrokerId(1),
            leader_epoch: LeaderEpoch(0),
            partition_epoch: epoch,
            isr: ids(&[1, 2, 3, 4]),
        };
        assert_eq!(apply(&mut image, alter), CommandResult::ok());
        // The leader dies: broker 4, in sync, takes over.
        apply(
            &mut image,
            Command::FenceBroker {
                id: BrokerId(1),
                incarnation: "i1".into(),
            },
        );
        assert_eq!(image.partition("t", 0).unwrap().leader, BrokerId(4));
        // Back to the original replicas by a new move: 4 is no replica any more, so it
        // neither leads nor stays in the ISR.
        assert_eq!(apply(&mut image, reassign(ids(&[1, 2, 3]))), CommandResult::ok());
        let p = image.partition("t", 0).unwrap();
        assert_eq!(
            (p.replicas.clone(), p.isr.clone()),
            (ids(&[1, 2, 3]), ids(&[2, 3]))
        );
        assert_eq!((p.leader, p.leader_epoch), (BrokerId(2), LeaderEpoch(2)));
        assert!(!p.reassigning());
    }

    #[test]
    fn a_cancelled_reassignment_goes_back_to_the_original_replicas() {
        let mut image = image_with(&ids(&[1, 2, 3, 4]));
        create(&mut image, vec![ids(&[1, 2, 3])]);
        let mut apply = |c: Command| {
            let v = image.version + 1;
            let r = image.apply(v, &c);
            (r, image.partition("t", 0).unwrap().clone())
        };
        let (r, p) = apply(Command::ReassignPartition {
            topic: "t".into(),
            partition: 0,
            target: Some(ids(&[4, 2, 3])),
        });
        assert_eq!(r, CommandResult::ok());
        assert_eq!((p.replicas.clone(), p.leader), (ids(&[4, 2, 3, 1]), BrokerId(1)));
        let (r, p) = apply(Command::ReassignPartition {
            topic: "t".into(),
            partition: 0,
            target: None,
        });
        assert_eq!(r, CommandResult::ok());
        // As Kafka's: the original replicas are what is left without those being added.
        assert_eq!(
            (p.replicas, p.isr, p.leader, p.leader_epoch),
            (ids(&[2, 3, 1]), ids(&[1, 2, 3]), BrokerId(1), LeaderEpoch(0))
        );
        assert!(p.adding.is_empty() && p.removing.is_empty());
    }

    #[test]
    fn an_isr_change_applies_only_from_the_current_leader_at_the_current_epochs() {
        let mut image = image_with(&ids(&[1, 2, 3]));
        create(&mut image, vec![ids(&[1, 2, 3])]);
        let alter = |leader, leader_epoch, partition_epoch, isr: Vec<BrokerId>| Command::AlterPartition {
            topic: "t".into(),
            partition: 0,
            leader,
            leader_epoch,
            partition_epoch,
            isr,
        };
        let v = image.version + 1;
        assert_eq!(
            image
                .apply(v, &alter(BrokerId(2), LeaderEpoch(0), 0, ids(&[2])))
                .error_code,
            ErrorCode::FencedLeaderEpoch
        );
        assert_eq!(
            image
                .apply(v + 1, &alter(BrokerId(1), LeaderEpoch(0), 5, ids(&[1])))
                .error_code,
            ErrorCode::InvalidUpdateVersion
        );
        assert_eq!(
            image
                .apply(v + 2, &alter(BrokerId(1), LeaderEpoch(0), 0, ids(&[2])))
                .error_code,
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            image.apply(v + 3, &alter(BrokerId(1), LeaderEpoch(0), 0, ids(&[1, 3]))),
            CommandResult::ok()
        );
        let p = image.partition("t", 0).unwrap();
        assert_eq!((p.isr.clone(), p.partition_epoch), (ids(&[1, 3]), 1));
        // Broker 2 is fenced: it may not join.
        image.apply(
            v + 4,
            &Command::FenceBroker {
                id: BrokerId(2),
                incarnation: "i2".into(),
            },
        );
        assert_eq!(
            image
                .apply(v + 5, &alter(BrokerId(1), LeaderEpoch(0), 1, ids(&[1, 2, 3])))
                .error_code,
            ErrorCode::IneligibleReplica
        );
    }

    #[test]
    fn assignments_name_registered_distinct_brokers() {
        let mut image = image_with(&ids(&[1, 2]));
        assert_eq!(
            create(&mut image, vec![ids(&[1, 1])]).error_code,
            ErrorCode::InvalidReplicaAssignment
        );
        assert_eq!(
            create(&mut image, vec![ids(&[7])]).error_code,
            ErrorCode::InvalidReplicaAssignment
        );
        assert!(image.topics.is_empty());
        assert_eq!(create(&mut image, vec![ids(&[2, 1])]), CommandResult::ok());
        assert_eq!(
            create(&mut image, vec![ids(&[2, 1])]).error_code,
            ErrorCode::TopicAlreadyExists
        );
    }

    #[test]
    fn placement_spreads_leaders_and_never_repeats_a_broker() {
        for n in 1..=5 {
            let brokers: Vec<BrokerId> = (1..=n).map(BrokerId).collect();
            for rf in 1..=n as usize {
                for start in 0..n as usize {
                    let a = assign_replicas(&brokers, 12, rf, start);
                    for replicas in &a {
                        let mut d = replicas.clone();
                        d.sort_unstable();
                        d.dedup();
                        assert_eq!(d.len(), rf, "{replicas:?} (n {n}, rf {rf})");
                    }
                    let leaders: std::collections::BTreeSet<_> = a.iter().map(|r| r[0]).collect();
                    assert_eq!(leaders.len(), n as usize, "every broker leads some partition");
                }
            }
        }
    }
}
