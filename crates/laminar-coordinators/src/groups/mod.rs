//! The group coordinator for Kafka's classic group protocol.
//!
//! States: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead. A rebalance starts
//! (PreparingRebalance) when a member joins, leaves, changes its protocols or misses its
//! session timeout. It completes when every member has rejoined, or at the rebalance
//! timeout, when those that did not are removed: the generation advances, a protocol every
//! member supports is chosen, and the leader receives the members' metadata to compute the
//! assignment on the client side, as in Kafka. The leader's SyncGroup delivers the
//! assignment to everyone (Stable).
//!
//! All state is behind one mutex, held only for in-memory work. JoinGroup and SyncGroup
//! responses that must wait are delivered through channels; a timer task (`tick`) enforces
//! session and rebalance timeouts. Committed offsets are persisted by [`store`] before a
//! commit is acknowledged.

pub mod records;
pub mod store;
pub mod write;

use laminar_cluster::TopicPartition;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use laminar_protocol::ErrorCode;
use records::{GroupMetadataValue, MemberValue};
use store::{GroupRecord, PendingView};

/// Kafka's bounds on a member's session timeout (group.min/max.session.timeout.ms).
pub const SESSION_TIMEOUT_MS_MIN: i32 = 1_000;
pub const SESSION_TIMEOUT_MS_MAX: i32 = 1_800_000;
/// Members of one group, at most (group.max.size).
pub const GROUP_MEMBERS_MAX: usize = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct JoinOutcome {
    pub error: ErrorCode,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Only for the leader: every member's id, instance id and metadata.
    pub members: Vec<(String, Option<String>, Bytes)>,
    /// KIP-814: a static leader that rejoined a stable group gets the members for its
    /// information but must not compute a new assignment.
    pub skip_assignment: bool,
}

impl JoinOutcome {
    fn error(error: ErrorCode, member_id: &str) -> JoinOutcome {
        JoinOutcome {
            error,
            generation: -1,
            member_id: member_id.to_string(),
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct SyncOutcome {
    pub error: ErrorCode,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

pub enum Reply<T> {
    Now(T),
    Later(oneshot::Receiver<T>),
}

#[derive(Debug)]
pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    pub last_heartbeat: Instant,
    join_waiter: Option<oneshot::Sender<JoinOutcome>>,
    sync_waiter: Option<oneshot::Sender<SyncOutcome>>,
}

impl Member {
    fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
    pub commit_ms: i64,
}

#[derive(Debug)]
pub struct Group {
    pub id: String,
    pub state: GroupState,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub generation: i32,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED that have not joined yet, and when.
    pending: HashMap<String, Instant>,
    rebalance_deadline: Option<Instant>,
    /// A new group waits this long for more members before its first generation.
    initial_delay_until: Option<Instant>,
    pub offsets: BTreeMap<TopicPartition, CommittedOffset>,
    /// The group's generation or members changed since its metadata was last written.
    metadata_changed: bool,
    /// Some metadata of the group is in the log: its removal needs a tombstone.
    metadata_written: bool,
    /// When the group last changed state (Kafka's `currentStateTimestamp`).
    state_since_ms: i64,
}

impl Group {
    fn new(id: &str) -> Group {
        Group {
            id: id.to_string(),
            state: GroupState::Empty,
            protocol_type: None,
            protocol_name: None,
            generation: 0,
            leader: None,
            members: BTreeMap::new(),
            pending: HashMap::new(),
            rebalance_deadline: None,
            initial_delay_until: None,
            offsets: BTreeMap::new(),
            metadata_changed: false,
            metadata_written: false,
            state_since_ms: laminar_storage::now_ms(),
        }
    }

    /// Enters a state in which Kafka writes the group's metadata: Stable with a new
    /// assignment, or Empty.
    fn settle(&mut self, state: GroupState) {
        self.state = state;
        self.state_since_ms = laminar_storage::now_ms();
        self.metadata_changed = true;
    }

    /// The group's metadata as Kafka writes it.
    fn metadata_value(&self) -> GroupMetadataValue {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        GroupMetadataValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol_name.clone(),
            leader: self.leader.clone(),
            current_state_timestamp_ms: self.state_since_ms,
            members: self
                .members
                .values()
                .map(|m| MemberValue {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout.as_millis() as i32,
                    session_timeout_ms: m.session_timeout.as_millis() as i32,
                    subscription: m.metadata_for(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    fn static_member(&self, instance_id: &str) -> Option<String> {
        self.members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance_id))
            .map(|m| m.id.clone())
    }

    /// The protocol every member supports that most members prefer (Kafka's vote).
    fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let candidates: Vec<&String> = first
            .protocols
            .iter()
            .map(|(n, _)| n)
            .filter(|n| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(p, _)| p == *n))
            })
            .collect();
        let mut votes: Vec<(usize, &String)> = candidates.iter().map(|c| (0, *c)).collect();
        for m in self.members.values() {
            if let Some((_, first_choice)) = m.protocols.iter().find(|(p, _)| candidates.contains(&p)) {
                if let Some(v) = votes.iter_mut().find(|(_, c)| *c == first_choice) {
                    v.0 += 1;
                }
            }
        }
        // Most votes; ties go to the first member's preference order.
        votes
            .iter()
            .max_by_key(|(n, c)| (*n, std::cmp::Reverse(candidates.iter().position(|x| x == c))))
            .map(|(_, c)| (*c).clone())
    }

    fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|(p, _)| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(q, _)| q == p))
            })
    }

    fn prepare_rebalance(&mut self, initial_delay: Duration) {
        let now = Instant::now();
        // Members still waiting for a SyncGroup answer learn that a new rebalance began.
        for m in self.members.values_mut() {
            if let Some(w) = m.sync_waiter.take() {
                let _ = w.send(SyncOutcome {
                    error: ErrorCode::RebalanceInProgress,
                    ..Default::default()
                });
            }
        }
        if self.state == GroupState::Empty
            || (self.state == GroupState::PreparingRebalance && self.initial_delay_until.is_some())
        {
            self.initial_delay_until = Some(now + initial_delay);
        }
        let timeout = self
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or(Duration::from_secs(60));
        if self.state != GroupState::PreparingRebalance {
            self.rebalance_deadline = Some(now + timeout);
        }
        self.state = GroupState::PreparingRebalance;
    }

    fn all_joined(&self) -> bool {
        self.pending.is_empty() && self.members.values().all(|m| m.join_waiter.is_some())
    }

    /// Ends the join phase: removes members that did not rejoin, advances the generation
    /// and answers every waiting JoinGroup.
    fn complete_join(&mut self) {
        self.members.retain(|_, m| m.join_waiter.is_some());
        self.pending.clear();
        self.rebalance_deadline = None;
        self.initial_delay_until = None;
        if self.members.is_empty() {
            self.generation += 1;
            self.leader = None;
            self.protocol_name = None;
            self.settle(GroupState::Empty);
            return;
        }
        self.generation += 1;
        self.protocol_name = self.select_protocol();
        let protocol = self.protocol_name.clone().unwrap_or_default();
        if !self.leader.as_ref().is_some_and(|l| self.members.contains_key(l)) {
            self.leader = self.members.keys().next().cloned();
        }
        let leader = self.leader.clone().unwrap_or_default();
        let all: Vec<(String, Option<String>, Bytes)> = self
            .members
            .values()
            .map(|m| (m.id.clone(), m.instance_id.clone(), m.metadata_for(&protocol)))
            .collect();
        self.state = GroupState::CompletingRebalance;
        let now = Instant::now();
        for m in self.members.values_mut() {
            m.last_heartbeat = now;
            m.assignment = Bytes::new();
            if let Some(w) = m.join_waiter.take() {
                let _ = w.send(JoinOutcome {
                    error: ErrorCode::None,
                    generation: self.generation,
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: self.protocol_name.clone(),
                    leader: leader.clone(),
                    member_id: m.id.clone(),
                    members: if m.id == leader { all.clone() } else { Vec::new() },
                    skip_assignment: false,
                });
            }
        }
    }

    fn remove_member(&mut self, member_id: &str, initial_delay: Duration) {
        if let Some(mut m) = self.members.remove(member_id) {
            if let Some(w) = m.join_waiter.take() {
                let _ = w.send(JoinOutcome::error(ErrorCode::UnknownMemberId, member_id));
            }
            if let Some(w) = m.sync_waiter.take() {
                let _ = w.send(SyncOutcome {
                    error: ErrorCode::UnknownMemberId,
                    ..Default::default()
                });
            }
        }
        if self.leader.as_deref() == Some(member_id) {
            self.leader = None;
        }
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                if self.members.is_empty() {
                    self.generation += 1;
                    self.protocol_name = None;
                    self.settle(GroupState::Empty);
                } else {
                    self.prepare_rebalance(initial_delay);
                }
            }
            GroupState::PreparingRebalance if self.members.is_empty() && self.pending.is_empty() => {
                self.complete_join();
            }
            _ => {}
        }
    }

    /// A JoinGroup answer that changes nothing: the generation in force.
    fn current_generation(
        &self,
        member_id: String,
        members: Vec<(String, Option<String>, Bytes)>,
        skip_assignment: bool,
    ) -> JoinOutcome {
        JoinOutcome {
            error: ErrorCode::None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id,
            members,
            skip_assignment,
        }
    }

    /// Checks a member and generation, as Heartbeat, SyncGroup and OffsetCommit do.
    fn check_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), ErrorCode> {
        if let Some(instance) = instance_id {
            if let Some(owner) = self.static_member(instance) {
                if owner != member_id {
                    return Err(ErrorCode::FencedInstanceId);
                }
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(ErrorCode::UnknownMemberId);
        }
        if generation != self.generation {
            return Err(ErrorCode::IllegalGeneration);
        }
        Ok(())
    }
}

pub struct JoinArgs {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// v4+: a new member must first ask for its id (MEMBER_ID_REQUIRED).
    pub require_known_member_id: bool,
}

pub struct Coordinator {
    pub groups: Mutex<HashMap<String, Group>>,
    pub initial_rebalance_delay: Duration,
    next_member: std::sync::atomic::AtomicU64,
}

impl Coordinator {
    pub fn new(initial_rebalance_delay: Duration) -> Coordinator {
        Coordinator {
            groups: Mutex::new(HashMap::new()),
            initial_rebalance_delay,
            next_member: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn new_member_id(&self, client_id: &str) -> String {
        let n = self
            .next_member
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("{client_id}-{:x}-{n}", laminar_storage::now_ms())
    }

    pub fn join(&self, a: JoinArgs) -> Reply<JoinOutcome> {
        if a.group_id.is_empty() {
            return Reply::Now(JoinOutcome::error(ErrorCode::InvalidGroupId, &a.member_id));
        }
        if !(SESSION_TIMEOUT_MS_MIN..=SESSION_TIMEOUT_MS_MAX).contains(&a.session_timeout_ms) {
            return Reply::Now(JoinOutcome::error(ErrorCode::InvalidSessionTimeout, &a.member_id));
        }
        let delay = self.initial_rebalance_delay;
        let mut groups = self.groups.lock().unwrap();
        let group = groups
            .entry(a.group_id.clone())
            .or_insert_with(|| Group::new(&a.group_id));
        if group.state == GroupState::Dead {
            return Reply::Now(JoinOutcome::error(
                ErrorCode::CoordinatorNotAvailable,
                &a.member_id,
            ));
        }
        if !group.supports_protocols(&a.protocol_type, &a.protocols) {
            return Reply::Now(JoinOutcome::error(
                ErrorCode::InconsistentGroupProtocol,
                &a.member_id,
            ));
        }
        let now = Instant::now();
        let mut member_id = a.member_id.clone();
        if member_id.is_empty() {
            member_id = self.new_member_id(&a.client_id);
            if let Some(instance) = &a.instance_id {
                if let Some(old_id) = group.static_member(instance) {
                    // A static member is back under a new member id: it takes over its old
                    // place. In a stable group with nothing changed, no rebalance happens.
                    let mut m = group.members.remove(&old_id).unwrap();
                    if let Some(w) = m.sync_waiter.take() {
                        let _ = w.send(SyncOutcome {
                            error: ErrorCode::FencedInstanceId,
                            ..Default::default()
                        });
                    }
                    if let Some(w) = m.join_waiter.take() {
                        let _ = w.send(JoinOutcome::error(ErrorCode::FencedInstanceId, &old_id));
                    }
                    // As Kafka decides it: what matters is the protocol in force and the
                    // member's metadata for it, not the rest of its list (a member restored
                    // from the log carries only the protocol in force).
                    let in_force = group.protocol_name.clone().unwrap_or_default();
                    let metadata_for = |protocols: &[(String, Bytes)]| {
                        protocols
                            .iter()
                            .find(|(n, _)| *n == in_force)
                            .map(|(_, m)| m.clone())
                    };
                    let same_protocols = metadata_for(&m.protocols).is_some()
                        && metadata_for(&m.protocols) == metadata_for(&a.protocols);
                    m.id = member_id.clone();
                    m.protocols = a.protocols.clone();
                    m.last_heartbeat = now;
                    m.session_timeout = Duration::from_millis(a.session_timeout_ms as u64);
                    m.rebalance_timeout = Duration::from_millis(a.rebalance_timeout_ms.max(0) as u64);
                    let was_leader = group.leader.as_deref() == Some(old_id.as_str());
                    group.members.insert(member_id.clone(), m);
                    if was_leader {
                        group.leader = Some(member_id.clone());
                    }
                    // The member id changed: the group's metadata is written again.
                    group.metadata_changed = true;
                    let same_protocols =
                        same_protocols && group.select_protocol().as_deref() == Some(&in_force);
                    if group.state == GroupState::Stable && same_protocols {
                        // Even the leader: as in Kafka (KIP-345, KIP-814), a static member's
                        // return causes no rebalance. A leader gets the members, and
                        // SyncGroup in a stable group hands back the assignment in force.
                        let protocol = group.protocol_name.clone().unwrap_or_default();
                        let members = if was_leader {
                            group
                                .members
                                .values()
                                .map(|m| (m.id.clone(), m.instance_id.clone(), m.metadata_for(&protocol)))
                                .collect()
                        } else {
                            Vec::new()
                        };
                        return Reply::Now(group.current_generation(member_id, members, was_leader));
                    }
                    return self.wait_for_join(group, &member_id, delay);
                }
            } else if a.require_known_member_id {
                group.pending.insert(
                    member_id.clone(),
                    now + Duration::from_millis(a.session_timeout_ms as u64),
                );
                return Reply::Now(JoinOutcome::error(ErrorCode::MemberIdRequired, &member_id));
            }
            if group.members.len() >= GROUP_MEMBERS_MAX {
                return Reply::Now(JoinOutcome::error(ErrorCode::GroupMaxSizeReached, &member_id));
            }
        } else if !group.members.contains_key(&member_id) && group.pending.remove(&member_id).is_none() {
            return Reply::Now(JoinOutcome::error(ErrorCode::UnknownMemberId, &member_id));
        }

        let existing = group.members.get_mut(&member_id);
        let changed = match existing {
            Some(m) => {
                let changed = m.protocols != a.protocols;
                m.protocols = a.protocols.clone();
                m.last_heartbeat = now;
                m.session_timeout = Duration::from_millis(a.session_timeout_ms as u64);
                m.rebalance_timeout = Duration::from_millis(a.rebalance_timeout_ms.max(0) as u64);
                changed
            }
            None => {
                group.members.insert(
                    member_id.clone(),
                    Member {
                        id: member_id.clone(),
                        instance_id: a.instance_id.clone(),
                        client_id: a.client_id.clone(),
                        client_host: a.client_host.clone(),
                        session_timeout: Duration::from_millis(a.session_timeout_ms as u64),
                        rebalance_timeout: Duration::from_millis(a.rebalance_timeout_ms.max(0) as u64),
                        protocol_type: a.protocol_type.clone(),
                        protocols: a.protocols.clone(),
                        assignment: Bytes::new(),
                        last_heartbeat: now,
                        join_waiter: None,
                        sync_waiter: None,
                    },
                );
                group.protocol_type = Some(a.protocol_type.clone());
                true
            }
        };
        let is_leader = group.leader.as_deref() == Some(member_id.as_str());
        if matches!(group.state, GroupState::Stable | GroupState::CompletingRebalance)
            && !changed
            && !is_leader
        {
            // A follower re-sending its join: answer with the current generation.
            return Reply::Now(group.current_generation(member_id, Vec::new(), false));
        }
        self.wait_for_join(group, &member_id, delay)
    }

    fn wait_for_join(&self, group: &mut Group, member_id: &str, delay: Duration) -> Reply<JoinOutcome> {
        if group.state != GroupState::PreparingRebalance {
            group.prepare_rebalance(delay);
        } else if group.initial_delay_until.is_some() {
            // Each join into a new group waits a little longer for the others, as Kafka's
            // group.initial.rebalance.delay.ms does.
            group.initial_delay_until = Some(Instant::now() + delay);
        }
        let (tx, rx) = oneshot::channel();
        if let Some(m) = group.members.get_mut(member_id) {
            if let Some(old) = m.join_waiter.replace(tx) {
                let _ = old.send(JoinOutcome::error(ErrorCode::UnknownMemberId, member_id));
            }
        }
        Self::maybe_complete(group);
        Reply::Later(rx)
    }

    fn maybe_complete(group: &mut Group) {
        if group.state != GroupState::PreparingRebalance {
            return;
        }
        let now = Instant::now();
        let delay_over = group.initial_delay_until.is_none_or(|t| now >= t);
        let timed_out = group.rebalance_deadline.is_some_and(|d| now >= d);
        if (group.all_joined() && delay_over) || timed_out {
            group.complete_join();
        }
    }

    pub fn sync(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        assignments: Vec<(String, Bytes)>,
    ) -> Reply<SyncOutcome> {
        let mut groups = self.groups.lock().unwrap();
        let Some(group) = groups.get_mut(group_id) else {
            return Reply::Now(SyncOutcome {
                error: ErrorCode::UnknownMemberId,
                ..Default::default()
            });
        };
        if let Err(e) = group.check_member(member_id, instance_id, generation) {
            return Reply::Now(SyncOutcome {
                error: e,
                ..Default::default()
            });
        }
        let outcome = |g: &Group, assignment: Bytes| SyncOutcome {
            error: ErrorCode::None,
            protocol_type: g.protocol_type.clone(),
            protocol_name: g.protocol_name.clone(),
            assignment,
        };
        match group.state {
            GroupState::PreparingRebalance => Reply::Now(SyncOutcome {
                error: ErrorCode::RebalanceInProgress,
                ..Default::default()
            }),
            GroupState::Stable => {
                let a = group.members[member_id].assignment.clone();
                Reply::Now(outcome(group, a))
            }
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                group.members.get_mut(member_id).unwrap().sync_waiter = Some(tx);
                if group.leader.as_deref() == Some(member_id) {
                    let assignments: HashMap<String, Bytes> = assignments.into_iter().collect();
                    for m in group.members.values_mut() {
                        m.assignment = assignments.get(&m.id).cloned().unwrap_or_default();
                    }
                    group.settle(GroupState::Stable);
                    let (pt, pn) = (group.protocol_type.clone(), group.protocol_name.clone());
                    for m in group.members.values_mut() {
                        if let Some(w) = m.sync_waiter.take() {
                            let _ = w.send(SyncOutcome {
                                error: ErrorCode::None,
                                protocol_type: pt.clone(),
                                protocol_name: pn.clone(),
                                assignment: m.assignment.clone(),
                            });
                        }
                    }
                }
                Reply::Later(rx)
            }
            GroupState::Empty | GroupState::Dead => Reply::Now(SyncOutcome {
                error: ErrorCode::UnknownMemberId,
                ..Default::default()
            }),
        }
    }

    pub fn heartbeat(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> ErrorCode {
        let mut groups = self.groups.lock().unwrap();
        let Some(group) = groups.get_mut(group_id) else {
            return ErrorCode::UnknownMemberId;
        };
        if let Err(e) = group.check_member(member_id, instance_id, generation) {
            return e;
        }
        group.members.get_mut(member_id).unwrap().last_heartbeat = Instant::now();
        match group.state {
            GroupState::PreparingRebalance => ErrorCode::RebalanceInProgress,
            GroupState::CompletingRebalance | GroupState::Stable => ErrorCode::None,
            GroupState::Empty | GroupState::Dead => ErrorCode::UnknownMemberId,
        }
    }

    /// Removes members by id, or by instance id when the member id is empty. Returns one
    /// error code per member.
    pub fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Result<Vec<ErrorCode>, ErrorCode> {
        let delay = self.initial_rebalance_delay;
        let mut groups = self.groups.lock().unwrap();
        let Some(group) = groups.get_mut(group_id) else {
            return Err(ErrorCode::UnknownMemberId);
        };
        Ok(members
            .iter()
            .map(|(member_id, instance)| {
                let id = match instance {
                    Some(i) => match group.static_member(i) {
                        Some(owner) if member_id.is_empty() || owner == *member_id => owner,
                        Some(_) => return ErrorCode::FencedInstanceId,
                        None => return ErrorCode::UnknownMemberId,
                    },
                    None => member_id.clone(),
                };
                if group.pending.remove(&id).is_some() {
                    return ErrorCode::None;
                }
                if !group.members.contains_key(&id) {
                    return ErrorCode::UnknownMemberId;
                }
                group.remove_member(&id, delay);
                ErrorCode::None
            })
            .collect())
    }

    /// Whether a commit from this member and generation is allowed now. A generation of -1
    /// with no member id is a commit from outside any group (a "simple" consumer), allowed
    /// only while the group has no members.
    pub fn check_commit(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> ErrorCode {
        let mut groups = self.groups.lock().unwrap();
        let group = groups
            .entry(group_id.to_string())
            .or_insert_with(|| Group::new(group_id));
        if generation < 0 && member_id.is_empty() {
            return if group.members.is_empty() {
                ErrorCode::None
            } else {
                ErrorCode::UnknownMemberId
            };
        }
        if let Err(e) = group.check_member(member_id, instance_id, generation) {
            return e;
        }
        match group.state {
            GroupState::CompletingRebalance => ErrorCode::RebalanceInProgress,
            _ => ErrorCode::None,
        }
    }

    /// Applies a committed offset (after it is durable).
    pub fn apply_commit(&self, group_id: &str, topic: &str, partition: i32, c: CommittedOffset) {
        let mut groups = self.groups.lock().unwrap();
        let group = groups
            .entry(group_id.to_string())
            .or_insert_with(|| Group::new(group_id));
        group.offsets.insert(TopicPartition::new(topic, partition), c);
    }

    pub fn apply_delete_group(&self, group_id: &str) {
        self.groups.lock().unwrap().remove(group_id);
    }

    pub fn apply_delete_offset(&self, group_id: &str, topic: &str, partition: i32) {
        if let Some(g) = self.groups.lock().unwrap().get_mut(group_id) {
            g.offsets.remove(&TopicPartition::new(topic, partition));
        }
    }

    pub fn committed(&self, group_id: &str) -> BTreeMap<TopicPartition, CommittedOffset> {
        self.groups
            .lock()
            .unwrap()
            .get(group_id)
            .map(|g| g.offsets.clone())
            .unwrap_or_default()
    }

    /// Enforces session and rebalance timeouts. Called every few tens of milliseconds.
    pub fn tick(&self) {
        let delay = self.initial_rebalance_delay;
        let now = Instant::now();
        let mut groups = self.groups.lock().unwrap();
        for group in groups.values_mut() {
            group.pending.retain(|_, expires| *expires > now);
            if matches!(group.state, GroupState::Stable | GroupState::CompletingRebalance) {
                let expired: Vec<String> = group
                    .members
                    .values()
                    .filter(|m| now.duration_since(m.last_heartbeat) > m.session_timeout)
                    .map(|m| m.id.clone())
                    .collect();
                for id in expired {
                    crate::info!("group {}: member {id} missed its session timeout", group.id);
                    group.remove_member(&id, delay);
                }
            }
            if group.state == GroupState::PreparingRebalance {
                // Members that neither rejoin nor heartbeat within their session timeout
                // are gone; the rest are waited for until the rebalance timeout.
                let gone: Vec<String> = group
                    .members
                    .values()
                    .filter(|m| {
                        m.join_waiter.is_none() && now.duration_since(m.last_heartbeat) > m.session_timeout
                    })
                    .map(|m| m.id.clone())
                    .collect();
                for id in gone {
                    group.members.remove(&id);
                }
                Self::maybe_complete(group);
            }
        }
    }

    /// Expires the offsets of empty groups after `offsets_retention`, forgets groups left
    /// with nothing, and returns the records that make the changes since the last call
    /// durable: group metadata that changed, tombstones for expired offsets and for groups
    /// that are gone. Called by the task that writes them, when it is ready for more, so
    /// nothing piles up behind a slow disk, and on the storage thread that appends them, so
    /// that `pending` (appended, not yet applied) is all that precedes them in the log: a key
    /// or group with pending records is left for a later round, lest a tombstone land after
    /// a newer commit.
    pub fn take_changes(&self, offsets_retention: Duration, pending: &PendingView) -> Vec<GroupRecord> {
        let now_ms = laminar_storage::now_ms();
        let mut records = Vec::new();
        let mut groups = self.groups.lock().unwrap();
        for group in groups.values_mut() {
            if group.state == GroupState::Empty {
                let retention_ms = offsets_retention.as_millis() as i64;
                group.offsets.retain(|TopicPartition { topic, partition }, c| {
                    let keep = now_ms - c.commit_ms < retention_ms
                        || pending
                            .offsets
                            .contains(&(group.id.clone(), topic.clone(), *partition));
                    if !keep {
                        records.push(GroupRecord::OffsetDeleted {
                            group: group.id.clone(),
                            topic: topic.clone(),
                            partition: *partition,
                        });
                    }
                    keep
                });
            }
            // Offsets pending do not hold metadata back (other keys); a pending deletion or
            // metadata of the group does: this record must land after it.
            if group.metadata_changed && !pending.rewritten.contains(&group.id) {
                group.metadata_changed = false;
                group.metadata_written = true;
                records.push(GroupRecord::Metadata {
                    group: group.id.clone(),
                    value: group.metadata_value(),
                });
            }
        }
        groups.retain(|_, g| {
            let gone = g.state == GroupState::Empty
                && g.offsets.is_empty()
                && g.members.is_empty()
                && g.pending.is_empty()
                && !pending.groups.contains(&g.id);
            if gone && g.metadata_written {
                records.push(GroupRecord::GroupDeleted { group: g.id.clone() });
            }
            !gone
        });
        records
    }

    /// The metadata records `take_changes` took were not written (the append failed): the
    /// groups' metadata is written again at the next round.
    pub fn metadata_not_written(&self, records: &[GroupRecord]) {
        let mut groups = self.groups.lock().unwrap();
        for r in records {
            if let GroupRecord::Metadata { group, .. } = r {
                if let Some(g) = groups.get_mut(group) {
                    g.metadata_changed = true;
                }
            }
        }
    }

    /// Restores a group's metadata read back from the log at startup. Its members are
    /// back as they were, their session timeouts counted from now: those whose clients
    /// carry on heartbeat and keep their assignment, the rest time out and a rebalance
    /// follows, as in Kafka.
    pub fn restore_metadata(&self, group_id: &str, v: GroupMetadataValue) {
        let mut groups = self.groups.lock().unwrap();
        let group = groups
            .entry(group_id.to_string())
            .or_insert_with(|| Group::new(group_id));
        let now = Instant::now();
        let protocol = v.protocol.clone().unwrap_or_default();
        group.protocol_type = Some(v.protocol_type.clone()).filter(|t| !t.is_empty());
        group.generation = v.generation;
        group.protocol_name = v.protocol;
        group.leader = v.leader;
        group.state_since_ms = v.current_state_timestamp_ms;
        group.metadata_written = true;
        group.members = v
            .members
            .into_iter()
            .map(|m| {
                let member = Member {
                    id: m.member_id.clone(),
                    instance_id: m.group_instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout: Duration::from_millis(m.session_timeout_ms.max(0) as u64),
                    rebalance_timeout: Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64),
                    protocol_type: v.protocol_type.clone(),
                    protocols: vec![(protocol.clone(), m.subscription)],
                    assignment: m.assignment,
                    last_heartbeat: now,
                    join_waiter: None,
                    sync_waiter: None,
                };
                (m.member_id, member)
            })
            .collect();
        group.state = if group.members.is_empty() {
            GroupState::Empty
        } else {
            GroupState::Stable
        };
    }

    /// Answers every waiting JoinGroup and SyncGroup with COORDINATOR_NOT_AVAILABLE, so that
    /// a shutdown does not wait for rebalances that could take minutes; clients then find
    /// the coordinator again, as when a Kafka broker stops.
    /// Forgets every group (this broker stopped coordinating them, or reloads them).
    pub fn clear(&self) {
        self.groups.lock().unwrap().clear();
    }

    pub fn shutdown(&self) {
        let mut groups = self.groups.lock().unwrap();
        for g in groups.values_mut() {
            for m in g.members.values_mut() {
                if let Some(w) = m.join_waiter.take() {
                    let _ = w.send(JoinOutcome::error(ErrorCode::CoordinatorNotAvailable, &m.id));
                }
                if let Some(w) = m.sync_waiter.take() {
                    let _ = w.send(SyncOutcome {
                        error: ErrorCode::CoordinatorNotAvailable,
                        ..Default::default()
                    });
                }
            }
            g.state = GroupState::Dead;
        }
    }

    pub fn delete_group_check(&self, group_id: &str) -> ErrorCode {
        let groups = self.groups.lock().unwrap();
        match groups.get(group_id) {
            None => ErrorCode::GroupIdNotFound,
            Some(g) if !g.members.is_empty() => ErrorCode::NonEmptyGroup,
            Some(_) => ErrorCode::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A commit made long before any retention.
    fn old_commit() -> CommittedOffset {
        CommittedOffset {
            offset: 5,
            leader_epoch: -1,
            metadata: Some(String::new()),
            commit_ms: 0,
        }
    }

    fn metadata(generation: i32) -> GroupMetadataValue {
        GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation,
            protocol: None,
            leader: None,
            current_state_timestamp_ms: 0,
            members: vec![],
        }
    }

    /// What the writer task makes durable: expired offsets become tombstones, a group left
    /// with nothing gets one if its metadata was ever written, and changed metadata is
    /// written once.
    #[test]
    fn take_changes_writes_expiries_removals_and_metadata_once() {
        let c = Coordinator::new(Duration::ZERO);
        let old = old_commit();
        c.apply_commit("simple", "t", 0, old.clone());
        c.restore_metadata("known", metadata(4));
        c.apply_commit("known", "t", 1, old);
        let mut changes = c.take_changes(Duration::from_secs(60), &PendingView::default());
        changes.sort_by_key(|r| format!("{r:?}"));
        assert_eq!(
            changes,
            [
                GroupRecord::GroupDeleted {
                    group: "known".into()
                },
                GroupRecord::OffsetDeleted {
                    group: "known".into(),
                    topic: "t".into(),
                    partition: 1
                },
                GroupRecord::OffsetDeleted {
                    group: "simple".into(),
                    topic: "t".into(),
                    partition: 0
                },
            ]
        );
        assert!(c.groups.lock().unwrap().is_empty());
        assert!(c
            .take_changes(Duration::from_secs(60), &PendingView::default())
            .is_empty());

        c.restore_metadata("g", metadata(1));
        c.apply_commit(
            "g",
            "t",
            0,
            CommittedOffset {
                offset: 1,
                leader_epoch: -1,
                metadata: None,
                commit_ms: laminar_storage::now_ms(),
            },
        );
        c.groups
            .lock()
            .unwrap()
            .get_mut("g")
            .unwrap()
            .settle(GroupState::Empty);
        let changes = c.take_changes(Duration::from_secs(60), &PendingView::default());
        assert!(
            matches!(&changes[..], [GroupRecord::Metadata { group, value }] if group == "g" && value.generation == 1),
            "{changes:?}"
        );
        assert!(
            c.take_changes(Duration::from_secs(60), &PendingView::default())
                .is_empty(),
            "written once"
        );
    }

    /// A static member that returns after a broker restart, sending its whole protocol list
    /// (the log kept only the protocol in force), takes its place back without a rebalance;
    /// one whose metadata for that protocol changed causes one.
    #[test]
    fn a_static_member_returning_to_a_restored_group_keeps_the_generation() {
        let c = Coordinator::new(Duration::ZERO);
        let mut value = metadata(7);
        value.protocol = Some("range".into());
        value.leader = Some("old-id".into());
        value.members = vec![MemberValue {
            member_id: "old-id".into(),
            group_instance_id: Some("s1".into()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: 60_000,
            session_timeout_ms: 10_000,
            subscription: Bytes::from_static(b"sub"),
            assignment: Bytes::from_static(b"asg"),
        }];
        c.restore_metadata("g", value);
        let join = |subscription: &'static [u8]| JoinArgs {
            group_id: "g".into(),
            member_id: String::new(),
            instance_id: Some("s1".into()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 60_000,
            protocol_type: "consumer".into(),
            protocols: vec![
                ("range".into(), Bytes::from_static(subscription)),
                ("roundrobin".into(), Bytes::from_static(b"other")),
            ],
            require_known_member_id: false,
        };
        match c.join(join(b"sub")) {
            Reply::Now(o) => assert_eq!((o.error, o.generation), (ErrorCode::None, 7)),
            Reply::Later(_) => panic!("a rebalance began"),
        }
        assert!(
            matches!(c.join(join(b"changed")), Reply::Later(_)),
            "new metadata for the protocol in force needs a rebalance"
        );
    }

    /// A key with a record appended and not yet applied is left alone: a tombstone written
    /// after a newer commit would delete it. And a group's deletion writes a tombstone for
    /// every offset it holds, the pending ones too.
    #[test]
    fn pending_records_are_respected() {
        let c = Coordinator::new(Duration::ZERO);
        let old = old_commit();
        c.apply_commit("g", "a", 0, old);
        let mut pending = PendingView::default();
        pending.offsets.insert(("g".into(), "a".into(), 0));
        pending.offsets.insert(("g".into(), "b".into(), 1));
        pending.groups.insert("g".into());
        let changes = c.take_changes(Duration::from_secs(60), &pending);
        assert!(changes.is_empty(), "{changes:?}");
        assert_eq!(c.committed("g").len(), 1);

        let batch = store::GroupStore::encode(
            &[GroupRecord::GroupDeleted { group: "g".into() }],
            &c,
            &pending,
            None,
        )
        .unwrap();
        let (_, start, end) = laminar_records::validate_batches(&batch).unwrap()[0];
        let written: Vec<(records::GroupKey, bool)> =
            laminar_records::decode_records(&batch[start..end], 1 << 20)
                .unwrap()
                .into_iter()
                .map(|r| {
                    (
                        records::GroupKey::decode(&r.key.unwrap()).unwrap(),
                        r.value.is_some(),
                    )
                })
                .collect();
        let offset = |topic: &str, partition| records::GroupKey::Offset {
            group: "g".into(),
            topic: topic.into(),
            partition,
        };
        assert_eq!(
            written,
            [
                (offset("a", 0), false),
                (offset("b", 1), false),
                (records::GroupKey::Metadata { group: "g".into() }, false)
            ]
        );
    }
}
