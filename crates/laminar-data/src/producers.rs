//! Idempotent producers: producer ids, and de-duplication over the last 5 batches of each
//! producer and partition, as Kafka does. Checked on the partition's storage thread, in the
//! same job as the append, so check and append are atomic per partition.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

use laminar_protocol::ErrorCode;

/// Batches remembered per producer and partition (Kafka's max in-flight for idempotence).
pub const BATCHES_REMEMBERED_MAX: usize = 5;

#[derive(Debug, Clone, Copy)]
struct BatchSeq {
    first_seq: i32,
    last_seq: i32,
    base_offset: i64,
}

#[derive(Debug)]
struct PartitionProducer {
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
}

/// In a cluster, producer ids are unique across brokers by their remainder modulo this (see
/// `Producers::for_node`): node ids below it never share one.
pub const ID_STRIDE: i64 = 1024;

pub struct Producers {
    next_id: AtomicI64,
    /// Added by each allocation: 1 on a single node; in a cluster, `ID_STRIDE`, each broker
    /// allocating the ids that leave its own `node.id` as the remainder.
    stride: i64,
    state: Mutex<HashMap<(i64, String, i32), PartitionProducer>>,
    /// In a cluster, transactional producers whose partition the coordinator (elsewhere)
    /// was asked about, before their first batch of a transaction here: (epoch, token, when
    /// it was set). A marker of the producer removes it, so that a batch verified before a
    /// marker but appended after it is refused (KIP-890's verification guard).
    guards: Mutex<HashMap<(i64, String, i32), Guard>>,
    next_guard: AtomicU64,
}

/// A verification guard (see `Producers::guards`).
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

pub enum SeqCheck {
    /// Append it.
    Append,
    /// Already appended at this base offset: answer success without appending again.
    Duplicate {
        base_offset: i64,
    },
    Reject(ErrorCode),
}

impl Producers {
    pub fn new() -> Producers {
        // Ids must not repeat across restarts; the clock in microseconds at startup is far
        // above any id handed out before (one per InitProducerId call).
        let start = laminar_storage::now_ms().saturating_mul(1000);
        Producers {
            next_id: AtomicI64::new(start),
            stride: 1,
            state: Mutex::new(HashMap::new()),
            guards: Mutex::new(HashMap::new()),
            next_guard: AtomicU64::new(1),
        }
    }

    /// In a cluster, ids must not repeat across brokers either: broker `node` hands out the
    /// ids congruent to it modulo `ID_STRIDE`, from the clock in nanoseconds at startup (each
    /// id takes `ID_STRIDE` of them, so restarts stay above the ids given before at up to a
    /// million InitProducerId calls a second).
    pub fn for_node(node: i32) -> Producers {
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64);
        let start = now_ns / ID_STRIDE * ID_STRIDE + (node as i64).rem_euclid(ID_STRIDE);
        Producers {
            next_id: AtomicI64::new(start),
            stride: ID_STRIDE,
            state: Mutex::new(HashMap::new()),
            guards: Mutex::new(HashMap::new()),
            next_guard: AtomicU64::new(1),
        }
    }

    pub fn allocate(&self) -> i64 {
        self.next_id.fetch_add(self.stride, Ordering::Relaxed)
    }

    /// Checks one batch's sequence numbers against what this partition has seen.
    pub fn check(&self, topic: &str, partition: i32, batch: ProducerBatch) -> SeqCheck {
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
        let mut state = self.state.lock().unwrap();
        let Some(p) = state.get_mut(&(pid, topic.to_string(), partition)) else {
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

    pub fn record(&self, topic: &str, partition: i32, batch: ProducerBatch, base_offset: i64) {
        let ProducerBatch {
            producer_id: pid,
            epoch,
            first_seq,
            last_seq,
            max_timestamp_ms,
        } = batch;
        if pid < 0 {
            return;
        }
        let mut state = self.state.lock().unwrap();
        let p = state.entry((pid, topic.to_string(), partition)).or_default();
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

    /// Sets the verification guard of a transactional producer on `topic`-`partition`, before
    /// the coordinator is asked about it. Returns its token.
    pub fn guard(&self, topic: &str, partition: i32, producer_id: i64, epoch: i16) -> u64 {
        let token = self.next_guard.fetch_add(1, Ordering::Relaxed);
        self.guards.lock().unwrap().insert(
            (producer_id, topic.to_string(), partition),
            Guard {
                epoch,
                token,
                set_ms: laminar_storage::now_ms(),
            },
        );
        token
    }

    /// Is the guard set with `token` still there (no marker of the producer since)?
    pub fn guarded(&self, topic: &str, partition: i32, producer_id: i64, epoch: i16, token: u64) -> bool {
        self.guards
            .lock()
            .unwrap()
            .get(&(producer_id, topic.to_string(), partition))
            .is_some_and(|g| (g.epoch, g.token) == (epoch, token))
    }

    /// The coordinator epoch of the producer's last marker on `topic`-`partition` (-1: none).
    pub fn coordinator_epoch(&self, topic: &str, partition: i32, producer_id: i64) -> i32 {
        let state = self.state.lock().unwrap();
        state
            .get(&(producer_id, topic.to_string(), partition))
            .map_or(-1, |p| p.coordinator_epoch)
    }

    /// The producer's epoch on `topic`-`partition`, if it has state there.
    pub fn epoch(&self, topic: &str, partition: i32, producer_id: i64) -> Option<i16> {
        let state = self.state.lock().unwrap();
        state
            .get(&(producer_id, topic.to_string(), partition))
            .map(|p| p.epoch)
    }

    /// A transaction marker of this producer was appended: a marker with a newer epoch (a
    /// fenced or bumped producer) makes every older epoch's batches refused from now on, and
    /// the new epoch starts its sequences at 0.
    pub fn on_marker(
        &self,
        topic: &str,
        partition: i32,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        timestamp_ms: i64,
    ) {
        self.guards
            .lock()
            .unwrap()
            .remove(&(producer_id, topic.to_string(), partition));
        let mut state = self.state.lock().unwrap();
        let p = state
            .entry((producer_id, topic.to_string(), partition))
            .or_default();
        if epoch > p.epoch || p.batches.is_empty() {
            p.batches.clear();
            p.epoch = epoch;
        }
        p.coordinator_epoch = p.coordinator_epoch.max(coordinator_epoch);
        p.last_timestamp_ms = timestamp_ms;
    }

    /// Forgets every producer whose last batch on a partition is older than `expiration_ms`
    /// (KIP-854; Kafka compares the batch's timestamp, as here). Its next batch with a sequence
    /// above 0 gets UNKNOWN_PRODUCER_ID, and the client starts its sequence again. Returns how
    /// many (producer, partition) states went.
    pub fn expire(&self, now_ms: i64, expiration_ms: u64) -> usize {
        self.guards
            .lock()
            .unwrap()
            .retain(|_, g| now_ms.saturating_sub(g.set_ms) < expiration_ms as i64);
        let mut state = self.state.lock().unwrap();
        let before = state.len();
        state.retain(|_, p| now_ms.saturating_sub(p.last_timestamp_ms) < expiration_ms as i64);
        before - state.len()
    }

    /// The producers that have appended to `topic`-`partition` (since the start, or the
    /// rebuild from the log's tail at startup), by producer id.
    pub fn describe(&self, topic: &str, partition: i32) -> Vec<ProducerInfo> {
        let state = self.state.lock().unwrap();
        let mut out: Vec<ProducerInfo> = state
            .iter()
            .filter(|((_, t, p), _)| t == topic && *p == partition)
            .filter_map(|((pid, _, _), s)| {
                let last = s.batches.back()?;
                Some(ProducerInfo {
                    producer_id: *pid,
                    epoch: s.epoch,
                    last_seq: last.last_seq,
                    last_timestamp_ms: s.last_timestamp_ms,
                })
            })
            .collect();
        out.sort_by_key(|i| i.producer_id);
        out
    }
}

/// How much of each log's tail is scanned at startup to rebuild producer state.
pub const PRODUCER_STATE_SCAN_BYTES_MAX: u64 = 64 << 20;

impl Producers {
    /// Takes the producer state of batches appended with their offsets (a follower's
    /// appends, the batches as its leader wrote them), so that a follower that becomes the
    /// leader de-duplicates a producer's retries as its old leader did.
    pub fn observe(&self, topic: &str, partition: i32, batches: &[u8]) {
        if let Err(e) = self.observe_from(topic, partition, batches, i64::MIN) {
            laminar_metrics::warn!("producer state of {topic}-{partition}: {e}");
        }
    }

    /// Records every batch in `buf` that starts at or after `from`; returns how many.
    fn observe_from(
        &self,
        topic: &str,
        partition: i32,
        buf: &[u8],
        from: i64,
    ) -> Result<usize, laminar_records::RecordsError> {
        use laminar_records::BatchHeader;
        let mut pos = 0;
        let mut batches = 0;
        while pos + laminar_records::BATCH_HEADER_BYTES <= buf.len() {
            let h = BatchHeader::parse(&buf[pos..])?;
            if h.producer_id >= 0 && h.base_offset >= from && h.is_control() {
                let end = (pos + h.total_bytes()).min(buf.len());
                let coordinator_epoch =
                    laminar_records::marker_coordinator_epoch(&buf[pos..end]).unwrap_or(-1);
                self.on_marker(
                    topic,
                    partition,
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
                self.record(topic, partition, batch, h.base_offset);
                batches += 1;
            }
            pos += h.total_bytes();
        }
        Ok(batches)
    }

    /// Forgets every producer's state on `topic`-`partition` (its log was truncated: the
    /// state is rebuilt from what remains).
    pub fn forget_partition(&self, topic: &str, partition: i32) {
        self.guards
            .lock()
            .unwrap()
            .retain(|(_, t, p), _| !(t == topic && *p == partition));
        self.state
            .lock()
            .unwrap()
            .retain(|(_, t, p), _| !(t == topic && *p == partition));
    }

    /// Rebuilds the sequence state of `topic`-`partition` from the last batches of its log,
    /// so that a producer retrying across a broker restart is still de-duplicated. Reads
    /// from disk: runs at startup, off the socket threads.
    pub fn rebuild_from_log(
        &self,
        topic: &str,
        partition: i32,
        log: &laminar_storage::Log,
    ) -> Result<usize, String> {
        use laminar_storage::backend::read_exact_at;
        let mut offset = log.recent_offset(PRODUCER_STATE_SCAN_BYTES_MAX);
        let mut batches = 0;
        let mut buf = Vec::new();
        loop {
            let read = log.read(offset, 1 << 20, true).map_err(|e| e.to_string())?;
            let Some(range) = read.range else { break };
            buf.resize(range.len as usize, 0);
            read_exact_at(range.file.as_ref(), &mut buf, range.position.0).map_err(|e| e.to_string())?;
            batches += self
                .observe_from(topic, partition, &buf, offset.0)
                .map_err(|e| e.to_string())?;
            if range.next_offset <= offset {
                break;
            }
            offset = range.next_offset;
        }
        Ok(batches)
    }
}

impl Default for Producers {
    fn default() -> Self {
        Producers::new()
    }
}
