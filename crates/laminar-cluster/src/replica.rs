//! What this broker knows of each partition it hosts in a cluster: whether it leads or
//! follows, at which leader epoch; as a leader, how far each follower has acknowledged and
//! the high watermark over the in-sync replicas; as a follower, the high watermark its
//! leader reported.
//!
//! What a follower acknowledges is its fetch offset, and a follower fetches again only once
//! everything before that offset is fsynced on its disk (`cluster::fetcher`): the high
//! watermark is therefore an offset below which every in-sync replica holds the records on
//! disk. `acks=all` waits for the leader's own fsync and for the high watermark to pass its
//! records: with a replication factor of 3 and all in sync, an acknowledged record is on
//! three disks.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::image::{BrokerId, LeaderEpoch, PartitionInfo};
use laminar_storage::Offset;

/// A follower's progress before its first fetch (and the leader's log end before one).
const NOT_HEARD_FROM: Offset = Offset(-1);

/// A follower's progress, as its leader sees it.
#[derive(Debug, Clone)]
struct Progress {
    /// Its last fetch offset: every record below it is on its disk ([`NOT_HEARD_FROM`]: none).
    acked: Offset,
    /// The last time it had fetched everything the leader held (Kafka's
    /// `lastCaughtUpTimeMs`).
    caught_up: Instant,
    /// When it last fetched, and the leader's log end then.
    last_fetch: Instant,
    log_end_at_last_fetch: Offset,
}

#[derive(Debug, Clone)]
pub struct Leading {
    pub epoch: LeaderEpoch,
    pub partition_epoch: i32,
    pub replicas: Vec<BrokerId>,
    /// As the controller committed it.
    pub isr: Vec<BrokerId>,
    /// Followers asked to be added to the ISR and not yet committed: counted for the high
    /// watermark already (Kafka's "maximal ISR"), so that it never moves back.
    pending_add: BTreeSet<BrokerId>,
    /// An ISR change is in flight at the controller.
    pub changing: bool,
    /// Replicas whose log went offline or damaged (`Command::ReplicaOffline`): the
    /// controller refuses them in the ISR until their broker registers again, so they are
    /// not proposed.
    offline: Vec<BrokerId>,
    /// The log end when this leadership began: a follower joins the ISR only once it has
    /// everything before it (Kafka's rule), not merely the high watermark, which starts low
    /// after a restart.
    epoch_start: Offset,
    followers: BTreeMap<BrokerId, Progress>,
}

#[derive(Debug, Clone)]
pub enum Role {
    Leader(Leading),
    Follower {
        leader: BrokerId,
        epoch: LeaderEpoch,
    },
    /// Placed here, but neither (its partition is offline, or this broker is fenced).
    Idle,
}

/// An ISR change the leader asks the controller for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    pub topic: String,
    pub partition: i32,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: i32,
    pub isr: Vec<BrokerId>,
}

pub struct Replica {
    pub topic: String,
    pub partition: i32,
    node: BrokerId,
    role: Mutex<Role>,
    hw: watch::Sender<Offset>,
    /// A new leader serves once its log is ready for it (the epoch recorded, the producer
    /// state rebuilt from the log): until then it answers as a non-leader.
    serving: std::sync::atomic::AtomicBool,
    /// Bumped by every change of role: a fetcher follows only the generation it was started
    /// for, so that one whose call was stuck while the broker was fenced and unfenced (its
    /// leader and epoch the same again) ends instead of racing the new one.
    generation: std::sync::atomic::AtomicU64,
}

impl Replica {
    pub fn role(&self) -> Role {
        self.role.lock().unwrap().clone()
    }

    pub fn high_watermark(&self) -> Offset {
        *self.hw.borrow()
    }

    /// A follower takes the high watermark its leader reported, bounded by its own log end.
    pub fn set_follower_high_watermark(&self, hw: Offset) {
        self.hw.send_if_modified(|cur| {
            if hw > *cur {
                *cur = hw;
                true
            } else {
                false
            }
        });
    }

    /// The leader epoch if this broker leads the partition and serves it.
    pub fn leader_epoch(&self) -> Option<LeaderEpoch> {
        match &*self.role.lock().unwrap() {
            Role::Leader(l) if self.serving.load(std::sync::atomic::Ordering::Acquire) => Some(l.epoch),
            _ => None,
        }
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The new leader's log is ready: it serves from now on.
    pub fn start_serving(&self) {
        self.serving.store(true, std::sync::atomic::Ordering::Release);
    }

    /// The ISR (committed) if this broker leads.
    pub fn isr(&self) -> Option<Vec<BrokerId>> {
        match &*self.role.lock().unwrap() {
            Role::Leader(l) => Some(l.isr.clone()),
            _ => None,
        }
    }

    /// The ISR change to ask for, made against the leadership `l` as it is now.
    fn isr_change(&self, l: &Leading, isr: Vec<BrokerId>) -> IsrChange {
        IsrChange {
            topic: self.topic.clone(),
            partition: self.partition,
            leader_epoch: l.epoch,
            partition_epoch: l.partition_epoch,
            isr,
        }
    }

    /// The leader's own log end moved (an append): with no follower in the ISR, the high
    /// watermark follows it.
    pub fn on_leader_append(&self, log_end: Offset) {
        let role = self.role.lock().unwrap();
        if let Role::Leader(l) = &*role {
            self.advance(l, log_end);
        }
    }

    /// The high watermark over the ISR (and the followers being added to it), never moving
    /// back.
    fn advance(&self, l: &Leading, log_end: Offset) {
        let hw = l
            .isr
            .iter()
            .chain(l.pending_add.iter())
            .filter(|r| **r != self.node)
            .map(|r| l.followers.get(r).map_or(NOT_HEARD_FROM, |p| p.acked))
            .fold(log_end, Offset::min);
        self.hw.send_if_modified(|cur| {
            if hw > *cur {
                *cur = hw;
                true
            } else {
                false
            }
        });
    }

    /// A follower fetched from `offset` while this leader's log ended at `log_end`. Updates
    /// its progress and the high watermark; returns an ISR expansion to ask for, if it has
    /// caught up.
    pub fn on_follower_fetch(
        &self,
        follower: BrokerId,
        offset: Offset,
        log_end: Offset,
    ) -> Option<IsrChange> {
        let now = Instant::now();
        let mut role = self.role.lock().unwrap();
        let Role::Leader(l) = &mut *role else {
            return None;
        };
        if !l.replicas.contains(&follower) || offset > log_end {
            return None;
        }
        let p = l.followers.entry(follower).or_insert(Progress {
            acked: NOT_HEARD_FROM,
            caught_up: now,
            last_fetch: now,
            log_end_at_last_fetch: NOT_HEARD_FROM,
        });
        p.acked = offset;
        // Kafka's rule: caught up now if it has everything; else caught up as of its last
        // fetch if it now has what the leader had then.
        if offset >= log_end {
            p.caught_up = now;
        } else if offset >= p.log_end_at_last_fetch && p.log_end_at_last_fetch >= Offset(0) {
            p.caught_up = p.last_fetch;
        }
        p.last_fetch = now;
        p.log_end_at_last_fetch = log_end;
        // Decided and recorded under this one lock, with the high watermark it is compared
        // to: another fetch cannot move the high watermark past this follower in between.
        let hw_now = self.high_watermark();
        let change = if !l.isr.contains(&follower)
            && !l.pending_add.contains(&follower)
            && !l.offline.contains(&follower)
            && !l.changing
            && offset >= hw_now
            && offset >= l.epoch_start
        {
            l.pending_add.insert(follower);
            l.changing = true;
            let mut isr = l.isr.clone();
            isr.push(follower);
            isr.sort_unstable();
            Some(self.isr_change(l, isr))
        } else {
            None
        };
        self.advance(l, log_end);
        change
    }

    /// ISR members that have not caught up for `lag`: an ISR shrink to ask for.
    pub fn lagging(&self, lag: Duration) -> Option<IsrChange> {
        let now = Instant::now();
        let mut role = self.role.lock().unwrap();
        let Role::Leader(l) = &mut *role else {
            return None;
        };
        if l.changing {
            return None;
        }
        let out: Vec<BrokerId> = l
            .isr
            .iter()
            .copied()
            .filter(|r| *r != self.node)
            .filter(|r| {
                l.followers
                    .get(r)
                    .is_none_or(|p| now.duration_since(p.caught_up) > lag)
            })
            .collect();
        if out.is_empty() {
            return None;
        }
        l.changing = true;
        let isr: Vec<BrokerId> = l.isr.iter().copied().filter(|r| !out.contains(r)).collect();
        Some(self.isr_change(l, isr))
    }

    /// The controller refused an ISR change: it did not happen, and may be asked again.
    pub fn isr_change_refused(&self) {
        if let Role::Leader(l) = &mut *self.role.lock().unwrap() {
            l.changing = false;
            l.pending_add.clear();
        }
    }

    /// The controller's answer to an ISR change was lost: it may have happened, so a
    /// pending addition still counts for the high watermark (until an image says), but the
    /// change may be asked again.
    pub fn isr_change_unknown(&self) {
        if let Role::Leader(l) = &mut *self.role.lock().unwrap() {
            l.changing = false;
        }
    }

    /// Waits until the high watermark passes `offset`, appended at leader epoch `epoch`, or
    /// `timeout`; false if it did not, or this broker no longer leads at that epoch. The
    /// leadership is checked before the high watermark is trusted: as a follower (or a
    /// leader of a later epoch) the high watermark says nothing of a record it may have cut.
    pub async fn wait_replicated(
        &self,
        offset: Offset,
        epoch: LeaderEpoch,
        deadline: tokio::time::Instant,
    ) -> bool {
        let mut rx = self.hw.subscribe();
        let waited = tokio::time::timeout_at(deadline, async {
            loop {
                if self.leader_epoch() != Some(epoch) {
                    return false;
                }
                if *rx.borrow_and_update() > offset {
                    return self.leader_epoch() == Some(epoch);
                }
                if rx.changed().await.is_err() {
                    return false;
                }
            }
        })
        .await;
        waited.unwrap_or(false)
    }

    /// Wakes the `acks=all` waiters (leadership lost: they answer with an error).
    fn wake(&self) {
        self.hw.send_modify(|_| {});
    }
}

/// Every partition this broker hosts, by topic and partition.
pub struct Replicas {
    node: BrokerId,
    /// By topic, then partition: a lookup by the topic's name allocates nothing (one is made
    /// for every partition of every produce and fetch).
    partitions: RwLock<HashMap<String, HashMap<i32, Arc<Replica>>>>,
}

/// What changed for one partition when an image was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// Lead it from now, at this epoch (the log's epoch cache must record it).
    BecameLeader { epoch: LeaderEpoch },
    /// Follow `leader` at `epoch`: (re)start fetching, truncating first.
    BecameFollower { leader: BrokerId, epoch: LeaderEpoch },
    /// Stop leading and following.
    Stopped,
}

impl Replicas {
    pub fn new(node: BrokerId) -> Replicas {
        Replicas {
            node,
            partitions: RwLock::new(HashMap::new()),
        }
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<Arc<Replica>> {
        self.partitions
            .read()
            .unwrap()
            .get(topic)
            .and_then(|ps| ps.get(&partition))
            .cloned()
    }

    pub fn all(&self) -> Vec<Arc<Replica>> {
        self.partitions
            .read()
            .unwrap()
            .values()
            .flat_map(|ps| ps.values().cloned())
            .collect()
    }

    /// Applies a partition's place in a new image. `fenced`: this broker may lead nothing.
    /// `log_end`: the local log's end (a new leader's high watermark starts no higher).
    pub fn apply(
        &self,
        topic: &str,
        partition: i32,
        info: Option<&PartitionInfo>,
        fenced: bool,
        log_end: Offset,
    ) -> Option<Transition> {
        let hosted = info.is_some_and(|p| p.replicas.contains(&self.node));
        if !hosted {
            let removed = {
                let mut all = self.partitions.write().unwrap();
                let removed = all.get_mut(topic).and_then(|ps| ps.remove(&partition));
                if all.get(topic).is_some_and(|ps| ps.is_empty()) {
                    all.remove(topic);
                }
                removed
            };
            if let Some(r) = &removed {
                *r.role.lock().unwrap() = Role::Idle;
                r.wake();
            }
            return removed.map(|_| Transition::Stopped);
        }
        let info = info.expect("hosted");
        let replica = self
            .partitions
            .write()
            .unwrap()
            .entry(topic.to_string())
            .or_default()
            .entry(partition)
            .or_insert_with(|| {
                Arc::new(Replica {
                    topic: topic.to_string(),
                    partition,
                    node: self.node,
                    role: Mutex::new(Role::Idle),
                    hw: watch::channel(Offset(0)).0,
                    serving: std::sync::atomic::AtomicBool::new(false),
                    generation: std::sync::atomic::AtomicU64::new(0),
                })
            })
            .clone();
        let mut role = replica.role.lock().unwrap();
        let transition = if fenced || info.leader < crate::image::BrokerId(0) {
            match &*role {
                Role::Idle => None,
                _ => {
                    *role = Role::Idle;
                    Some(Transition::Stopped)
                }
            }
        } else if info.leader == self.node {
            match &mut *role {
                Role::Leader(l) if l.epoch == info.leader_epoch => {
                    // Same leadership: the ISR may have changed.
                    if l.partition_epoch != info.partition_epoch {
                        // Any change in flight was made against the old partition epoch:
                        // it is in this image, or it will be refused.
                        l.partition_epoch = info.partition_epoch;
                        l.isr = info.isr.clone();
                        l.replicas = info.replicas.clone();
                        l.offline = info.offline.clone();
                        l.pending_add.clear();
                        l.changing = false;
                        // A shrink may let the high watermark move at once.
                        replica.advance(l, log_end);
                    }
                    None
                }
                _ => {
                    replica.serving.store(false, std::sync::atomic::Ordering::Release);
                    let now = Instant::now();
                    let followers = info
                        .replicas
                        .iter()
                        .filter(|r| **r != self.node)
                        .map(|r| {
                            (
                                *r,
                                Progress {
                                    acked: NOT_HEARD_FROM,
                                    caught_up: now,
                                    last_fetch: now,
                                    log_end_at_last_fetch: NOT_HEARD_FROM,
                                },
                            )
                        })
                        .collect();
                    *role = Role::Leader(Leading {
                        epoch: info.leader_epoch,
                        partition_epoch: info.partition_epoch,
                        replicas: info.replicas.clone(),
                        isr: info.isr.clone(),
                        pending_add: BTreeSet::new(),
                        changing: false,
                        offline: info.offline.clone(),
                        epoch_start: log_end,
                        followers,
                    });
                    Some(Transition::BecameLeader {
                        epoch: info.leader_epoch,
                    })
                }
            }
        } else {
            match &*role {
                Role::Follower { leader, epoch } if *leader == info.leader && *epoch == info.leader_epoch => {
                    None
                }
                _ => {
                    *role = Role::Follower {
                        leader: info.leader,
                        epoch: info.leader_epoch,
                    };
                    Some(Transition::BecameFollower {
                        leader: info.leader,
                        epoch: info.leader_epoch,
                    })
                }
            }
        };
        if transition.is_some() {
            replica
                .generation
                .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
        drop(role);
        if let Some(Transition::BecameLeader { .. }) = &transition {
            // The high watermark it learned as a follower, never above its own log.
            replica.hw.send_modify(|hw| *hw = (*hw).min(log_end));
            let role = replica.role.lock().unwrap();
            if let Role::Leader(l) = &*role {
                replica.advance(l, log_end);
            }
        }
        if transition.is_some() {
            replica.wake();
        }
        transition
    }
}
