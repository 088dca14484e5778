//! Fetch v4-16, with long poll (`max_wait_ms`, `min_bytes`), `max_bytes` and per-partition
//! `max_bytes`, and topic ids from v13.
//!
//! Finding the batches to send reads batch headers, which may not be in memory, so it runs
//! on the I/O pool (`laminar_data::read`). The response carries file ranges; the network layer sends them with
//! `sendfile` if they are resident and reads them on the I/O pool first if not.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use laminar_protocol::requests::FetchRequest;
use laminar_protocol::responses::{encode_fetch, FetchResponse, FetchTopicResponse, ResponseFrame};

use super::refused::Refused;
use crate::context::RequestContext;
use crate::quotas::QuotaKind;
use crate::quotas::Quotas;
use crate::response::RecordsFile;
use crate::topics::Topics;
use laminar_cluster::Cluster;
use laminar_data::partition::Partitions;
use laminar_data::read::{follower_fetched, unread, Reader, Wanted, WantedPartition};
use laminar_protocol::ErrorCode;
use tokio::sync::Notify;

/// The longest a fetch may wait for data, whatever it asks.
pub const FETCH_WAIT_MS_MAX: i32 = 60_000;
/// A fetch's `isolation_level` asking for committed records only.
pub const READ_COMMITTED: i8 = 1;

/// What a fetch works with: the topics as applied here, the partitions placed here, the
/// I/O pool that reads them, the fetches waiting for data (long poll), the client quotas, the
/// partitions whose reads are stuck, and the cluster (the leaders a refused fetch points at;
/// the ISR changes a follower's fetch asks for).
pub struct FetchService {
    pub topics: Arc<Topics>,
    pub partitions: Arc<Partitions>,
    /// The partitions' reads (`laminar-data`): the I/O pool, the stuck reads.
    pub reader: Arc<Reader>,
    pub quotas: Arc<Quotas>,
    pub cluster: Arc<Cluster>,
}

/// Fetches in long poll woken to read again before their wait ended
/// (`laminar_fetch_long_poll_wakeups_total`).
pub static LONG_POLL_WAKEUPS: AtomicU64 = AtomicU64::new(0);

/// A copy of `t`, answered without records (a refused topic's answer).
fn unread_topic(t: &FetchTopicResponse<RecordsFile>) -> FetchTopicResponse<RecordsFile> {
    FetchTopicResponse {
        name: t.name.clone(),
        topic_id: t.topic_id,
        partitions: t
            .partitions
            .iter()
            .map(|p| unread(p.partition_index, ErrorCode::from_wire(p.error_code)))
            .collect(),
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
        follower_fetched(&s.reader, &s.cluster, r.replica_id, &wanted);
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
        let (mut topics, total) = laminar_data::read::read(
            &s.reader,
            RecordsFile::of,
            &wanted,
            max_bytes,
            r.isolation_level == READ_COMMITTED,
            follower,
        )
        .await;
        topics.extend(refused_topics.iter().map(unread_topic));
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
                .map(|wp| unread(wp.partition, ErrorCode::NotLeaderOrFollower))
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
