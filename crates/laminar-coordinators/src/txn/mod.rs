//! The transaction coordinator: each transactional id's producer id and epoch, the state of
//! its transaction, the partitions and offset commits in it. Kafka's state machine (Empty,
//! Ongoing, PrepareCommit/Abort, CompleteCommit/Abort), its fencing by epoch, and its errors.
//!
//! Every change is made durable in the transaction log ([`log`]) before it is applied here or
//! answered. A change is decided under the lock, the id is marked busy, and the lock is let go
//! for the write: the lock is never held across I/O, and requests for a busy id get
//! CONCURRENT_TRANSACTIONS (the client retries), as Kafka answers while a write is in flight.
//!
//! Ending a transaction: the PrepareCommit (PrepareAbort) record is made durable and EndTxn is
//! answered; then [`complete`] writes a marker into every partition of the transaction, and
//! the offsets into the group log on commit, waits until they are durable, and writes
//! CompleteCommit (CompleteAbort). After a restart, every transaction found prepared is
//! completed again (markers are idempotent), and open ones are aborted once they time out.

pub mod complete;
pub mod log;
pub mod remote;
pub mod service;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use laminar_cluster::TopicPartition;
use laminar_protocol::ErrorCode;

/// Kafka's transaction states, with its numbering (`TransactionState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i8)]
pub enum TxnStatus {
    Empty = 0,
    Ongoing = 1,
    PrepareCommit = 2,
    PrepareAbort = 3,
    CompleteCommit = 4,
    CompleteAbort = 5,
    Dead = 6,
    PrepareEpochFence = 7,
}

impl TxnStatus {
    pub fn from_i8(v: i8) -> Option<TxnStatus> {
        use TxnStatus::*;
        [
            Empty,
            Ongoing,
            PrepareCommit,
            PrepareAbort,
            CompleteCommit,
            CompleteAbort,
            Dead,
            PrepareEpochFence,
        ]
        .into_iter()
        .find(|s| *s as i8 == v)
    }

    /// As Kafka's tools print it.
    pub fn name(self) -> &'static str {
        match self {
            TxnStatus::Empty => "Empty",
            TxnStatus::Ongoing => "Ongoing",
            TxnStatus::PrepareCommit => "PrepareCommit",
            TxnStatus::PrepareAbort => "PrepareAbort",
            TxnStatus::CompleteCommit => "CompleteCommit",
            TxnStatus::CompleteAbort => "CompleteAbort",
            TxnStatus::Dead => "Dead",
            TxnStatus::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    fn is_prepared(self) -> bool {
        matches!(
            self,
            TxnStatus::PrepareCommit | TxnStatus::PrepareAbort | TxnStatus::PrepareEpochFence
        )
    }
}

/// An offset commit made in a transaction: applied to the group when it commits.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
    pub commit_ms: i64,
}

/// One transactional id's state.
#[derive(Debug, Clone, PartialEq)]
pub struct TxnMeta {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The id and epoch before the last bump: a producer whose InitProducerId answer was lost
    /// asks again with them (KIP-360).
    pub last_producer_id: i64,
    pub last_producer_epoch: i16,
    /// The id the producer takes once the transaction being ended completes, when its epoch
    /// ran out (-1: none). Its markers carry the old id with the last epoch, so that they
    /// end what that id wrote (Kafka's `nextProducerId`).
    pub next_producer_id: i64,
    pub timeout_ms: i32,
    pub status: TxnStatus,
    /// The partitions of the transaction in progress (or being completed).
    pub partitions: BTreeSet<TopicPartition>,
    /// Its offset commits: (group, topic, partition).
    pub offsets: BTreeMap<(String, String, i32), PendingOffset>,
    /// When the transaction in progress began; its timeout counts from here.
    pub start_ms: i64,
    pub update_ms: i64,
}

/// The group log's partition, as AddOffsetsToTxn adds it to a transaction.
pub fn offsets_partition() -> TopicPartition {
    TopicPartition::new(crate::groups::store::OFFSETS_TOPIC, 0)
}

struct Entry {
    meta: TxnMeta,
    /// A change of this id is being written.
    busy: bool,
    /// Reserved for the first record of a new id, not yet durable.
    new: bool,
}

/// What a request decided.
pub enum Decision<T> {
    /// Answer now; nothing changes.
    Reply(T),
    /// Write this state, then apply it and answer (the id is busy meanwhile).
    Write(TxnMeta),
}

/// What the coordinator has done, for the metrics endpoint.
#[derive(Default)]
pub struct TxnMetrics {
    pub commits: std::sync::atomic::AtomicU64,
    pub aborts: std::sync::atomic::AtomicU64,
    /// Transactions aborted by the coordinator because they ran past their timeout.
    pub timed_out: std::sync::atomic::AtomicU64,
    /// Markers (or the offsets of a commit) that failed and were tried again.
    pub retries: std::sync::atomic::AtomicU64,
    /// Requests that waited for their id to be free (see `complete::begin_when_free`).
    pub waits: std::sync::atomic::AtomicU64,
    /// From the prepare record being durable to the transaction being complete: the markers
    /// and offsets, made durable. A producer's next transaction waits this long.
    pub completion_us: laminar_metrics::LatencyHistogram,
}

pub struct TxnCoordinator {
    pub metrics: TxnMetrics,
    state: Mutex<State>,
    /// Woken whenever a change is applied or dropped: requests that found their id busy or
    /// its transaction being completed wait for it (see `complete::begin_when_free`).
    pub changed: tokio::sync::Notify,
}

#[derive(Default)]
struct State {
    txns: HashMap<String, Entry>,
    /// Producer id to transactional id, for the checks of transactional produce.
    by_producer: HashMap<i64, String>,
}

impl State {
    fn insert(&mut self, meta: TxnMeta) {
        self.by_producer
            .insert(meta.producer_id, meta.transactional_id.clone());
        if meta.next_producer_id >= 0 {
            self.by_producer
                .insert(meta.next_producer_id, meta.transactional_id.clone());
        }
        let id = meta.transactional_id.clone();
        match self.txns.get_mut(&id) {
            Some(e) => {
                if e.meta.producer_id != meta.producer_id {
                    self.by_producer.remove(&e.meta.producer_id);
                }
                e.meta = meta;
            }
            None => {
                self.txns.insert(
                    id,
                    Entry {
                        meta,
                        busy: false,
                        new: false,
                    },
                );
            }
        }
    }
}

/// The producer a request names, checked against the id's state.
fn check_producer(m: &TxnMeta, producer_id: i64, producer_epoch: i16) -> Result<(), ErrorCode> {
    if m.producer_id != producer_id {
        return Err(ErrorCode::InvalidProducerIdMapping);
    }
    if m.producer_epoch != producer_epoch {
        return Err(ErrorCode::ProducerFenced);
    }
    Ok(())
}

impl TxnCoordinator {
    pub fn new(restored: impl IntoIterator<Item = TxnMeta>) -> TxnCoordinator {
        let mut state = State::default();
        for m in restored {
            state.insert(m);
        }
        TxnCoordinator {
            metrics: TxnMetrics::default(),
            state: Mutex::new(state),
            changed: tokio::sync::Notify::new(),
        }
    }

    /// Decides a change of `id` with `decide`, which sees the id's state (`None`: unknown).
    /// On [`Decision::Write`] the id is busy until [`TxnCoordinator::finish`].
    pub fn begin<T>(
        &self,
        id: &str,
        decide: impl FnOnce(Option<&TxnMeta>) -> Result<Decision<T>, ErrorCode>,
    ) -> Result<Decision<T>, ErrorCode> {
        let mut st = self.state.lock().unwrap();
        let entry = st.txns.get(id);
        if entry.is_some_and(|e| e.busy) {
            return Err(ErrorCode::ConcurrentTransactions);
        }
        let decision = decide(entry.map(|e| &e.meta))?;
        if let Decision::Write(meta) = &decision {
            debug_assert_eq!(meta.transactional_id, id);
            match st.txns.get_mut(id) {
                Some(e) => e.busy = true,
                None => {
                    // Reserved while the first record of a new id is written.
                    st.txns.insert(
                        id.to_string(),
                        Entry {
                            meta: meta.clone(),
                            busy: true,
                            new: true,
                        },
                    );
                    st.by_producer.insert(meta.producer_id, id.to_string());
                }
            }
        }
        Ok(decision)
    }

    /// The write of `id` begun by [`TxnCoordinator::begin`] ended: `Some(meta)` if it is
    /// durable (applied now), `None` if it failed (the state stays as it was).
    pub fn finish(&self, id: &str, written: Option<TxnMeta>) {
        let mut st = self.state.lock().unwrap();
        if !st.txns.get(id).is_some_and(|e| e.busy) {
            // The state was replaced meanwhile ([`TxnCoordinator::reset`]: this broker
            // stopped coordinating, or loaded the log again): nothing of the old is applied.
            return;
        }
        match written {
            Some(meta) => st.insert(meta),
            None => {
                // A new id whose first record failed is forgotten.
                if st.txns.get(id).is_some_and(|e| e.new) {
                    if let Some(e) = st.txns.remove(id) {
                        st.by_producer.remove(&e.meta.producer_id);
                    }
                    drop(st);
                    self.changed.notify_waiters();
                    return;
                }
            }
        }
        if let Some(e) = st.txns.get_mut(id) {
            e.busy = false;
            e.new = false;
        }
        drop(st);
        self.changed.notify_waiters();
    }

    /// Replaces every id's state with `restored` (in a cluster: read from the log when this
    /// broker becomes the coordinator, or nothing when it stops). Writes in flight are not
    /// applied when they finish.
    pub fn reset(&self, restored: impl IntoIterator<Item = TxnMeta>) {
        let mut state = State::default();
        for m in restored {
            state.insert(m);
        }
        *self.state.lock().unwrap() = state;
        self.changed.notify_waiters();
    }

    pub fn get(&self, id: &str) -> Option<TxnMeta> {
        self.state.lock().unwrap().txns.get(id).map(|e| e.meta.clone())
    }

    /// The transactional id whose producer has this id.
    pub fn id_of(&self, producer_id: i64) -> Option<String> {
        self.state.lock().unwrap().by_producer.get(&producer_id).cloned()
    }

    /// How many ids are in each state, for the metrics endpoint.
    pub fn count_by_status(&self) -> Vec<(TxnStatus, i64)> {
        let st = self.state.lock().unwrap();
        let mut counts: BTreeMap<i8, i64> = BTreeMap::new();
        for e in st.txns.values() {
            *counts.entry(e.meta.status as i8).or_default() += 1;
        }
        counts
            .into_iter()
            .filter_map(|(s, n)| TxnStatus::from_i8(s).map(|s| (s, n)))
            .collect()
    }

    /// Every id's state, by id.
    pub fn list(&self) -> Vec<TxnMeta> {
        let st = self.state.lock().unwrap();
        let mut out: Vec<TxnMeta> = st.txns.values().map(|e| e.meta.clone()).collect();
        out.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        out
    }

    /// May a transactional batch of this producer be appended to `topic`-`partition`? Only in
    /// its current epoch, in a transaction in progress that holds the partition. Called on
    /// the partition's storage thread, where the markers are appended too: a batch checked
    /// here lands before the marker that ends its transaction.
    pub fn check_produce(
        &self,
        producer_id: i64,
        epoch: i16,
        topic: &str,
        partition: i32,
    ) -> Result<(), ErrorCode> {
        let st = self.state.lock().unwrap();
        let Some(m) = st
            .by_producer
            .get(&producer_id)
            .and_then(|id| st.txns.get(id))
            .map(|e| &e.meta)
        else {
            return Err(ErrorCode::InvalidProducerIdMapping);
        };
        if m.producer_id != producer_id {
            return Err(ErrorCode::InvalidProducerIdMapping);
        }
        if epoch != m.producer_epoch {
            return Err(ErrorCode::InvalidProducerEpoch);
        }
        if m.status != TxnStatus::Ongoing || !m.partitions.contains(&TopicPartition::new(topic, partition)) {
            return Err(ErrorCode::InvalidTxnState);
        }
        Ok(())
    }

    /// Transactions in progress whose timeout has passed, and are not busy.
    pub fn timed_out(&self, now_ms: i64) -> Vec<String> {
        let st = self.state.lock().unwrap();
        st.txns
            .values()
            .filter(|e| {
                !e.busy
                    && e.meta.status == TxnStatus::Ongoing
                    && now_ms.saturating_sub(e.meta.start_ms) > e.meta.timeout_ms as i64
            })
            .map(|e| e.meta.transactional_id.clone())
            .collect()
    }

    /// Ids with nothing in progress and no change for `expiration_ms`
    /// (`transactional.id.expiration.ms`).
    pub fn expired(&self, now_ms: i64, expiration_ms: u64) -> Vec<String> {
        let st = self.state.lock().unwrap();
        st.txns
            .values()
            .filter(|e| {
                !e.busy
                    && matches!(
                        e.meta.status,
                        TxnStatus::Empty | TxnStatus::CompleteCommit | TxnStatus::CompleteAbort
                    )
                    && now_ms.saturating_sub(e.meta.update_ms) > expiration_ms as i64
            })
            .map(|e| e.meta.transactional_id.clone())
            .collect()
    }

    /// Forgets an id whose tombstone is durable.
    pub fn remove(&self, id: &str) {
        let mut st = self.state.lock().unwrap();
        if let Some(e) = st.txns.remove(id) {
            st.by_producer.remove(&e.meta.producer_id);
        }
    }

    /// The ids found prepared (at startup): their completion must run again.
    pub fn prepared(&self) -> Vec<TxnMeta> {
        let st = self.state.lock().unwrap();
        st.txns
            .values()
            .filter(|e| e.meta.status.is_prepared())
            .map(|e| e.meta.clone())
            .collect()
    }
}

/// The next epoch of a producer, or a new producer id when the epoch is exhausted (as
/// Kafka does at `Short.MaxValue - 1`). Returns (id, epoch). For a change that writes no
/// markers (a new instance of an idle id).
pub fn bump(m: &TxnMeta, allocate: impl FnOnce() -> i64) -> (i64, i16) {
    if m.producer_epoch >= i16::MAX - 1 {
        (allocate(), 0)
    } else {
        (m.producer_id, m.producer_epoch + 1)
    }
}

/// The epoch a transaction is ended with when its producer is fenced or (version 2) moves
/// on: the next one, under the same producer id, so that the markers end what that id wrote.
/// When that is the last epoch there is, the producer also gets the id it takes afterwards.
/// Returns (epoch, next producer id or -1).
pub fn fence(m: &TxnMeta, allocate: impl FnOnce() -> i64) -> (i16, i64) {
    if m.producer_epoch >= i16::MAX - 1 {
        (i16::MAX, allocate())
    } else {
        (m.producer_epoch + 1, -1)
    }
}

impl TxnMeta {
    /// This transaction, decided (`status` PrepareCommit or PrepareAbort). With `fenced`, the
    /// markers carry the producer's next epoch, which fences every older one (a new instance,
    /// a timeout, or version 2's bump at every end).
    fn prepared(
        &self,
        status: TxnStatus,
        fenced: bool,
        now_ms: i64,
        allocate: &mut dyn FnMut() -> i64,
    ) -> TxnMeta {
        debug_assert!(status.is_prepared());
        let mut next = TxnMeta {
            status,
            update_ms: now_ms,
            ..self.clone()
        };
        if fenced {
            (next.producer_epoch, next.next_producer_id) = fence(self, allocate);
            (next.last_producer_id, next.last_producer_epoch) = (self.producer_id, self.producer_epoch);
        }
        next
    }

    /// This id with a transaction in progress: the one it has, or a new one begun now.
    fn ongoing(&self, now_ms: i64) -> TxnMeta {
        if self.status == TxnStatus::Ongoing {
            return self.clone();
        }
        TxnMeta {
            status: TxnStatus::Ongoing,
            start_ms: now_ms,
            partitions: BTreeSet::new(),
            offsets: BTreeMap::new(),
            ..self.clone()
        }
    }

    /// The producer id and epoch the producer goes on with once this transaction completes.
    pub fn producer_after(&self) -> (i64, i16) {
        if self.next_producer_id >= 0 {
            (self.next_producer_id, 0)
        } else {
            (self.producer_id, self.producer_epoch)
        }
    }

    /// The state once this prepared transaction is complete: the next producer id, if the
    /// epoch ran out, is the producer's from now on.
    pub fn completed(&self, now_ms: i64) -> TxnMeta {
        let (producer_id, producer_epoch) = self.producer_after();
        TxnMeta {
            producer_id,
            producer_epoch,
            next_producer_id: -1,
            status: if self.status == TxnStatus::PrepareCommit {
                TxnStatus::CompleteCommit
            } else {
                TxnStatus::CompleteAbort
            },
            partitions: BTreeSet::new(),
            offsets: BTreeMap::new(),
            update_ms: now_ms,
            ..self.clone()
        }
    }
}

/// InitProducerId for a transactional id: a new id, or the next epoch of the id's producer,
/// which fences every older instance. A transaction in progress is aborted first (the
/// client is told to retry). `Ok(Reply)` carries (producer id, epoch).
pub fn decide_init(
    m: Option<&TxnMeta>,
    id: &str,
    timeout_ms: i32,
    requested: (i64, i16),
    now_ms: i64,
    allocate: &mut dyn FnMut() -> i64,
) -> Result<Decision<(i64, i16)>, ErrorCode> {
    let Some(m) = m else {
        return Ok(Decision::Write(TxnMeta {
            transactional_id: id.to_string(),
            producer_id: allocate(),
            producer_epoch: 0,
            last_producer_id: -1,
            last_producer_epoch: -1,
            next_producer_id: -1,
            timeout_ms,
            status: TxnStatus::Empty,
            partitions: BTreeSet::new(),
            offsets: BTreeMap::new(),
            start_ms: -1,
            update_ms: now_ms,
        }));
    };
    let (req_pid, req_epoch) = requested;
    if req_pid >= 0 {
        let current = req_pid == m.producer_id && req_epoch == m.producer_epoch;
        let retried = req_pid == m.last_producer_id && req_epoch == m.last_producer_epoch;
        if retried && !m.status.is_prepared() && m.status != TxnStatus::Ongoing {
            // The answer to its last InitProducerId was lost: give it again.
            return Ok(Decision::Reply((m.producer_id, m.producer_epoch)));
        }
        if !current && !retried {
            return Err(ErrorCode::ProducerFenced);
        }
    }
    match m.status {
        TxnStatus::PrepareCommit | TxnStatus::PrepareAbort | TxnStatus::PrepareEpochFence => {
            Err(ErrorCode::ConcurrentTransactions)
        }
        TxnStatus::Ongoing => {
            // Fence the old producer and abort its transaction; the new one retries, and gets
            // the epoch after this one.
            Ok(Decision::Write(m.prepared(
                TxnStatus::PrepareAbort,
                true,
                now_ms,
                allocate,
            )))
        }
        TxnStatus::Empty | TxnStatus::CompleteCommit | TxnStatus::CompleteAbort | TxnStatus::Dead => {
            let (pid, epoch) = bump(m, allocate);
            Ok(Decision::Write(TxnMeta {
                producer_id: pid,
                producer_epoch: epoch,
                last_producer_id: m.producer_id,
                last_producer_epoch: m.producer_epoch,
                timeout_ms,
                status: TxnStatus::Empty,
                partitions: BTreeSet::new(),
                offsets: BTreeMap::new(),
                start_ms: -1,
                update_ms: now_ms,
                ..m.clone()
            }))
        }
    }
}

/// AddPartitionsToTxn (and AddOffsetsToTxn, with the group log's partition).
pub fn decide_add(
    m: Option<&TxnMeta>,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &[TopicPartition],
    now_ms: i64,
) -> Result<Decision<()>, ErrorCode> {
    let m = m.ok_or(ErrorCode::InvalidProducerIdMapping)?;
    if m.status.is_prepared() && (producer_id, producer_epoch) == m.producer_after() {
        // The producer's next transaction, under the id it takes once this one completes.
        return Err(ErrorCode::ConcurrentTransactions);
    }
    check_producer(m, producer_id, producer_epoch)?;
    match m.status {
        TxnStatus::PrepareCommit | TxnStatus::PrepareAbort | TxnStatus::PrepareEpochFence => {
            return Err(ErrorCode::ConcurrentTransactions)
        }
        TxnStatus::Dead => return Err(ErrorCode::InvalidTxnState),
        _ => {}
    }
    if m.status == TxnStatus::Ongoing && partitions.iter().all(|p| m.partitions.contains(p)) {
        return Ok(Decision::Reply(()));
    }
    let mut next = m.ongoing(now_ms);
    next.partitions.extend(partitions.iter().cloned());
    next.update_ms = now_ms;
    Ok(Decision::Write(next))
}

/// EndTxn. `Ok(Write)` is a prepare record: once durable, EndTxn is answered and the
/// transaction completed. With transaction.version 2 (`bump_epoch`, EndTxn v5) the prepare
/// record carries the producer's next epoch, which the markers fence older epochs with and the
/// answer gives the producer for its next transaction; a retry of an end that went through
/// comes with the epoch before it. The reply is the producer's (id, epoch).
pub fn decide_end(
    m: Option<&TxnMeta>,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    bump_epoch: bool,
    now_ms: i64,
    allocate: &mut dyn FnMut() -> i64,
) -> Result<Decision<(i64, i16)>, ErrorCode> {
    let m = m.ok_or(ErrorCode::InvalidProducerIdMapping)?;
    let ended = matches!(
        (m.status, commit),
        (TxnStatus::CompleteCommit, true) | (TxnStatus::CompleteAbort, false)
    );
    let ending = matches!(
        (m.status, commit),
        (TxnStatus::PrepareCommit, true) | (TxnStatus::PrepareAbort, false)
    );
    let retried = producer_id == m.last_producer_id && producer_epoch == m.last_producer_epoch;
    if bump_epoch && retried && (ended || ending) {
        return if ended {
            Ok(Decision::Reply(m.producer_after()))
        } else {
            Err(ErrorCode::ConcurrentTransactions)
        };
    }
    // While a prepared end's markers are being written, the producer's next end waits for
    // them (its client retries CONCURRENT_TRANSACTIONS), whatever it asks: as Kafka's
    // `pendingTransitionInProgress`. An abort at the epoch a commit just returned (franz-go's
    // session aborts right after a commit when it leaves) was refused INVALID_TXN_STATE.
    let producer = (producer_id, producer_epoch);
    if m.status.is_prepared()
        && (producer == m.producer_after() || producer == (m.producer_id, m.producer_epoch))
    {
        return Err(ErrorCode::ConcurrentTransactions);
    }
    check_producer(m, producer_id, producer_epoch)?;
    let status = if commit {
        TxnStatus::PrepareCommit
    } else {
        TxnStatus::PrepareAbort
    };
    match (m.status, commit) {
        (TxnStatus::Ongoing, _) => Ok(Decision::Write(m.prepared(status, bump_epoch, now_ms, allocate))),
        // Version 2: a producer may abort what never reached this coordinator (its first
        // produce failed); it gets its next epoch, and nothing is written to any partition.
        (TxnStatus::Empty | TxnStatus::CompleteCommit | TxnStatus::CompleteAbort, false) if bump_epoch => {
            let mut next = m.prepared(status, bump_epoch, now_ms, allocate);
            next.partitions.clear();
            next.offsets.clear();
            Ok(Decision::Write(next))
        }
        // A retry of an end that went through.
        _ if ended && !bump_epoch => Ok(Decision::Reply((m.producer_id, m.producer_epoch))),
        _ if ending => Err(ErrorCode::ConcurrentTransactions),
        _ => Err(ErrorCode::InvalidTxnState),
    }
}

/// A timed-out transaction: abort it with the next epoch, so that its producer is fenced.
pub fn decide_timeout(
    m: Option<&TxnMeta>,
    now_ms: i64,
    allocate: &mut dyn FnMut() -> i64,
) -> Result<Decision<()>, ErrorCode> {
    let m = m.ok_or(ErrorCode::InvalidProducerIdMapping)?;
    if m.status != TxnStatus::Ongoing || now_ms.saturating_sub(m.start_ms) <= m.timeout_ms as i64 {
        return Ok(Decision::Reply(()));
    }
    Ok(Decision::Write(m.prepared(
        TxnStatus::PrepareAbort,
        true,
        now_ms,
        allocate,
    )))
}

/// An abort marker for `tp` from a client (the Admin client's `abortTransaction`), on a
/// broker that is the only coordinator. A transaction this coordinator is running on `tp`
/// is aborted by the coordinator itself, with the next epoch, as a timeout would: its
/// producer is fenced, so its EndTxn(commit) fails rather than being answered for records
/// that a marker behind its back aborted. `Reply(false)`: the coordinator runs no
/// transaction of that producer on `tp` (a hanging one, which the marker itself may end).
pub fn decide_client_abort(
    m: Option<&TxnMeta>,
    producer_id: i64,
    tp: &TopicPartition,
    now_ms: i64,
    allocate: &mut dyn FnMut() -> i64,
) -> Result<Decision<bool>, ErrorCode> {
    let Some(m) = m.filter(|m| m.producer_id == producer_id && m.partitions.contains(tp)) else {
        return Ok(Decision::Reply(false));
    };
    match m.status {
        TxnStatus::Ongoing => Ok(Decision::Write(m.prepared(
            TxnStatus::PrepareAbort,
            true,
            now_ms,
            allocate,
        ))),
        // Decided already: its markers are on their way (a commit's too: no client may
        // undo a commit its producer was told of).
        status if status.is_prepared() => Err(ErrorCode::ConcurrentTransactions),
        _ => Ok(Decision::Reply(false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn init(
        c: &TxnCoordinator,
        id: &str,
        next_pid: &mut i64,
        requested: (i64, i16),
    ) -> Result<(i64, i16), ErrorCode> {
        let mut alloc = || {
            *next_pid += 1;
            *next_pid
        };
        match c.begin(id, |m| decide_init(m, id, 60_000, requested, 1, &mut alloc))? {
            Decision::Reply(r) => Ok(r),
            Decision::Write(meta) => {
                let r = (meta.producer_id, meta.producer_epoch);
                let status = meta.status;
                c.finish(id, Some(meta));
                if status == TxnStatus::PrepareAbort {
                    return Err(ErrorCode::ConcurrentTransactions);
                }
                Ok(r)
            }
        }
    }

    fn write<T>(c: &TxnCoordinator, id: &str, d: Result<Decision<T>, ErrorCode>) -> Result<(), ErrorCode> {
        if let Decision::Write(meta) = d? {
            c.finish(id, Some(meta));
        }
        Ok(())
    }

    #[test]
    fn a_new_instance_fences_the_old_and_aborts_its_transaction() {
        let c = TxnCoordinator::new([]);
        let mut pid = 100;
        let (p, e0) = init(&c, "t", &mut pid, (-1, -1)).unwrap();
        assert_eq!((p, e0), (101, 0));
        let parts = vec![TopicPartition::new("a", 0)];
        write(&c, "t", c.begin("t", |m| decide_add(m, p, e0, &parts, 5))).unwrap();
        assert_eq!(c.check_produce(p, e0, "a", 0), Ok(()));
        assert_eq!(
            c.check_produce(p, e0, "a", 1),
            Err(ErrorCode::InvalidTxnState),
            "a partition not added"
        );
        // A second instance: the transaction in progress is aborted with a new epoch first.
        assert_eq!(
            init(&c, "t", &mut pid, (-1, -1)),
            Err(ErrorCode::ConcurrentTransactions)
        );
        let m = c.get("t").unwrap();
        assert_eq!((m.status, m.producer_epoch), (TxnStatus::PrepareAbort, 1));
        assert_eq!(
            c.check_produce(p, e0, "a", 0),
            Err(ErrorCode::InvalidProducerEpoch),
            "the zombie is fenced"
        );
        assert_eq!(
            c.begin("t", |m| decide_end(m, p, e0, true, false, 6, &mut || 0))
                .err(),
            Some(ErrorCode::ProducerFenced)
        );
        // Completion writes CompleteAbort; then the new instance gets the next epoch.
        let mut done = m.clone();
        done.status = TxnStatus::CompleteAbort;
        done.partitions.clear();
        write(&c, "t", c.begin("t", |_| Ok(Decision::<()>::Write(done)))).unwrap();
        assert_eq!(init(&c, "t", &mut pid, (-1, -1)), Ok((101, 2)));
    }

    #[test]
    fn end_transaction_states() {
        let c = TxnCoordinator::new([]);
        let mut pid = 0;
        let (p, e) = init(&c, "t", &mut pid, (-1, -1)).unwrap();
        assert_eq!(
            c.begin("t", |m| decide_end(m, p, e, true, false, 1, &mut || 0))
                .err(),
            Some(ErrorCode::InvalidTxnState),
            "nothing to end"
        );
        let parts = vec![TopicPartition::new("a", 0)];
        write(&c, "t", c.begin("t", |m| decide_add(m, p, e, &parts, 1))).unwrap();
        let d = c
            .begin("t", |m| decide_end(m, p, e, true, false, 2, &mut || 0))
            .unwrap();
        // Busy while the prepare record is written.
        assert_eq!(
            c.begin("t", |m| decide_end(m, p, e, true, false, 2, &mut || 0))
                .err(),
            Some(ErrorCode::ConcurrentTransactions)
        );
        let Decision::Write(prepared) = d else { panic!() };
        c.finish("t", Some(prepared.clone()));
        assert_eq!(
            c.begin("t", |m| decide_add(m, p, e, &parts, 3)).err(),
            Some(ErrorCode::ConcurrentTransactions),
            "the next transaction waits for the markers"
        );
        assert_eq!(c.prepared().len(), 1);
        let done = TxnMeta {
            status: TxnStatus::CompleteCommit,
            ..prepared
        };
        write(&c, "t", c.begin("t", |_| Ok(Decision::<()>::Write(done)))).unwrap();
        assert!(matches!(
            c.begin("t", |m| decide_end(m, p, e, true, false, 4, &mut || 0)),
            Ok(Decision::Reply(r)) if r == (p, e)
        ));
        assert_eq!(
            c.begin("t", |m| decide_end(m, p, e + 1, true, false, 4, &mut || 0))
                .err(),
            Some(ErrorCode::ProducerFenced)
        );
        assert_eq!(
            c.begin("t", |m| decide_end(m, p + 1, e, true, false, 4, &mut || 0))
                .err(),
            Some(ErrorCode::InvalidProducerIdMapping)
        );
    }

    /// Transaction version 2 (EndTxn v5): the producer's abort right after a commit, at the
    /// epoch the commit returned, waits while the commit's markers are written (franz-go's
    /// session does this when it leaves), then aborts nothing with the next epoch.
    #[test]
    fn an_abort_right_after_a_commit_waits_for_its_markers() {
        let c = TxnCoordinator::new([]);
        let mut pid = 0;
        let (p, e) = init(&c, "t", &mut pid, (-1, -1)).unwrap();
        let parts = vec![TopicPartition::new("a", 0)];
        write(&c, "t", c.begin("t", |m| decide_add(m, p, e, &parts, 1))).unwrap();
        let Decision::Write(prepared) = c
            .begin("t", |m| decide_end(m, p, e, true, true, 2, &mut || 0))
            .unwrap()
        else {
            panic!("a commit writes its prepare record")
        };
        c.finish("t", Some(prepared.clone()));
        let next = prepared.producer_after();
        assert_eq!(next, (p, e + 1));
        for commit in [false, true] {
            assert_eq!(
                c.begin("t", |m| decide_end(m, next.0, next.1, commit, true, 3, &mut || 0))
                    .err(),
                Some(ErrorCode::ConcurrentTransactions),
                "the next end (commit {commit}) waits for the markers"
            );
        }
        write(
            &c,
            "t",
            c.begin("t", |m| Ok(Decision::<()>::Write(m.unwrap().completed(4)))),
        )
        .unwrap();
        let Decision::Write(aborted) = c
            .begin("t", |m| decide_end(m, next.0, next.1, false, true, 5, &mut || 0))
            .unwrap()
        else {
            panic!("an abort of nothing writes its prepare record")
        };
        assert_eq!(aborted.status, TxnStatus::PrepareAbort);
        assert!(aborted.partitions.is_empty());
        assert_eq!(aborted.producer_after(), (p, e + 2));
    }

    #[test]
    fn a_write_in_flight_when_the_state_is_replaced_is_not_applied() {
        let c = TxnCoordinator::new([]);
        let mut pid = 0;
        let (p, e) = init(&c, "t", &mut pid, (-1, -1)).unwrap();
        let parts = vec![TopicPartition::new("a", 0)];
        let Decision::Write(m) = c.begin("t", |m| decide_add(m, p, e, &parts, 1)).unwrap() else {
            panic!()
        };
        // This broker stops coordinating while the record is written.
        c.reset([]);
        c.finish("t", Some(m.clone()));
        assert_eq!(c.get("t"), None);
        // And a new id reserved before the reset is not brought back either.
        let mut alloc = || 7;
        let Decision::Write(n) = c
            .begin("u", |m| decide_init(m, "u", 1_000, (-1, -1), 1, &mut alloc))
            .unwrap()
        else {
            panic!()
        };
        c.reset([m]);
        c.finish("u", Some(n));
        assert_eq!(c.get("u"), None);
        assert_eq!(
            c.id_of(p).as_deref(),
            Some("t"),
            "the state it was replaced with stays"
        );
    }

    #[test]
    fn timed_out_transactions_are_found_and_fenced() {
        let c = TxnCoordinator::new([]);
        let mut pid = 0;
        let (p, e) = init(&c, "t", &mut pid, (-1, -1)).unwrap();
        let parts = vec![TopicPartition::new("a", 0)];
        write(&c, "t", c.begin("t", |m| decide_add(m, p, e, &parts, 1_000))).unwrap();
        assert!(c.timed_out(60_000).is_empty());
        assert_eq!(c.timed_out(61_001), vec!["t".to_string()]);
        let mut alloc = || 0;
        let Decision::Write(m) = c.begin("t", |m| decide_timeout(m, 61_001, &mut alloc)).unwrap() else {
            panic!()
        };
        assert_eq!(
            (m.status, m.producer_epoch, m.last_producer_epoch),
            (TxnStatus::PrepareAbort, e + 1, e)
        );
    }

    #[test]
    fn a_clients_abort_of_a_running_transaction_fences_its_producer() {
        let c = TxnCoordinator::new([]);
        let mut pid = 0;
        let (p, e) = init(&c, "t", &mut pid, (-1, -1)).unwrap();
        let (a, b) = (TopicPartition::new("a", 0), TopicPartition::new("b", 0));
        write(
            &c,
            "t",
            c.begin("t", |m| decide_add(m, p, e, std::slice::from_ref(&a), 1_000)),
        )
        .unwrap();
        let mut alloc = || 0;
        let mut decide = |tp: &TopicPartition, producer_id: i64| {
            c.begin("t", |m| {
                decide_client_abort(m, producer_id, tp, 2_000, &mut alloc)
            })
        };
        // Not this coordinator's: another partition, another producer.
        assert!(matches!(decide(&b, p), Ok(Decision::Reply(false))));
        assert!(matches!(decide(&a, p + 1), Ok(Decision::Reply(false))));
        let Ok(Decision::Write(m)) = decide(&a, p) else {
            panic!("the coordinator aborts its own transaction")
        };
        assert_eq!((m.status, m.producer_epoch), (TxnStatus::PrepareAbort, e + 1));
        c.finish("t", Some(m));
        assert_eq!(
            decide(&a, p).err(),
            Some(ErrorCode::ConcurrentTransactions),
            "decided: its markers are on their way"
        );
    }
}

#[cfg(test)]
mod tv2_tests {
    use super::*;

    fn ongoing(epoch: i16) -> TxnMeta {
        TxnMeta {
            transactional_id: "t".into(),
            producer_id: 5,
            producer_epoch: epoch,
            last_producer_id: -1,
            last_producer_epoch: -1,
            next_producer_id: -1,
            timeout_ms: 60_000,
            status: TxnStatus::Ongoing,
            partitions: BTreeSet::from([TopicPartition::new("a", 0)]),
            offsets: BTreeMap::new(),
            start_ms: 1,
            update_ms: 1,
        }
    }

    #[test]
    fn version_2_bumps_the_epoch_at_every_end_and_answers_retries() {
        let m = ongoing(3);
        let Ok(Decision::Write(prepared)) = decide_end(Some(&m), 5, 3, true, true, 2, &mut || 99) else {
            panic!()
        };
        assert_eq!(
            (
                prepared.status,
                prepared.producer_epoch,
                prepared.last_producer_epoch
            ),
            (TxnStatus::PrepareCommit, 4, 3)
        );
        // Retried while the markers are written, then after.
        assert_eq!(
            decide_end(Some(&prepared), 5, 3, true, true, 3, &mut || 99).err(),
            Some(ErrorCode::ConcurrentTransactions)
        );
        let done = TxnMeta {
            status: TxnStatus::CompleteCommit,
            ..prepared.clone()
        };
        assert!(matches!(
            decide_end(Some(&done), 5, 3, true, true, 4, &mut || 99),
            Ok(Decision::Reply((5, 4)))
        ));
        // The old epoch cannot start anything; the new one can.
        assert_eq!(
            decide_add(Some(&done), 5, 3, &[TopicPartition::new("a", 0)], 5).err(),
            Some(ErrorCode::ProducerFenced)
        );
        assert!(matches!(
            decide_add(Some(&done), 5, 4, &[TopicPartition::new("a", 0)], 5),
            Ok(Decision::Write(_))
        ));
        // An exhausted epoch: the markers end what the old id wrote, with the last epoch;
        // the producer goes on under a new id once the transaction is complete.
        let Ok(Decision::Write(last)) = decide_end(
            Some(&ongoing(i16::MAX - 1)),
            5,
            i16::MAX - 1,
            false,
            true,
            6,
            &mut || 99,
        ) else {
            panic!()
        };
        assert_eq!(
            (last.producer_id, last.producer_epoch, last.next_producer_id),
            (5, i16::MAX, 99),
            "the markers carry the old id"
        );
        assert_eq!(last.producer_after(), (99, 0), "EndTxn answers with the new id");
        assert_eq!(
            decide_add(Some(&last), 99, 0, &[TopicPartition::new("a", 0)], 7).err(),
            Some(ErrorCode::ConcurrentTransactions),
            "the new id waits for the completion"
        );
        let done = last.completed(8);
        assert_eq!(
            (done.producer_id, done.producer_epoch, done.next_producer_id),
            (99, 0, -1)
        );
        assert!(matches!(
            decide_end(Some(&done), 5, i16::MAX - 1, false, true, 9, &mut || 100),
            Ok(Decision::Reply((99, 0)))
        ));
        assert!(matches!(
            decide_add(Some(&done), 99, 0, &[TopicPartition::new("a", 0)], 10),
            Ok(Decision::Write(_))
        ));
    }
}
