//! A follower's replication of one partition: it fetches from the leader with the Kafka
//! Fetch API (its `replica_id` set, as Kafka's followers do), appends what it gets with the
//! leader's offsets and epochs, waits for its own fsync, and only then fetches again: the
//! offset it fetches from tells the leader that everything before it is on this disk.
//!
//! Before its first fetch under a leader epoch it asks the leader where its own latest epoch
//! ends (OffsetForLeaderEpoch, KIP-101) and truncates its log there, never by the high
//! watermark alone.
//!
//! The follower's side of replication, as [`crate::read`] holds the leader's. It runs as a
//! task on the socket threads and does only network I/O there: appends go to
//! the partition's storage thread, truncation to the I/O pool, fsyncs to the flushers.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId as KBrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use laminar_storage::{AppendMode, LogId, Offset};

use crate::partition::Partition;
use crate::storage_pool::StoragePool;
use laminar_cluster::client::BrokerConnection;
use laminar_cluster::replica::Role;
use laminar_cluster::Cluster;
use laminar_cluster::{BrokerId, LeaderEpoch};
use laminar_protocol::ErrorCode;
use laminar_storage::Store;

/// What a follower's fetchers work with: this broker's id, its logs, the partitions'
/// storage threads, the cluster (the leaders' addresses, this broker's registration), and
/// each topic's id (Fetch names topics by id).
pub struct Follower {
    pub node_id: i32,
    pub store: Arc<Store>,
    pub storage: Arc<StoragePool>,
    pub cluster: Arc<Cluster>,
    pub topic_id: TopicIds,
}

/// A topic's id by its name, as this broker has it (`None`: not known here).
pub type TopicIds = Box<dyn Fn(&str) -> Option<[u8; 16]> + Send + Sync>;

/// v15: the follower names itself with its broker epoch (KIP-903), as the leader requires.
const FETCH_VERSION: i16 = 15;
const OFFSET_FOR_LEADER_EPOCH_VERSION: i16 = 4;
const LIST_OFFSETS_VERSION: i16 = 4;
/// How long a fetch waits at the leader for new records.
const FETCH_MAX_WAIT_MS: i32 = 500;
const FETCH_MAX_BYTES: i32 = 16 << 20;
const PARTITION_MAX_BYTES: i32 = 8 << 20;
/// After an error, the wait before trying again.
const BACKOFF: Duration = Duration::from_millis(100);

/// Whole batches at the start of `records` (a leader may cut the last one at its byte bound).
fn whole_batches(records: &Bytes) -> Bytes {
    let mut pos = 0usize;
    while pos + 12 <= records.len() {
        let len = i32::from_be_bytes(records[pos + 8..pos + 12].try_into().unwrap());
        let total = 12 + len.max(0) as usize;
        if len < 0 || pos + total > records.len() {
            break;
        }
        pos += total;
    }
    records.slice(..pos)
}

/// Follows `hosted` while this broker follows `leader` at `epoch`; returns when that ends.
/// `generation`: the partition's role generation this fetcher was started for.
pub async fn follow(
    b: Arc<Follower>,
    hosted: Arc<Partition>,
    leader: BrokerId,
    epoch: LeaderEpoch,
    generation: u64,
) {
    let node = b.node_id;
    let me = Following {
        leader,
        epoch,
        generation,
    };
    let (topic, partition) = (hosted.topic.clone(), hosted.partition);
    let mut connection: Option<BrokerConnection> = None;
    let mut truncated = false;
    let mut failing = false;
    loop {
        if !me.current(&hosted.replica) {
            return;
        }
        // An offline log (a failed fsync) takes nothing until this broker restarts: fetching
        // for it would fail, and be retried, forever.
        if let Some(why) = replica_log(&hosted).ok().and_then(|log| log.offline_reason()) {
            laminar_metrics::warn!("replica of {topic}-{partition}: not fetching, the log is offline: {why}");
            return;
        }
        let step = async {
            if connection.is_none() {
                let cluster = &b.cluster;
                let image = cluster.image();
                let endpoint = image
                    .brokers
                    .get(&leader)
                    .map(|x| format!("{}:{}", x.host, x.port))
                    .ok_or_else(|| io::Error::other(format!("broker {leader} is not registered")))?;
                let security = cluster.clients.security();
                connection = Some(
                    BrokerConnection::connect(&endpoint, &format!("laminar-replica-{node}"), &security)
                        .await?,
                );
            }
            let conn = connection.as_mut().expect("connected");
            if !truncated {
                truncate_to_leader(&b, &hosted, conn, me).await?;
                truncated = true;
            }
            fetch_once(&b, &hosted, conn, me).await
        };
        match step.await {
            Ok(Fetched::Records) => failing = false,
            Ok(Fetched::Nothing) => failing = false,
            Ok(Fetched::Retry(code)) => {
                if code == ErrorCode::OffsetOutOfRange.code() {
                    // Past the leader's end (truncate by epoch again), or below its start:
                    // retention removed what this replica would fetch next.
                    truncated = false;
                    if let Some(conn) = connection.as_mut() {
                        if let Err(e) = start_at_leaders_start(&b, &hosted, conn, me).await {
                            laminar_metrics::warn!("replica of {topic}-{partition}: {e}");
                            connection = None;
                        }
                    }
                }
                tokio::time::sleep(BACKOFF).await;
            }
            Err(e) => {
                if !failing {
                    laminar_metrics::warn!(
                        "replica of {topic}-{partition}: fetching from broker {leader}: {e}"
                    );
                    failing = true;
                }
                connection = None;
                tokio::time::sleep(BACKOFF).await;
            }
        }
    }
}

enum Fetched {
    Records,
    Nothing,
    /// The leader answered with this error: try again after a pause.
    Retry(i16),
}

/// Asks the leader where this log's latest epoch ends and cuts the log there if it runs
/// past it: what an older leader wrote here and no newer one kept. In rounds (KIP-279): when
/// this log does not have the epoch the leader answers with, what lies below the cut may
/// still differ, and the next round asks about the epoch the log now ends with.
async fn truncate_to_leader(
    b: &Arc<Follower>,
    hosted: &Arc<Partition>,
    conn: &mut BrokerConnection,
    me: Following,
) -> io::Result<()> {
    let (topic, partition) = (hosted.topic.as_str(), hosted.partition);
    // A batch found damaged here (while this broker led) is fetched again from the leader,
    // with all that follows it.
    let log = replica_log(hosted)?;
    // (Below the log start it is never read: nothing to fetch again.)
    if let Some(at) = log.damaged_from().filter(|at| *at >= log.log_start()) {
        laminar_metrics::warn!("replica of {topic}-{partition}: a damaged batch at offset {at}; truncating there to fetch it again");
        cut_log(b, hosted, me, at).await?;
    }
    // Each round but the last cuts the log shorter: it ends.
    loop {
        let log = replica_log(hosted)?;
        // An empty log has nothing to cut (its epoch cache holds only the epoch it started
        // with, not one of a batch it has).
        let Some(mine) = log.latest_epoch().filter(|_| log.log_end() > log.log_start()) else {
            return Ok(());
        };
        let mut p = OffsetForLeaderPartition::default();
        p.partition = partition;
        p.current_leader_epoch = me.epoch.0;
        p.leader_epoch = mine;
        let mut t = OffsetForLeaderTopic::default();
        t.topic = TopicName(StrBytes::from_string(topic.to_string()));
        t.partitions = vec![p];
        let mut req = OffsetForLeaderEpochRequest::default();
        req.replica_id = KBrokerId(b.node_id);
        req.topics = vec![t];
        let resp: OffsetForLeaderEpochResponse = conn
            .call(
                ApiKey::OffsetForLeaderEpoch,
                OFFSET_FOR_LEADER_EPOCH_VERSION,
                &req,
            )
            .await?;
        let answer = the_answer(
            resp.topics.first().and_then(|t| t.partitions.first()),
            |a| a.error_code,
            "OffsetForLeaderEpoch",
        )?;
        if answer.leader_epoch < 0 {
            // The leader knows no epoch at or below ours: a fetch past its end tells.
            return Ok(());
        }
        if !cut_to_leader(b, hosted, me, answer.leader_epoch, answer.end_offset).await? {
            return Ok(());
        }
    }
}

/// Cuts this log where it stops agreeing with the leader's, whose epoch `leader_epoch` (the
/// largest it has at or below one this log has) ends at `leader_end`: at the smaller of that
/// and where the same epoch (or the largest of ours below it) ends here, as Kafka's follower
/// does. Returns whether the logs may still differ below the cut (this log does not have
/// `leader_epoch`): then the leader must be asked again.
async fn cut_to_leader(
    b: &Arc<Follower>,
    hosted: &Arc<Partition>,
    me: Following,
    leader_epoch: i32,
    leader_end: i64,
) -> io::Result<bool> {
    let (topic, partition) = (hosted.topic.as_str(), hosted.partition);
    let log = replica_log(hosted)?;
    let (my_epoch, my_end) = log.end_offset_for_epoch(leader_epoch);
    let to = if my_end >= 0 {
        leader_end.min(my_end)
    } else {
        leader_end
    };
    let log_end = log.log_end().0;
    if to >= log_end {
        // No record to cut. But an epoch this broker began as leader at its log end and
        // never appended in is no epoch the leader has: every fetch naming it would be told
        // it diverged, forever. It goes, as in Kafka's `truncateTo`.
        if log.epochs().last().is_some_and(|(_, start)| start.0 >= log_end) {
            change_current_log(b, hosted, me, |_, log| log.forget_empty_epochs()).await?;
        }
        return Ok(false);
    }
    laminar_metrics::warn!(
        "replica of {topic}-{partition}: the leader's epoch {leader_epoch} ends at {leader_end}; truncating from {log_end} to {to}"
    );
    match cut_log(b, hosted, me, Offset(to)).await? {
        Some(cut) => {
            laminar_metrics::info!("replica of {topic}-{partition}: truncated to {}", cut.0);
            Ok(my_epoch != leader_epoch)
        }
        None => Ok(false), // no longer following: the loop ends
    }
}

/// Cuts this replica's log at `to` (below its start: empties it to start there, as Kafka's
/// `truncateTo` does) and rebuilds its producers' state from what is left. Returns where the
/// log ends now, or `None` if this broker no longer follows as `me`.
async fn cut_log(
    b: &Arc<Follower>,
    hosted: &Arc<Partition>,
    me: Following,
    to: Offset,
) -> io::Result<Option<Offset>> {
    let store = b.store.clone();
    let id = LogId::new(&hosted.topic, hosted.partition as u32);
    let h2 = hosted.clone();
    let below_start = to < replica_log(hosted)?.log_start();
    change_log(b, hosted, me, move || {
        let log = if below_start {
            store.reset_log(&id, to)?
        } else {
            store.truncate_log(&id, to)?
        };
        if let Err(e) = h2.rebuild_producers(&log) {
            laminar_metrics::warn!("rebuilding producer state of {}-{}: {e}", h2.topic, h2.partition);
        }
        Ok(log.log_end())
    })
    .await
}

/// If the leader's log now starts past this log's end (retention or DeleteRecords removed
/// what this replica would fetch next), empties this log to start at the leader's start, as
/// Kafka's followers do (`truncateFullyAndStartAt`).
async fn start_at_leaders_start(
    b: &Arc<Follower>,
    hosted: &Arc<Partition>,
    conn: &mut BrokerConnection,
    me: Following,
) -> io::Result<()> {
    let (topic, partition) = (hosted.topic.as_str(), hosted.partition);
    let mut p = ListOffsetsPartition::default();
    p.partition_index = partition;
    p.current_leader_epoch = me.epoch.0;
    p.timestamp = -2; // the earliest offset: the log start
    let mut t = ListOffsetsTopic::default();
    t.name = TopicName(StrBytes::from_string(topic.to_string()));
    t.partitions = vec![p];
    let mut req = ListOffsetsRequest::default();
    req.replica_id = KBrokerId(b.node_id);
    req.topics = vec![t];
    let resp: ListOffsetsResponse = conn.call(ApiKey::ListOffsets, LIST_OFFSETS_VERSION, &req).await?;
    let answer = the_answer(
        resp.topics.first().and_then(|t| t.partitions.first()),
        |a| a.error_code,
        "ListOffsets",
    )?;
    let leader_start = answer.offset;
    let log = replica_log(hosted)?;
    if log.log_end().0 >= leader_start {
        return Ok(());
    }
    laminar_metrics::warn!(
        "replica of {topic}-{partition}: the leader's log starts at {leader_start}, past this log's end {}; emptying it to start there",
        log.log_end().0
    );
    let store = b.store.clone();
    let id = LogId::new(topic, partition as u32);
    let h2 = hosted.clone();
    change_log(b, hosted, me, move || {
        store.reset_log(&id, Offset(leader_start))?;
        h2.producers.forget();
        Ok(())
    })
    .await?;
    Ok(())
}

/// `change_log` for a job on the partition's log as the store holds it on the storage
/// thread (a truncation may have replaced the one the fetcher looked at before).
async fn change_current_log<T: Send + 'static>(
    b: &Arc<Follower>,
    hosted: &Arc<Partition>,
    me: Following,
    job: impl FnOnce(&Arc<Follower>, Arc<laminar_storage::Log>) -> Result<T, laminar_storage::StorageError>
        + Send
        + 'static,
) -> io::Result<Option<T>> {
    let (b2, h2) = (b.clone(), hosted.clone());
    change_log(b, hosted, me, move || {
        let log = h2.log().ok_or_else(|| {
            laminar_storage::StorageError::UnknownLog(format!("{}-{}", h2.topic, h2.partition))
        })?;
        job(&b2, log)
    })
    .await
}

/// The log this replica appends to, as the store holds it now.
fn replica_log(hosted: &Partition) -> io::Result<Arc<laminar_storage::Log>> {
    hosted.log().ok_or_else(|| io::Error::other("no log here"))
}

/// The one partition's answer to a one-partition request, unless it is missing or an error.
fn the_answer<'a, P>(answer: Option<&'a P>, error_code: fn(&P) -> i16, api: &str) -> io::Result<&'a P> {
    let answer = answer.ok_or_else(|| io::Error::other(format!("an empty {api} answer")))?;
    match ErrorCode::from_wire(error_code(answer)) {
        ErrorCode::None => Ok(answer),
        code => Err(io::Error::other(format!("{api} answered error {code}"))),
    }
}

/// Runs `job` (an append or a truncation) on the partition's storage thread, where its
/// appends run in order, if this fetcher still follows there (`None` if not).
async fn change_log<T: Send + 'static>(
    b: &Arc<Follower>,
    hosted: &Arc<Partition>,
    me: Following,
    job: impl FnOnce() -> Result<T, laminar_storage::StorageError> + Send + 'static,
) -> io::Result<Option<T>> {
    let h2 = hosted.clone();
    b.storage
        .run(hosted.storage_key(), move || {
            if !me.current(&h2.replica) {
                return Ok(None);
            }
            job().map(Some)
        })
        .await
        .map_err(|e| io::Error::other(e.to_string()))?
        .map_err(|e| io::Error::other(e.to_string()))
}

/// What a fetcher follows: a leader, at an epoch, in one generation of the partition's role.
#[derive(Debug, Clone, Copy)]
struct Following {
    leader: BrokerId,
    epoch: LeaderEpoch,
    generation: u64,
}

impl Following {
    /// Still this fetcher's to follow? Checked again on the storage thread right before it
    /// changes the log: a fetcher of an older role whose answer came late must not append
    /// after (or truncate under) the fetcher of the new one.
    fn current(&self, replica: &laminar_cluster::replica::Replica) -> bool {
        replica.generation() == self.generation
            && matches!(replica.role(), Role::Follower { leader, epoch } if leader == self.leader && epoch == self.epoch)
    }
}

async fn fetch_once(
    b: &Arc<Follower>,
    hosted: &Arc<Partition>,
    conn: &mut BrokerConnection,
    me: Following,
) -> io::Result<Fetched> {
    let epoch = me.epoch;
    let (topic, partition) = (hosted.topic.as_str(), hosted.partition);
    let log = replica_log(hosted)?;
    let fetch_offset = log.log_end();
    // The fetch offset acknowledges everything below it: it must all be on disk (a previous
    // fetcher's last append may not be yet).
    if log.flushed_end() < fetch_offset {
        laminar_net::waiting(log.wait_flushed(laminar_storage::Offset(fetch_offset.0 - 1)))
            .await
            .map_err(|e| io::Error::other(e.to_string()))?;
    }
    let mut p = FetchPartition::default();
    p.partition = partition;
    p.current_leader_epoch = epoch.0;
    p.fetch_offset = fetch_offset.0;
    // An empty log has fetched nothing: no epoch for the leader to check (its cache holds
    // only the epoch it started with).
    p.last_fetched_epoch = if fetch_offset > log.log_start() {
        log.latest_epoch().unwrap_or(-1)
    } else {
        -1
    };
    p.log_start_offset = log.log_start().0;
    p.partition_max_bytes = PARTITION_MAX_BYTES;
    // From v13 the leader knows the topic by its id only.
    let Some(id) = (b.topic_id)(topic) else {
        return Ok(Fetched::Retry(ErrorCode::UnknownTopicOrPartition.code()));
    };
    let mut t = FetchTopic::default();
    t.topic_id = uuid::Uuid::from_bytes(id);
    t.partitions = vec![p];
    // This broker's epoch as its own image has it: the leader checks it against its image.
    let Some(registered) = b
        .cluster
        .image()
        .brokers
        .get(&BrokerId(b.node_id))
        .map(|x| x.epoch)
    else {
        return Ok(Fetched::Retry(ErrorCode::NotLeaderOrFollower.code()));
    };
    let mut req = FetchRequest::default();
    req.replica_id = KBrokerId(-1);
    req.replica_state.replica_id = KBrokerId(b.node_id);
    req.replica_state.replica_epoch = registered as i64;
    req.max_wait_ms = FETCH_MAX_WAIT_MS;
    req.min_bytes = 1;
    req.max_bytes = FETCH_MAX_BYTES;
    req.isolation_level = 0;
    req.session_id = 0;
    req.session_epoch = -1;
    req.topics = vec![t];
    let resp: FetchResponse = conn.call(ApiKey::Fetch, FETCH_VERSION, &req).await?;
    let data = resp
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or_else(|| io::Error::other("an empty Fetch answer"))?;
    if resp.error_code != ErrorCode::None.code() {
        return Ok(Fetched::Retry(resp.error_code));
    }
    if data.error_code != ErrorCode::None.code() {
        return Ok(Fetched::Retry(data.error_code));
    }
    if data.diverging_epoch.epoch >= 0 {
        // The leader found this log diverged from its own (its last epoch ends earlier
        // there): cut it, and fetch again from the cut, with the epoch it then ends with.
        cut_to_leader(
            b,
            hosted,
            me,
            data.diverging_epoch.epoch,
            data.diverging_epoch.end_offset,
        )
        .await?;
        return Ok(Fetched::Nothing);
    }
    if data.log_start_offset > log.log_start().0 && data.log_start_offset <= fetch_offset.0 {
        // DeleteRecords (or retention) moved the leader's start: this replica follows.
        let to = Offset(data.log_start_offset);
        change_current_log(b, hosted, me, move |_, log| log.delete_records(to).map(|_| ())).await?;
    }
    let records = data.records.as_ref().map(whole_batches).unwrap_or_default();
    if records.is_empty() {
        hosted
            .replica
            .set_follower_high_watermark(Offset(data.high_watermark).min(fetch_offset));
        return Ok(Fetched::Nothing);
    }
    let h2 = hosted.clone();
    let appended = change_current_log(b, hosted, me, move |_, log| {
        let mut buf = records.to_vec();
        let info = log.append_as(&mut buf, AppendMode::Replica)?;
        if let Err(e) = h2.producers.observe(&buf) {
            laminar_metrics::warn!("producer state of {}-{}: {e}", h2.topic, h2.partition);
        }
        Ok((log, info))
    })
    .await;
    let Some((log, info)) = appended? else {
        return Ok(Fetched::Nothing); // the leadership changed: the loop ends
    };
    // The next fetch acknowledges all this: it must be on disk first.
    laminar_net::waiting(log.wait_flushed(info.last_offset))
        .await
        .map_err(|e| io::Error::other(e.to_string()))?;
    hosted
        .replica
        .set_follower_high_watermark(Offset(data.high_watermark).min(info.log_end));
    Ok(Fetched::Records)
}
