//! Idempotent producers: producer ids ([`ProducerIds`]), and each partition's producers'
//! state ([`ProducerState`], owned by its `Partition`): de-duplication over the last 5
//! batches of each producer, as Kafka does. Checked on the partition's storage thread, in
//! the same job as the append, so check and append are atomic per partition.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

use laminar_protocol::ErrorCode;

/// Batches remembered per producer and partition (Kafka's max in-flight for idempotence).
pub const BATCHES_REMEMBERED_MAX: usize = 5;

/// Producers remembered per partition. Any client can send a batch under a producer id of
/// its choosing with sequence 0, and each one was kept for `producer.id.expiration.ms` (a
/// day): a flood of ids grew the broker without bound. Past this, the producers that
/// appended here least recently are forgotten (as Redpanda's `max_concurrent_producer_ids`
/// evicts): such a producer's next batch gets UNKNOWN_PRODUCER_ID, as after expiration, and
/// it starts its sequence again. About 2 MB per partition when full.
pub const PRODUCERS_PER_PARTITION_MAX: usize = 10_000;
/// Forgotten at once when the state is full: one scan per this many new producers.
const PRODUCERS_EVICTED_AT_ONCE: usize = PRODUCERS_PER_PARTITION_MAX / 16;

#[derive(Debug, Clone, Copy)]
struct BatchSeq {
    first_seq: i32,
    last_seq: i32,
    base_offset: i64,
}

#[derive(Debug)]
struct PartitionProducer {
    /// When it last appended here, in `StateInner::touches`: the least recent go first.
    touched: u64,
    epoch: i16,
    batches: VecDeque<BatchSeq>,
    /// The largest record timestamp of the last batch appended (DescribeProducers).
    last_timestamp_ms: i64,
    /// The coordinator epoch of the last marker of this producer here (-1: none): a marker
    /// from an older coordinator is refused (TRANSACTION_COORDINATOR_FENCED), as Kafka does.
    coordinator_epoch: i32,
}

impl Default for PartitionProducer {
    fn default() -> Self {
        PartitionProducer {
            touched: 0,
            epoch: 0,
            batches: VecDeque::new(),
            last_timestamp_ms: 0,
            coordinator_epoch: -1,
        }
    }
}

/// One producer's state on one partition, as DescribeProducers reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProducerInfo {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_seq: i32,
    pub last_timestamp_ms: i64,
    /// Of its last marker here (-1: none).
    pub coordinator_epoch: i32,
}

/// In a cluster, producer ids are unique across brokers by their remainder modulo this (see
/// `ProducerIds::for_node`): node ids below it never share one.
pub const ID_STRIDE: i64 = 1024;

/// The producer ids this broker hands out (InitProducerId, and the epoch bumps that run out
/// of epochs).
pub struct ProducerIds {
    next_id: AtomicI64,
}

impl ProducerIds {
    /// Ids must not repeat across restarts or brokers: broker `node` hands out the ids
    /// congruent to it modulo `ID_STRIDE`, from the clock in nanoseconds at startup (each id
    /// takes `ID_STRIDE` of them, so restarts stay above the ids given before at up to a
    /// million InitProducerId calls a second; and above those a single node gave from the
    /// clock in microseconds before it was a cluster of one).
    pub fn for_node(node: i32) -> ProducerIds {
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64);
        let start = now_ns / ID_STRIDE * ID_STRIDE + (node as i64).rem_euclid(ID_STRIDE);
        ProducerIds {
            next_id: AtomicI64::new(start),
        }
    }

    pub fn allocate(&self) -> i64 {
        self.next_id.fetch_add(ID_STRIDE, Ordering::Relaxed)
    }
}

/// The producers' state of one partition. One lock per partition: produces to different
/// partitions never wait for each other here.
#[derive(Default)]
pub struct ProducerState {
    inner: Mutex<StateInner>,
}

#[derive(Default)]
struct StateInner {
    producers: HashMap<i64, PartitionProducer>,
    /// Transactional producers whose coordinator (on another broker) was asked about this
    /// partition, before their first batch of a transaction here. A marker of the producer
    /// removes its guard, so that a batch verified before a marker but appended after it is
    /// refused (KIP-890's verification guard).
    guards: HashMap<i64, Guard>,
    next_guard: u64,
    /// Counts the batches and markers taken, to order producers by their last.
    touches: u64,
}

/// Producers and verification guards forgotten because a partition's state was full
/// (`laminar_producer_states_evicted_total`).
pub static PRODUCERS_EVICTED: AtomicU64 = AtomicU64::new(0);

/// Before `pid` is added to a full `map`: forgets the entries least recently used (the
/// lowest `used`), a sixteenth at a time, so that a flood of new ids costs one scan each
/// `PRODUCERS_EVICTED_AT_ONCE` of them. Counted and logged.
fn make_room<V>(map: &mut HashMap<i64, V>, pid: i64, used: impl Fn(&V) -> u64, what: &str) {
    if map.len() < PRODUCERS_PER_PARTITION_MAX || map.contains_key(&pid) {
        return;
    }
    let mut ages: Vec<u64> = map.values().map(&used).collect();
    let (_, nth, _) = ages.select_nth_unstable(PRODUCERS_EVICTED_AT_ONCE);
    let below = *nth;
    let before = map.len();
    map.retain(|_, v| used(v) >= below);
    let n = before - map.len();
    PRODUCERS_EVICTED.fetch_add(n as u64, Ordering::Relaxed);
    laminar_metrics::warn!(
        "a partition's producer state was full ({PRODUCERS_PER_PARTITION_MAX}): forgot the {n} {what} least recently used"
    );
}

/// A verification guard (see `StateInner::guards`).
struct Guard {
    epoch: i16,
    token: u64,
    set_ms: i64,
}

/// The producer fields of the batches of one produce to one partition.
#[derive(Debug, Clone, Copy)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub epoch: i16,
    pub first_seq: i32,
    pub last_seq: i32,
    /// The largest record timestamp in the batches.
    pub max_timestamp_ms: i64,
}

/// Why a partition's producer state could not be rebuilt from its log.
#[derive(Debug, thiserror::Error)]
pub enum RebuildError {
    #[error("reading the log: {0}")]
    Storage(#[from] laminar_storage::StorageError),
    #[error("reading {0}: {1}")]
    Read(String, std::io::Error),
    #[error("a batch: {0}")]
    Batch(#[from] laminar_records::RecordsError),
}

pub enum SeqCheck {
    /// Append it.
    Append,
    /// Already appended at this base offset: answer success without appending again.
    Duplicate {
        base_offset: i64,
    },
    Reject(ErrorCode),
}

impl ProducerState {
    /// Checks one batch's sequence numbers against what this partition has seen.
    pub fn check(&self, batch: ProducerBatch) -> SeqCheck {
        let ProducerBatch {
            producer_id: pid,
            epoch,
            first_seq,
            last_seq,
            ..
        } = batch;
        if pid < 0 {
            return SeqCheck::Append;
        }
        let state = self.inner.lock().unwrap();
        let Some(p) = state.producers.get(&pid) else {
            return if first_seq == 0 {
                SeqCheck::Append
            } else {
                SeqCheck::Reject(ErrorCode::UnknownProducerId)
            };
        };
        if epoch < p.epoch {
            return SeqCheck::Reject(ErrorCode::InvalidProducerEpoch);
        }
        if epoch > p.epoch {
            return if first_seq == 0 {
                SeqCheck::Append
            } else {
                SeqCheck::Reject(ErrorCode::OutOfOrderSequenceNumber)
            };
        }
        if let Some(b) = p
            .batches
            .iter()
            .find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
        {
            return SeqCheck::Duplicate {
                base_offset: b.base_offset,
            };
        }
        let expected = p.batches.back().map_or(0, |b| b.last_seq.wrapping_add(1));
        if first_seq != expected {
            return SeqCheck::Reject(ErrorCode::OutOfOrderSequenceNumber);
        }
        SeqCheck::Append
    }

    pub fn record(&self, batch: ProducerBatch, base_offset: i64) {
        if batch.producer_id < 0 {
            return;
        }
        self.inner.lock().unwrap().record(batch, base_offset);
    }

    /// Sets the verification guard of a transactional producer here, before its
    /// coordinator is asked about it. Returns its token.
    pub fn guard(&self, producer_id: i64, epoch: i16) -> u64 {
        let mut state = self.inner.lock().unwrap();
        // The oldest guards go first: their batches are refused and retried, never let in.
        make_room(&mut state.guards, producer_id, |g| g.token, "verification guards");
        state.next_guard += 1;
        let token = state.next_guard;
        let set_ms = laminar_storage::now_ms();
        state.guards.insert(producer_id, Guard { epoch, token, set_ms });
        token
    }

    /// Is the guard set with `token` still there (no marker of the producer since)?
    pub fn guarded(&self, producer_id: i64, epoch: i16, token: u64) -> bool {
        let state = self.inner.lock().unwrap();
        state
            .guards
            .get(&producer_id)
            .is_some_and(|g| (g.epoch, g.token) == (epoch, token))
    }

    /// The coordinator epoch of the producer's last marker here (-1: none).
    pub fn coordinator_epoch(&self, producer_id: i64) -> i32 {
        let state = self.inner.lock().unwrap();
        state
            .producers
            .get(&producer_id)
            .map_or(-1, |p| p.coordinator_epoch)
    }

    /// The producer's epoch here, if it has state here.
    pub fn epoch(&self, producer_id: i64) -> Option<i16> {
        let state = self.inner.lock().unwrap();
        state.producers.get(&producer_id).map(|p| p.epoch)
    }

    /// A transaction marker of this producer was appended: a marker with a newer epoch (a
    /// fenced or bumped producer) makes every older epoch's batches refused from now on, and
    /// the new epoch starts its sequences at 0.
    pub fn on_marker(&self, producer_id: i64, epoch: i16, coordinator_epoch: i32, timestamp_ms: i64) {
        self.inner
            .lock()
            .unwrap()
            .on_marker(producer_id, epoch, coordinator_epoch, timestamp_ms);
    }

    /// Forgets every producer whose last batch here is older than `expiration_ms` (KIP-854;
    /// Kafka compares the batch's timestamp, as here). Its next batch with a sequence above 0
    /// gets UNKNOWN_PRODUCER_ID, and the client starts its sequence again. Returns how many
    /// producers' states went.
    pub fn expire(&self, now_ms: i64, expiration_ms: u64) -> usize {
        let expired = |since_ms: i64| now_ms.saturating_sub(since_ms) >= expiration_ms as i64;
        let mut state = self.inner.lock().unwrap();
        state.guards.retain(|_, g| !expired(g.set_ms));
        let before = state.producers.len();
        state.producers.retain(|_, p| !expired(p.last_timestamp_ms));
        before - state.producers.len()
    }

    /// The producers that have appended here (since the state was rebuilt from the log's
    /// tail), by producer id.
    pub fn describe(&self) -> Vec<ProducerInfo> {
        let state = self.inner.lock().unwrap();
        let mut out: Vec<ProducerInfo> = state
            .producers
            .iter()
            .filter_map(|(pid, s)| {
                let last = s.batches.back()?;
                Some(ProducerInfo {
                    producer_id: *pid,
                    epoch: s.epoch,
                    last_seq: last.last_seq,
                    last_timestamp_ms: s.last_timestamp_ms,
                    coordinator_epoch: s.coordinator_epoch,
                })
            })
            .collect();
        out.sort_by_key(|i| i.producer_id);
        out
    }

    /// Forgets every producer's state here (the log was truncated, or a leadership begins:
    /// the state is rebuilt from what the log holds).
    pub fn forget(&self) {
        *self.inner.lock().unwrap() = StateInner::default();
    }
}

impl StateInner {
    /// The state of producer `pid`, made if it has none; the producers that appended least
    /// recently are forgotten first if the state is full.
    fn producer(&mut self, pid: i64) -> &mut PartitionProducer {
        make_room(&mut self.producers, pid, |p| p.touched, "producers");
        self.touches += 1;
        let touched = self.touches;
        let p = self.producers.entry(pid).or_default();
        p.touched = touched;
        p
    }

    fn record(&mut self, batch: ProducerBatch, base_offset: i64) {
        let ProducerBatch {
            producer_id: pid,
            epoch,
            first_seq,
            last_seq,
            max_timestamp_ms,
        } = batch;
        let p = self.producer(pid);
        if epoch > p.epoch {
            p.batches.clear();
            p.epoch = epoch;
        }
        p.batches.push_back(BatchSeq {
            first_seq,
            last_seq,
            base_offset,
        });
        while p.batches.len() > BATCHES_REMEMBERED_MAX {
            p.batches.pop_front();
        }
        p.last_timestamp_ms = max_timestamp_ms;
    }

    fn on_marker(&mut self, producer_id: i64, epoch: i16, coordinator_epoch: i32, timestamp_ms: i64) {
        self.guards.remove(&producer_id);
        let p = self.producer(producer_id);
        if epoch > p.epoch || p.batches.is_empty() {
            p.batches.clear();
            p.epoch = epoch;
        }
        p.coordinator_epoch = p.coordinator_epoch.max(coordinator_epoch);
        p.last_timestamp_ms = timestamp_ms;
    }
}

/// How much of each log's tail is scanned to rebuild producer state.
pub const PRODUCER_STATE_SCAN_BYTES_MAX: u64 = 64 << 20;

impl ProducerState {
    /// Takes the producer state of batches appended with their offsets (a follower's
    /// appends, the batches as its leader wrote them), so that a follower that becomes the
    /// leader de-duplicates a producer's retries as its old leader did.
    pub fn observe(&self, batches: &[u8]) -> Result<usize, laminar_records::RecordsError> {
        self.observe_from(batches, i64::MIN)
    }

    /// Records every batch in `buf` that starts at or after `from`; returns how many.
    fn observe_from(&self, buf: &[u8], from: i64) -> Result<usize, laminar_records::RecordsError> {
        use laminar_records::BatchHeader;
        let mut state = self.inner.lock().unwrap();
        let mut pos = 0;
        let mut batches = 0;
        while pos + laminar_records::BATCH_HEADER_BYTES <= buf.len() {
            let h = BatchHeader::parse(&buf[pos..])?;
            if h.producer_id >= 0 && h.base_offset >= from && h.is_control() {
                let end = (pos + h.total_bytes()).min(buf.len());
                let coordinator_epoch =
                    laminar_records::marker_coordinator_epoch(&buf[pos..end]).unwrap_or(-1);
                state.on_marker(
                    h.producer_id,
                    h.producer_epoch,
                    coordinator_epoch,
                    h.max_timestamp,
                );
            } else if h.producer_id >= 0 && h.base_offset >= from {
                let batch = ProducerBatch {
                    producer_id: h.producer_id,
                    epoch: h.producer_epoch,
                    first_seq: h.base_sequence,
                    last_seq: h.base_sequence.wrapping_add(h.last_offset_delta),
                    max_timestamp_ms: h.max_timestamp,
                };
                state.record(batch, h.base_offset);
                batches += 1;
            }
            pos += h.total_bytes();
        }
        Ok(batches)
    }

    /// Rebuilds the sequence state from the last batches of the partition's log, so that a
    /// producer retrying across a restart or a failover is still de-duplicated. Reads from
    /// disk: runs on the partition's storage thread, off the socket threads.
    pub fn rebuild_from_log(&self, log: &laminar_storage::Log) -> Result<usize, RebuildError> {
        use laminar_storage::backend::read_exact_at;
        self.forget();
        let mut offset = log.recent_offset(PRODUCER_STATE_SCAN_BYTES_MAX);
        let mut batches = 0;
        let mut buf = Vec::new();
        loop {
            let read = match log.read(offset, 1 << 20, true) {
                Ok(read) => read,
                // A damaged batch (never served) is passed over: what it held of a
                // producer's state is lost, as after that producer's expiration.
                Err(laminar_storage::StorageError::Corrupt { .. }) => match log.past_damage(offset) {
                    Ok(Some(next)) => {
                        offset = next;
                        continue;
                    }
                    // Where the batches after it start is not known: no state rather than
                    // a state without its newest batches (which would answer their
                    // producers' next batches OUT_OF_ORDER_SEQUENCE_NUMBER; without state
                    // they get UNKNOWN_PRODUCER_ID, which a producer recovers from).
                    _ => {
                        laminar_metrics::warn!(
                            "a damaged batch at offset {offset} hides the batches after it: idempotent producers' state starts empty"
                        );
                        self.forget();
                        return Ok(0);
                    }
                },
                Err(e) => return Err(RebuildError::Storage(e)),
            };
            let Some(range) = read.range else { break };
            buf.resize(range.len as usize, 0);
            read_exact_at(range.file.as_ref(), &mut buf, range.position.0)
                .map_err(|e| RebuildError::Read(range.path.display().to_string(), e))?;
            batches += self.observe_from(&buf, offset.0)?;
            if range.next_offset <= offset {
                break;
            }
            offset = range.next_offset;
        }
        Ok(batches)
    }
}
