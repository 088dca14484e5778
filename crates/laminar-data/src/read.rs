//! A partition's reads for Fetch: the batches from a fetch offset within the byte budgets,
//! below the high watermark for a consumer (with the aborted transactions a read_committed
//! one drops) or to the log end for a follower (with KIP-595's divergence check), on the
//! I/O pool; a read stuck on the disk is left behind and its partition skipped until it
//! returns; a consumer at the end of every partition it asks for is answered from memory.
//! And the leader's side of replication a follower's fetch carries: its progress, the high
//! watermark, an ISR expansion.
//!
//! Generic over the file type the response carries (`to_file`), so the network layer's
//! stays the broker's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use laminar_cluster::{Cluster, LeaderEpoch};
use laminar_net::IoPool;
use laminar_protocol::responses::{Chunk, FetchPartitionResponse, FetchTopicResponse, FileSlice};
use laminar_protocol::ErrorCode;
use laminar_storage::backend::read_exact_at;
use laminar_storage::{FileRange, Offset, StorageError};

use crate::partition::Partitions;
pub use crate::stuck_reads::StuckReads;

/// What reads for fetches: the partitions placed here, the I/O pool, and the partitions
/// whose reads are stuck.
pub struct Reader {
    pub partitions: Arc<Partitions>,
    pub io: IoPool,
    pub stuck_reads: Arc<StuckReads>,
}

/// A partition's answer before anything is read: no records, no offsets.
pub fn unread<F>(partition: i32, code: ErrorCode) -> FetchPartitionResponse<F> {
    FetchPartitionResponse {
        partition_index: partition,
        error_code: code.code(),
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
        aborted_transactions: Vec::new(),
        records: Vec::new(),
        diverging_epoch: None,
        current_leader: None,
    }
}

/// A partition whose read has taken this long is taken as stuck (behind a stalled write or
/// a slow disk): the fetch is answered without it, and later fetches skip it until that read
/// returns, so one stalled partition does not hold up the others a consumer reads.
pub const STUCK_READ_MS: u64 = 100;

/// What a fetch asks of one topic: its name and id as resolved here (`known`: a topic here).
pub struct Wanted {
    pub name: String,
    pub topic_id: [u8; 16],
    pub known: bool,
    pub partitions: Vec<WantedPartition>,
}

/// What a fetch asks of one partition.
#[derive(Clone, Copy)]
pub struct WantedPartition {
    pub partition: i32,
    pub fetch_offset: i64,
    pub max_bytes: i32,
    pub current_epoch: i32,
    /// A follower's: the epoch its log ends with (-1: not given).
    pub last_fetched_epoch: i32,
}

/// KIP-595's check of a follower's fetch: if this leader's log has no `last_fetched_epoch`,
/// or that epoch ends here before the fetch offset, the follower's log diverged from this
/// one: (the largest epoch at or below it, where it ends here), for it to truncate to.
fn diverging(log: &laminar_storage::Log, w: &WantedPartition) -> Option<(i32, i64)> {
    if w.last_fetched_epoch < 0 {
        return None;
    }
    let (epoch, end) = log.end_offset_for_epoch(w.last_fetched_epoch);
    // No epoch at or below it here (the log start moved past them): the fetch offset's
    // range check decides.
    if epoch < 0 {
        return None;
    }
    (epoch < w.last_fetched_epoch || end < w.fetch_offset).then_some((epoch, end))
}

/// Reads every requested partition once, except those whose read is stuck (answered with
/// no records and the offsets known in memory). Runs on the I/O pool; `reading` holds the
/// index (from 1, over all requested partitions) of the partition being read, 0 between reads.
fn read_once<F: FileSlice>(
    s: &Reader,
    to_file: fn(FileRange) -> F,
    wanted: &[Wanted],
    max_bytes: i32,
    read_committed: bool,
    reading: &AtomicUsize,
    follower: bool,
) -> (Vec<FetchTopicResponse<F>>, u64) {
    let mut index = 0;
    let mut budget = max_bytes.max(0) as u64;
    let mut total = 0u64;
    let mut out = Vec::new();
    for w in wanted {
        let mut topic = FetchTopicResponse {
            name: w.name.clone(),
            topic_id: w.topic_id,
            partitions: Vec::new(),
        };
        for wp in &w.partitions {
            let (partition, fetch_offset, partition_max_bytes, current_epoch) =
                (wp.partition, wp.fetch_offset, wp.max_bytes, wp.current_epoch);
            index += 1;
            let mut p = unread(partition, ErrorCode::None);
            let led = if w.known || !w.name.is_empty() {
                // A partition placed elsewhere has no log here: not the leader.
                s.partitions.led(&w.name, partition)
            } else {
                Err(ErrorCode::UnknownTopicId)
            };
            let led = match led {
                Ok(led) => led,
                Err(code) => {
                    p.error_code = code.code();
                    topic.partitions.push(p);
                    continue;
                }
            };
            // KIP-320: a reader that knows a newer or an older epoch than this leader's.
            if current_epoch >= 0 && LeaderEpoch(current_epoch) != led.epoch {
                p.error_code = if LeaderEpoch(current_epoch) < led.epoch {
                    ErrorCode::FencedLeaderEpoch.code()
                } else {
                    ErrorCode::UnknownLeaderEpoch.code()
                };
                topic.partitions.push(p);
                continue;
            }
            // Consumers read below the high watermark (what the in-sync replicas hold, and
            // with `log.read.after.fsync` what is synced here: asked for now if that is what
            // holds them back); followers read to the log end.
            let hw = if follower {
                led.high_watermark()
            } else {
                led.high_watermark_for_reader()
            };
            let log = led.log;
            if follower {
                if let Some(diverged) = diverging(&log, wp) {
                    p.diverging_epoch = Some(diverged);
                    p.high_watermark = hw.0;
                    p.last_stable_offset = log.last_stable_offset().min(hw).0;
                    p.log_start_offset = log.log_start().0;
                    topic.partitions.push(p);
                    continue;
                }
            }
            if s.stuck_reads.contains(&w.name, partition) {
                p.high_watermark = hw.0;
                p.last_stable_offset = log.last_stable_offset().min(hw).0;
                p.log_start_offset = log.log_start().0;
                topic.partitions.push(p);
                continue;
            }
            let limit = (partition_max_bytes.max(0) as u64).min(budget);
            // As Kafka does, the first batch is returned whole even over the budget when
            // nothing has been returned yet, so a consumer always makes progress.
            let min_one = total == 0;
            reading.store(index, Ordering::SeqCst);
            let read = if follower {
                log.read(Offset(fetch_offset), limit, min_one)
            } else {
                log.read_below(Offset(fetch_offset), limit, min_one, hw, read_committed)
            };
            let read = read.and_then(|read| {
                if let Some(range) = &read.range {
                    touch_last_page(range)?;
                }
                Ok(read)
            });
            reading.store(0, Ordering::SeqCst);
            // If this read was found stuck, later fetches may read the partition again.
            s.stuck_reads.clear(&w.name, partition);
            match read {
                Ok(read) => {
                    p.high_watermark = hw.min(read.log_end).0;
                    p.last_stable_offset = read.last_stable.min(hw).0;
                    p.log_start_offset = read.log_start.0;
                    if let Some(range) = read.range {
                        if read_committed {
                            // In memory: the index of each segment is held there.
                            p.aborted_transactions = log
                                .aborted_txns(Offset(fetch_offset), range.next_offset)
                                .into_iter()
                                .map(|a| (a.producer_id, a.first_offset.0))
                                .collect();
                        }
                        total += range.len;
                        budget = budget.saturating_sub(range.len);
                        p.records.push(Chunk::File(to_file(range)));
                    }
                }
                Err(StorageError::OffsetOutOfRange {
                    log_start, log_end, ..
                }) => {
                    p.error_code = ErrorCode::OffsetOutOfRange.code();
                    p.high_watermark = hw.min(log_end).0;
                    p.last_stable_offset = log.last_stable_offset().min(hw).0;
                    p.log_start_offset = log_start.0;
                }
                Err(e) => {
                    laminar_metrics::warn!("fetch from {}-{partition}: {e}", w.name);
                    p.error_code = ErrorCode::KafkaStorageError.code();
                }
            }
            topic.partitions.push(p);
        }
        out.push(topic);
    }
    (out, total)
}

/// The answer to a consumer's fetch whose every partition is led here at the epoch it
/// knows and asked for at its high watermark: no records, the offsets from memory (the
/// log's view and flush state, locks no disk call is made under). `None` when one is not
/// so: then it is read.
fn all_at_end<F>(s: &Reader, wanted: &[Wanted]) -> Option<Vec<FetchTopicResponse<F>>> {
    let mut out = Vec::with_capacity(wanted.len());
    for w in wanted {
        if !w.known {
            return None;
        }
        let mut topic = FetchTopicResponse {
            name: w.name.clone(),
            topic_id: w.topic_id,
            partitions: Vec::with_capacity(w.partitions.len()),
        };
        for wp in &w.partitions {
            let led = s.partitions.led(&w.name, wp.partition).ok()?;
            if wp.current_epoch >= 0 && LeaderEpoch(wp.current_epoch) != led.epoch {
                return None;
            }
            let hw = led.high_watermark_for_reader();
            if Offset(wp.fetch_offset) != hw {
                return None;
            }
            let mut p = unread(wp.partition, ErrorCode::None);
            p.high_watermark = hw.0;
            p.last_stable_offset = led.log.last_stable_offset().min(hw).0;
            p.log_start_offset = led.log.log_start().0;
            topic.partitions.push(p);
        }
        out.push(topic);
    }
    Some(out)
}

/// Reads the last byte of a range found for a fetch, here (on the I/O pool, watched for
/// stuck reads) rather than when the response is sent. Every page of the range but the last
/// was written whole; the last may be partly written, and the next append to the partition
/// writes into it. Some file systems (FUSE without a writeback cache) keep a page that was
/// never read whole locked for the whole of a write into it, so with a stalled disk the send
/// (and every partition framed before it in the response) would wait for that write. Once
/// read, the page is up to date and later writes into it do not hold it locked. A cached
/// page costs a one-byte copy.
fn touch_last_page(range: &FileRange) -> Result<(), StorageError> {
    debug_assert!(range.len > 0, "a range holds at least one batch");
    let mut last = [0u8; 1];
    let at = range.position.0 + range.len - 1;
    read_exact_at(range.file.as_ref(), &mut last, at).map_err(|e| StorageError::io("read", &range.path, e))
}

/// Reads the partitions of `wanted` on the I/O pool. If a partition's read takes past `STUCK_READ_MS`, it
/// is marked stuck and the partitions are read again without it; the stuck read finishes on
/// its own (holding one I/O thread, its permit lent back to the pool) and unmarks it.
pub async fn read<F: FileSlice>(
    s: &Arc<Reader>,
    to_file: fn(FileRange) -> F,
    wanted: &Arc<Vec<Wanted>>,
    max_bytes: i32,
    read_committed: bool,
    follower: bool,
) -> (Vec<FetchTopicResponse<F>>, u64) {
    // A consumer that has read every partition it asks for to its end (an idle consumer's
    // fetch, most of the time) is answered from memory: nothing would be read, so the trip
    // through the I/O pool is saved.
    if !follower {
        if let Some(answered) = all_at_end(s, wanted) {
            return (answered, 0);
        }
    }
    loop {
        let reading = Arc::new(AtomicUsize::new(0));
        let (s2, w2, r2) = (s.clone(), wanted.clone(), reading.clone());
        let (job, watched) =
            s.io.run_watched(move || read_once(&s2, to_file, &w2, max_bytes, read_committed, &r2, follower));
        tokio::pin!(job);
        let mut slow_since: Option<(usize, Instant)> = None;
        let stuck = loop {
            tokio::select! {
                out = &mut job => return out,
                _ = tokio::time::sleep(Duration::from_millis(STUCK_READ_MS / 4)) => {}
            }
            // The same partition being read past the threshold, not the job as a whole (which
            // may wait for an I/O permit, or read many partitions).
            let at = reading.load(Ordering::SeqCst);
            match slow_since {
                Some((i, since)) if i == at && at > 0 => {
                    if since.elapsed() >= Duration::from_millis(STUCK_READ_MS) {
                        break at;
                    }
                }
                _ => slow_since = (at > 0).then(|| (at, Instant::now())),
            }
        };
        let Some((topic, partition)) = wanted
            .iter()
            .flat_map(|w| w.partitions.iter().map(move |p| (&w.name, p.partition)))
            .nth(stuck - 1)
        else {
            unreachable!("the index counts the requested partitions")
        };
        // The stuck read keeps its I/O thread until it returns, but not its permit: the
        // pool lends another, so stuck partitions do not shrink it for everyone else.
        watched.lend();
        if s.stuck_reads.mark(topic, partition) {
            s.stuck_reads.found_total.fetch_add(1, Ordering::Relaxed);
            laminar_metrics::warn!(
                "fetch: reading {topic}-{partition} has taken over {STUCK_READ_MS} ms; \
                 answering fetches without it until that read returns"
            );
        }
        // The read may have returned (and cleared its mark) before the mark was made: then
        // nothing else would clear it.
        if reading.load(Ordering::SeqCst) != stuck {
            s.stuck_reads.clear(topic, partition);
        }
    }
}

/// A follower's fetch: its progress on each partition this broker leads, the high watermark
/// moved, and an ISR expansion asked for if it has caught up.
pub fn follower_fetched(s: &Reader, cluster: &Arc<Cluster>, follower: i32, wanted: &[Wanted]) {
    for w in wanted.iter().filter(|w| w.known) {
        for wp in &w.partitions {
            let (partition, fetch_offset, current_epoch) = (wp.partition, wp.fetch_offset, wp.current_epoch);
            let Some(hosted) = s.partitions.get(&w.name, partition) else {
                continue;
            };
            let (replica, Some(log)) = (&hosted.replica, hosted.log()) else {
                continue;
            };
            // Only a follower of this very leadership acknowledges anything (its fetch is
            // answered FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH otherwise).
            if replica.leader_epoch() != Some(LeaderEpoch(current_epoch)) {
                continue;
            }
            // Nor does one whose log diverged from this one: its fetch offset is not this
            // log's (it is told to truncate).
            if diverging(&log, wp).is_some() {
                continue;
            }
            if let Some(change) = replica.on_follower_fetch(
                laminar_cluster::BrokerId(follower),
                Offset(fetch_offset),
                log.log_end(),
            ) {
                tokio::spawn(cluster.clone().change_isr(change));
            }
            // Its consumers in long poll: the high watermark may have moved.
            hosted.arrived.notify_waiters();
        }
    }
}
