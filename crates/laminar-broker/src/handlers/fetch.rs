//! Fetch v4-16, with long poll (`max_wait_ms`, `min_bytes`), `max_bytes` and per-partition
//! `max_bytes`, and topic ids from v13.
//!
//! Finding the batches to send reads batch headers, which may not be in memory, so it runs
//! on the I/O pool. The response carries file ranges; the network layer sends them with
//! `sendfile` if they are resident and reads them on the I/O pool first if not.

use laminar_cluster::LeaderEpoch;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use laminar_protocol::requests::FetchRequest;
use laminar_protocol::responses::{encode_fetch, Chunk, FetchResponse, FetchTopicResponse, ResponseFrame};
use laminar_storage::backend::read_exact_at;
use laminar_storage::{FileRange, Offset, StorageError};

use super::refused::{unread_partition, Refused};
use crate::context::RequestContext;
use crate::quotas::QuotaKind;
use crate::quotas::Quotas;
use crate::response::RecordsFile;
use crate::stuck_reads::StuckReads;
use crate::topics::Topics;
use laminar_cluster::Cluster;
use laminar_data::partition::Partitions;
use laminar_net::IoPool;
use laminar_protocol::ErrorCode;
use tokio::sync::Notify;

/// The longest a fetch may wait for data, whatever it asks.
pub const FETCH_WAIT_MS_MAX: i32 = 60_000;
/// A partition whose read has taken this long is taken as stuck (behind a stalled write or
/// a slow disk): the fetch is answered without it, and later fetches skip it until that read
/// returns, so one stalled partition does not hold up the others a consumer reads.
pub const STUCK_READ_MS: u64 = 100;
/// A fetch's `isolation_level` asking for committed records only.
pub const READ_COMMITTED: i8 = 1;

struct Wanted {
    name: String,
    topic_id: [u8; 16],
    known: bool,
    partitions: Vec<WantedPartition>,
}

#[derive(Clone, Copy)]
struct WantedPartition {
    partition: i32,
    fetch_offset: i64,
    max_bytes: i32,
    current_epoch: i32,
    /// A follower's: the epoch its log ends with (-1: not given).
    last_fetched_epoch: i32,
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

/// What a fetch works with: the topics as applied here, the partitions placed here, the
/// I/O pool that reads them, the fetches waiting for data (long poll), the client quotas, the
/// partitions whose reads are stuck, and the cluster (the leaders a refused fetch points at;
/// the ISR changes a follower's fetch asks for).
pub struct FetchService {
    pub topics: Arc<Topics>,
    pub partitions: Arc<Partitions>,
    pub io: IoPool,
    pub quotas: Arc<Quotas>,
    pub stuck_reads: Arc<StuckReads>,
    pub cluster: Arc<Cluster>,
}

/// Fetches in long poll woken to read again before their wait ended
/// (`laminar_fetch_long_poll_wakeups_total`).
pub static LONG_POLL_WAKEUPS: AtomicU64 = AtomicU64::new(0);

/// A copy of `t`, answered without records (a refused topic's answer).
fn unread(t: &FetchTopicResponse<RecordsFile>) -> FetchTopicResponse<RecordsFile> {
    FetchTopicResponse {
        name: t.name.clone(),
        topic_id: t.topic_id,
        partitions: t
            .partitions
            .iter()
            .map(|p| unread_partition(p.partition_index, ErrorCode::from_wire(p.error_code)))
            .collect(),
    }
}

/// Reads every requested partition once, except those whose read is stuck (answered with
/// no records and the offsets known in memory). Runs on the I/O pool; `reading` holds the
/// index (from 1, over all requested partitions) of the partition being read, 0 between reads.
fn read_once(
    s: &FetchService,
    wanted: &[Wanted],
    max_bytes: i32,
    read_committed: bool,
    reading: &AtomicUsize,
    follower: bool,
) -> (Vec<FetchTopicResponse<RecordsFile>>, u64) {
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
            let mut p = unread_partition(partition, ErrorCode::None);
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
            // Consumers read below the high watermark (what the in-sync replicas hold);
            // followers read to the log end.
            let hw = led.high_watermark();
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
                        p.records.push(Chunk::File(RecordsFile {
                            file: range.file,
                            position: range.position.0,
                            len: range.len,
                        }));
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
                    crate::warn!("fetch from {}-{partition}: {e}", w.name);
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
fn all_at_end(s: &FetchService, wanted: &[Wanted]) -> Option<Vec<FetchTopicResponse<RecordsFile>>> {
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
            let hw = led.high_watermark();
            if Offset(wp.fetch_offset) != hw {
                return None;
            }
            let mut p = unread_partition(wp.partition, ErrorCode::None);
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

/// Runs `read_once` on the I/O pool. If a partition's read takes past `STUCK_READ_MS`, it
/// is marked stuck and the partitions are read again without it; the stuck read finishes on
/// its own (holding one I/O thread, its permit lent back to the pool) and unmarks it.
async fn read_unstuck(
    s: &Arc<FetchService>,
    wanted: &Arc<Vec<Wanted>>,
    max_bytes: i32,
    read_committed: bool,
    follower: bool,
) -> (Vec<FetchTopicResponse<RecordsFile>>, u64) {
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
            s.io.run_watched(move || read_once(&s2, &w2, max_bytes, read_committed, &r2, follower));
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
            crate::warn!(
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

pub async fn handle(
    s: &Arc<FetchService>,
    ctx: &RequestContext,
    r: FetchRequest,
    refused: Refused,
) -> ResponseFrame<RecordsFile> {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let client_id = ctx.client_id.as_str();
    let follower = r.replica_id >= 0;
    // A follower's fetch needed CLUSTER_ACTION, a consumer's READ on each topic: the
    // authorization step refused the request, or took out the topics it may not read.
    let wanted: Vec<Wanted> = r
        .topics
        .iter()
        .map(|t| {
            let meta = match (&t.name, t.topic_id) {
                (Some(name), _) => s.topics.get(name),
                (None, Some(id)) => s.topics.by_id(&id),
                _ => None,
            };
            Wanted {
                name: meta
                    .as_ref()
                    .map(|m| m.name.clone())
                    .or(t.name.clone())
                    .unwrap_or_default(),
                topic_id: meta.as_ref().map(|m| m.uuid()).or(t.topic_id).unwrap_or_default(),
                known: meta.is_some(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| WantedPartition {
                        partition: p.partition,
                        fetch_offset: p.fetch_offset,
                        max_bytes: p.partition_max_bytes,
                        current_epoch: p.current_leader_epoch,
                        last_fetched_epoch: p.last_fetched_epoch,
                    })
                    .collect(),
            }
        })
        .collect();
    let wanted = Arc::new(wanted);
    // Answered in every response this fetch makes (it may make several while it waits).
    let mut refused_topics = Vec::new();
    refused.answer(&mut refused_topics);
    // A follower's fetch offset acknowledges everything before it (on its disk): taken
    // before any read or wait, so that `acks=all` producers waiting on it go on now. Only a
    // registered broker's is: a client naming a follower would otherwise move the high
    // watermark past what that follower holds, and read past it.
    if follower {
        if let Err(why) = registered_follower(s, version, r.replica_id, r.replica_epoch) {
            crate::warn!(
                "fetch from {client_id} as broker {}: refused, {why}",
                r.replica_id
            );
            return refuse_follower(s, ctx, &wanted);
        }
        follower_fetched(s, r.replica_id, &wanted);
    }
    let wait = Duration::from_millis(r.max_wait_ms.clamp(0, FETCH_WAIT_MS_MAX) as u64);
    let deadline = Instant::now() + wait;
    loop {
        // The partitions it asked for, looked up again each time (one replaced wakes its
        // waiters): an append, a flush or a high watermark's move on one of them wakes this
        // fetch, and nothing else does. Registered before reading, so that one between the
        // read and the wait still wakes it.
        let signals: Vec<Arc<Notify>> = wanted
            .iter()
            .filter(|w| w.known)
            .flat_map(|w| w.partitions.iter().map(move |wp| (&w.name, wp.partition)))
            .filter_map(|(topic, partition)| s.partitions.get(topic, partition))
            .map(|p| p.arrived.clone())
            .collect();
        let mut arrivals: Vec<_> = signals.iter().map(|n| Box::pin(n.notified())).collect();
        for n in &mut arrivals {
            n.as_mut().enable();
        }
        // A client with a consumer quota gets at most what its quota allows over the window
        // in one response, so that a response can always pass.
        // Followers have no client quota, as in Kafka (replication is not a client's load).
        let user = &ctx.principal.name;
        let max_bytes = match s.quotas.fetch_bytes_cap(user, client_id).filter(|_| !follower) {
            Some(cap) => r.max_bytes.min(cap.min(i32::MAX as u64) as i32),
            None => r.max_bytes,
        };
        let (mut topics, total) = read_unstuck(
            s,
            &wanted,
            max_bytes,
            r.isolation_level == READ_COMMITTED,
            follower,
        )
        .await;
        topics.extend(refused_topics.iter().map(unread));
        let any_error = topics
            .iter()
            .flat_map(|t| &t.partitions)
            // A follower told its log diverged is answered at once, as an error would be.
            .any(|p| p.error_code != ErrorCode::None.code() || p.diverging_epoch.is_some());
        let now = Instant::now();
        if total >= r.min_bytes.max(0) as u64 || any_error || now >= deadline {
            let throttle = if follower {
                Duration::ZERO
            } else {
                s.quotas.record(user, client_id, QuotaKind::Fetch, total)
            };
            let mut resp = response(s, ctx, topics, throttle.as_millis() as i32);
            if !throttle.is_zero() {
                // As Kafka does: over its quota, the client gets an empty response at once
                // with the throttle time, and its connection is muted for that long. The
                // bytes it was not sent do not count against it.
                s.quotas.unrecord(user, client_id, QuotaKind::Fetch, total);
                for p in resp.topics.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
                    p.records.clear();
                }
                laminar_net::throttle(throttle);
            }
            return encode_fetch(version, correlation_id, resp);
        }
        if arrivals.is_empty() {
            laminar_net::waiting(tokio::time::sleep(deadline - now)).await;
        } else {
            let any = futures_util::future::select_all(arrivals);
            if laminar_net::waiting(tokio::time::timeout(deadline - now, any))
                .await
                .is_ok()
            {
                LONG_POLL_WAKEUPS.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Whether a fetch naming broker `replica_id` comes from that broker as it last registered:
/// it must say so with its broker epoch (Fetch v15+, KIP-903), which this broker's image must
/// hold for it. A restarted follower whose new registration this image has not reached yet is
/// refused until it has (its fetcher retries).
fn registered_follower(
    s: &FetchService,
    version: i16,
    replica_id: i32,
    replica_epoch: i64,
) -> Result<(), String> {
    if version < 15 {
        return Err(format!(
            "Fetch v{version} carries no broker epoch (followers send v15+)"
        ));
    }
    let image = s.cluster.image();
    match image.brokers.get(&laminar_cluster::BrokerId(replica_id)) {
        None => Err("no such broker is registered".into()),
        Some(b) if i64::try_from(b.epoch) != Ok(replica_epoch) => {
            Err(format!("broker epoch {replica_epoch}, registered at {}", b.epoch))
        }
        Some(_) => Ok(()),
    }
}

/// A follower's fetch that `registered_follower` refused: every partition NOT_LEADER_OR_FOLLOWER
/// (as Kafka answers a replica it does not recognise), nothing read, no progress counted.
fn refuse_follower(s: &FetchService, ctx: &RequestContext, wanted: &[Wanted]) -> ResponseFrame<RecordsFile> {
    let topics = wanted
        .iter()
        .map(|w| FetchTopicResponse {
            name: w.name.clone(),
            topic_id: w.topic_id,
            partitions: w
                .partitions
                .iter()
                .map(|wp| unread_partition(wp.partition, ErrorCode::NotLeaderOrFollower))
                .collect(),
        })
        .collect();
    encode_fetch(ctx.api_version, ctx.correlation_id, response(s, ctx, topics, 0))
}

/// The response around `topics`, pointing at the leaders where a partition was refused.
fn response(
    s: &FetchService,
    ctx: &RequestContext,
    topics: Vec<FetchTopicResponse<RecordsFile>>,
    throttle_time_ms: i32,
) -> FetchResponse<RecordsFile> {
    let version = ctx.api_version;
    let mut resp = FetchResponse {
        throttle_time_ms,
        error_code: ErrorCode::None.code(),
        session_id: 0,
        topics,
        node_endpoints: Vec::new(),
    };
    if version >= 12 {
        point_at_leaders(s, ctx, &mut resp);
    }
    resp
}

/// KIP-951: a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carries its
/// leader and epoch as the cluster metadata has them, and (v16+) the response the leaders'
/// endpoints, so that the client goes there without asking Metadata first.
fn point_at_leaders<F>(s: &FetchService, ctx: &RequestContext, resp: &mut FetchResponse<F>) {
    let version = ctx.api_version;
    let image = s.cluster.image();
    let mut leaders = Vec::new();
    for t in &mut resp.topics {
        for p in &mut t.partitions {
            if p.error_code != ErrorCode::NotLeaderOrFollower.code()
                && p.error_code != ErrorCode::FencedLeaderEpoch.code()
            {
                continue;
            }
            if let Some(info) = image.partition(&t.name, p.partition_index) {
                if info.leader >= laminar_cluster::BrokerId(0) {
                    p.current_leader = Some((info.leader.0, info.leader_epoch.0));
                    leaders.push(info.leader);
                }
            }
        }
    }
    if version < 16 {
        return;
    }
    leaders.sort_unstable();
    leaders.dedup();
    resp.node_endpoints = leaders
        .into_iter()
        .filter_map(|id| image.brokers.get(&id))
        .filter_map(|x| Some((x.id.0, x.endpoint(&ctx.listener.name)?)))
        .map(|(id, (host, port))| (id, host.to_string(), port as i32))
        .collect();
}

/// A follower's fetch: its progress on each partition this broker leads, the high watermark
/// moved, and an ISR expansion asked for if it has caught up.
fn follower_fetched(s: &Arc<FetchService>, follower: i32, wanted: &[Wanted]) {
    let cluster = &s.cluster;
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
