//! Produce v3-11, with acks 0, 1 and all.
//!
//! The append runs on the partition's storage thread, never here. `acks=1` answers once the
//! batches are in the page cache; `acks=all` answers once the fsync that covers them has
//! finished (group commit on the flusher threads). Nothing else waits for an fsync, not
//! even the same connection's next request: it is appended while this one's fsync runs.

use laminar_cluster::TopicPartition;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, NodeEndpoint, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{BrokerId, ProduceResponse};
use laminar_protocol::requests::{ProduceRequest, ProduceTopic};
use laminar_protocol::responses::ResponseFrame;
use laminar_protocol::{responses, ApiKey};
use laminar_records::BatchHeader;

use super::refused::Refused as RefusedResources;
use super::{sb, topic_name};
use crate::context::RequestContext;
use crate::quotas::Quotas;
use crate::response::{Dispatched, RecordsFile};
use crate::topics::Topics;
use laminar_cluster::Cluster;
use laminar_coordinators::txn::service::Txns;
use laminar_data::partition::Partitions;
use laminar_data::produce::{self, Refused, Rules, TxnCheck};
use laminar_data::replicate::{self, ReplicateError, Replicated};
use laminar_data::storage_pool::StoragePool;
use laminar_net::{CloseConnection, ResponseOrClose};
use laminar_protocol::ErrorCode;

/// What a produce works with: the topics as applied here (their configs), the partitions
/// placed here, their storage threads and the fetches waiting for data, the cluster (the
/// leader a refused produce points at), the transaction coordinator (a transactional
/// batch's check) and the client quotas.
pub struct ProduceService {
    pub topics: Arc<Topics>,
    pub partitions: Arc<Partitions>,
    pub storage: Arc<StoragePool>,
    pub cluster: Arc<Cluster>,
    pub txns: Arc<Txns>,
    pub quotas: Arc<Quotas>,
}

/// The check of `records`' transaction, if its first batch is transactional, made before
/// it goes to the storage thread. With the coordinator here, Produce v12 (transaction
/// version 2, KIP-890) adds the partition to the transaction durably; the append checks the
/// rest. With the coordinator on another broker, it is asked, with AddPartitionsToTxn v4:
/// to add the partition (v12), or whether it is in the transaction (below v12, KIP-890's
/// verification), unless the transaction is in progress here already.
async fn check_transaction(
    s: &Arc<ProduceService>,
    version: i16,
    transactional_id: Option<&str>,
    topic: &str,
    partition: i32,
    records: &[u8],
) -> Result<TxnCheck, ErrorCode> {
    let local = s.txns.epoch();
    // Not transactional, or refused by the append: checked against this broker's state if
    // it is the coordinator, which refuses it otherwise.
    let unchecked = coordinator_check(s, topic, partition, local.unwrap_or(-1));
    let Ok(h) = BatchHeader::parse(records) else {
        return Ok(unchecked); // refused as corrupt by the append
    };
    if !h.is_transactional() || h.is_control() || h.producer_id < 0 {
        return Ok(unchecked);
    }
    let (pid, epoch) = (h.producer_id, h.producer_epoch);
    let add = version >= 12;
    if let Ok(coordinator_epoch) = local {
        if add {
            let id = match transactional_id {
                Some(id) => id.to_string(),
                None => s
                    .txns
                    .coordinator
                    .id_of(pid)
                    .ok_or(ErrorCode::InvalidProducerIdMapping)?,
            };
            let partitions = [TopicPartition::new(topic, partition)];
            laminar_coordinators::txn::complete::add_partitions(&s.txns, &id, pid, epoch, &partitions)
                .await
                .map_err(produce_code)?;
        }
        return Ok(coordinator_check(s, topic, partition, coordinator_epoch));
    }
    let Some(id) = transactional_id else {
        return Err(ErrorCode::InvalidTxnState);
    };
    let hosted = s.partitions.get(topic, partition);
    if hosted.as_ref().is_some_and(|p| p.in_transaction(pid, epoch)) {
        return Ok(TxnCheck::Open);
    }
    if add {
        // No guard: the coordinator answers once the producer's previous transaction is
        // complete, and its markers, written meanwhile, would remove it.
        laminar_coordinators::txn::remote::add_or_verify(&s.cluster, id, pid, epoch, topic, partition, false)
            .await
            .map_err(produce_code)?;
        return Ok(TxnCheck::Added);
    }
    let hosted = hosted.ok_or(ErrorCode::NotLeaderOrFollower)?;
    let token = hosted.producers.guard(pid, epoch);
    laminar_coordinators::txn::remote::add_or_verify(&s.cluster, id, pid, epoch, topic, partition, true)
        .await
        .map_err(produce_code)?;
    Ok(TxnCheck::Guarded(token))
}

/// A transactional batch's check by this broker's transaction coordinator, at
/// `coordinator_epoch`, made on the partition's storage thread just before the append.
fn coordinator_check(s: &ProduceService, topic: &str, partition: i32, coordinator_epoch: i32) -> TxnCheck {
    let (txns, topic) = (s.txns.clone(), topic.to_string());
    TxnCheck::Coordinator(Arc::new(move |producer_id, epoch| {
        txns.coordinator
            .check_produce(producer_id, epoch, &topic, partition)
            .map_err(|code| {
                // Its state was dropped: this broker stopped coordinating since the request
                // came (the producer retries, and the check goes elsewhere).
                if txns.epoch() != Ok(coordinator_epoch) {
                    ErrorCode::NotEnoughReplicas
                } else {
                    code
                }
            })
    }))
}

/// As Kafka's produce path answers for the coordinator: a fenced producer gets the error
/// producers handle (it aborts, and goes on with its next epoch), and what a retry will get
/// past is a retriable error.
fn produce_code(code: ErrorCode) -> ErrorCode {
    match code {
        ErrorCode::ProducerFenced => ErrorCode::InvalidProducerEpoch,
        ErrorCode::ConcurrentTransactions
        | ErrorCode::CoordinatorNotAvailable
        | ErrorCode::NotCoordinator
        | ErrorCode::CoordinatorLoadInProgress
        | ErrorCode::NetworkException => ErrorCode::NotEnoughReplicas,
        other => other,
    }
}

/// What every partition of a produce request shares.
struct RequestArgs {
    version: i16,
    acks: i16,
    /// The request's `timeout_ms`.
    timeout: Duration,
    transactional_id: Option<String>,
}

/// Appends one partition's batches. With `acks=all`, also returns the wait for the fsync
/// that will cover them: the caller awaits it after the request's ordered part is done.
async fn produce_partition(
    s: Arc<ProduceService>,
    request: Arc<RequestArgs>,
    topic: String,
    partition: i32,
    records: Option<Bytes>,
) -> (PartitionProduceResponse, Option<Durable>) {
    let RequestArgs {
        version,
        acks,
        timeout,
        ref transactional_id,
    } = *request;
    let mut out = PartitionProduceResponse::default();
    out.index = partition;
    out.base_offset = -1;
    out.log_append_time_ms = -1;
    let Some(meta) = s.topics.get(&topic) else {
        out.error_code = ErrorCode::UnknownTopicOrPartition.code();
        return (out, None);
    };
    if partition < 0 || partition as u32 >= meta.partitions {
        out.error_code = ErrorCode::UnknownTopicOrPartition.code();
        return (out, None);
    }
    if crate::topics::is_internal(&topic) {
        // As Kafka refuses it: only the broker writes its internal topics.
        out.error_code = ErrorCode::InvalidTopicException.code();
        if version >= 8 {
            out.error_message = Some(sb(&format!("Cannot append to internal topic {topic}")));
        }
        return (out, None);
    }
    let led = match s.partitions.led(&topic, partition) {
        Ok(led) => led,
        Err(code) => {
            out.error_code = code.code();
            // KIP-951: the leader the client should go to, so that it need not ask for
            // metadata first (its endpoint goes in the response's node endpoints).
            if version >= 10 {
                if let Some(p) = s.cluster.image().partition(&topic, partition) {
                    out.current_leader.leader_id = BrokerId(p.leader.0);
                    out.current_leader.leader_epoch = p.leader_epoch.0;
                }
            }
            return (out, None);
        }
    };
    if acks == -1 {
        if let Some(isr) = led.partition.replica.isr() {
            // Checked before the append, as Kafka does: fewer in sync than the topic asks
            // for, and nothing is written.
            if isr.len() < s.topics.min_insync_replicas(&meta) {
                out.error_code = ErrorCode::NotEnoughReplicas.code();
                return (out, None);
            }
        }
    }
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        out.error_code = ErrorCode::CorruptMessage.code();
        return (out, None);
    };
    // Transaction version 2 (KIP-890): the producer adds no partitions; its first batch to a
    // partition in a transaction adds it, durably, before anything is appended.
    let txn = match check_transaction(
        &s,
        version,
        transactional_id.as_deref(),
        &topic,
        partition,
        &records,
    )
    .await
    {
        Ok(check) => check,
        Err(code) => {
            out.error_code = code.code();
            return (out, None);
        }
    };
    let rules = Rules {
        max_message_bytes: s.topics.max_message_bytes(&meta),
        zstd_allowed: version >= 7,
        log_append_time: s.topics.log_append_time(&meta),
        txn,
    };
    match produce::produce(&led, &s.storage, records, rules).await {
        Err(Refused::Code(code)) => {
            out.error_code = code.code();
            (out, None)
        }
        Err(Refused::Records(errors, summary)) => {
            out.error_code = ErrorCode::InvalidRecord.code();
            if version >= 8 {
                out.record_errors = errors
                    .into_iter()
                    .map(|(i, m)| {
                        let mut e = BatchIndexAndErrorMessage::default();
                        e.batch_index = i;
                        e.batch_index_error_message = Some(super::sb(&m));
                        e
                    })
                    .collect();
                out.error_message = Some(super::sb(&summary));
            }
            (out, None)
        }
        Ok(produced) => {
            out.base_offset = produced.base_offset.0;
            out.log_append_time_ms = produced.log_append_time_ms.unwrap_or(-1);
            if version >= 5 {
                out.log_start_offset = produced.log_start.0;
            }
            // acks=0 and 1 ask for no fsync: with `log.read.after.fsync` a consumer's read asks
            // for it when unsynced records hold it back (`high_watermark_for_reader`).
            let durable = (acks == -1).then(|| Durable {
                durable: produced.durable(timeout),
                min_insync_replicas: s.topics.min_insync_replicas(&meta),
            });
            (out, durable)
        }
    }
}

/// What an `acks=all` append waits for: the fsync that covers it here and, in a cluster,
/// the high watermark passing it (every in-sync replica has it on its disk).
struct Durable {
    durable: replicate::Durable,
    /// The topic's `min.insync.replicas`.
    min_insync_replicas: usize,
}

/// Waits for the fsyncs (and, in a cluster, the replication) that cover the appended
/// partitions, then encodes the response. A partition whose fsync failed (its log went
/// offline) answers KAFKA_STORAGE_ERROR; one not replicated in time, REQUEST_TIMED_OUT (or
/// NOT_LEADER_OR_FOLLOWER if its leadership moved meanwhile).
async fn answer_when_durable(
    mut resp: ProduceResponse,
    waits: Vec<(usize, usize, Durable)>,
    version: i16,
    correlation_id: i32,
) -> ResponseOrClose<RecordsFile> {
    for (t, p, wait) in waits {
        let error = match wait.durable.wait().await {
            Err(e) => {
                if let ReplicateError::Storage(_) = e {
                    let tr = &resp.responses[t];
                    crate::warn!(
                        "acks=all on {}-{}: {e}",
                        tr.name.as_str(),
                        tr.partition_responses[p].index
                    );
                }
                Some(e.partition_code())
            }
            // As Kafka answers: replicated, but by fewer than the topic asks for (the ISR
            // shrank after the append).
            Ok(Replicated { isr_len: Some(isr) }) if isr < wait.min_insync_replicas => {
                Some(ErrorCode::NotEnoughReplicasAfterAppend)
            }
            Ok(_) => None,
        };
        if let Some(code) = error {
            let pr = &mut resp.responses[t].partition_responses[p];
            pr.error_code = code.code();
            pr.base_offset = -1;
            pr.log_start_offset = -1;
        }
    }
    encode(resp, version, correlation_id).map(Some)
}

fn encode(
    resp: ProduceResponse,
    version: i16,
    correlation_id: i32,
) -> Result<ResponseFrame<RecordsFile>, CloseConnection> {
    responses::encode(ApiKey::Produce, version, correlation_id, &resp)
        .map(ResponseFrame::from_bytes)
        .map_err(|e| CloseConnection(format!("encoding Produce v{version} response: {e}")))
}

/// Appends every partition's batches (each on its partition's storage thread, in parallel),
/// in this connection's request order. `acks=1` answers now; `acks=all` hands back the rest
/// of the request, which waits for the fsyncs while the connection's next requests go on:
/// one fsync can then cover several requests of one producer (group commit).
pub async fn handle(
    s: &Arc<ProduceService>,
    ctx: &RequestContext,
    r: ProduceRequest,
    refused: RefusedResources,
) -> Result<Dispatched, CloseConnection> {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let client_id = ctx.client_id.as_str();
    // v13 names topics by id: the step named each known one (and refused the others).
    let ids: HashMap<String, [u8; 16]> = r
        .topics
        .iter()
        .filter_map(|t| Some((t.name.clone(), t.topic_id?)))
        .collect();
    let acks = r.acks;
    let timeout = Duration::from_millis(r.timeout_ms.max(0) as u64);
    let request_bytes: u64 = r
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.records.as_ref().map_or(0, |records| records.len() as u64))
        .sum();
    let mut resp = ProduceResponse::default();
    let mut waits = Vec::new();
    if ![0, 1, -1].contains(&acks) {
        for t in &r.topics {
            resp.responses
                .push(every_partition(t, ErrorCode::InvalidRequiredAcks));
        }
    } else {
        let mut pending = Vec::new();
        let args = Arc::new(RequestArgs {
            version,
            acks,
            timeout,
            transactional_id: r.transactional_id.clone(),
        });
        // The topics the principal may not write (or, for a transaction's records, whose
        // transactional id it may not write) were taken out by the authorization step.
        let mut appends = Vec::new();
        for t in r.topics {
            pending.push((t.name.clone(), t.partitions.len()));
            for p in t.partitions {
                appends.push(produce_partition(
                    s.clone(),
                    args.clone(),
                    t.name.clone(),
                    p.index,
                    p.records,
                ));
            }
        }
        // Every partition's append at once, each on its storage thread, awaited here: no task
        // of their own (a spawn would wake another runtime thread, twice, per partition). A
        // panic in one (a bug) closes the connection with that reason, as a failed task did.
        let all = std::panic::AssertUnwindSafe(futures_util::future::join_all(appends));
        let mut appended = laminar_net::waiting(futures_util::FutureExt::catch_unwind(all))
            .await
            .map_err(|_| CloseConnection("a produce's append panicked".into()))?
            .into_iter();
        for (name, count) in pending {
            let mut tr = TopicProduceResponse::default();
            tr.name = topic_name(&name);
            for (pr, durable) in appended.by_ref().take(count) {
                if let Some(wait) = durable {
                    waits.push((resp.responses.len(), tr.partition_responses.len(), wait));
                }
                tr.partition_responses.push(pr);
            }
            resp.responses.push(tr);
        }
    }
    // v13 answers by topic id.
    for tr in &mut resp.responses {
        if let Some(id) = ids.get(tr.name.as_str()) {
            tr.topic_id = super::uuid(*id);
        }
    }
    refused.answer(&mut resp);
    let redirected = || {
        resp.responses
            .iter()
            .flat_map(|t| &t.partition_responses)
            .any(|p| p.error_code == ErrorCode::NotLeaderOrFollower.code())
    };
    if version >= 10 && redirected() {
        let image = s.cluster.image();
        let mut leaders: Vec<laminar_cluster::BrokerId> = resp
            .responses
            .iter()
            .flat_map(|t| &t.partition_responses)
            .filter(|p| {
                p.error_code == ErrorCode::NotLeaderOrFollower.code() && p.current_leader.leader_id.0 >= 0
            })
            .map(|p| laminar_cluster::BrokerId(p.current_leader.leader_id.0))
            .collect();
        leaders.sort_unstable();
        leaders.dedup();
        resp.node_endpoints = leaders
            .into_iter()
            .filter_map(|id| image.brokers.get(&id))
            .filter_map(|x| Some((x.id, x.endpoint(&ctx.listener.name)?)))
            .map(|(id, (host, port))| {
                let mut e = NodeEndpoint::default();
                e.node_id = BrokerId(id.0);
                e.host = sb(host);
                e.port = port as i32;
                e
            })
            .collect();
    }
    // As Kafka does: the records are appended, then a client over its quota is told to
    // wait and its connection is muted for that long (with acks=0, only muted).
    let throttle = s.quotas.record(
        &ctx.principal.name,
        client_id,
        crate::quotas::QuotaKind::Produce,
        request_bytes,
    );
    if !throttle.is_zero() {
        resp.throttle_time_ms = throttle.as_millis() as i32;
        laminar_net::throttle(throttle);
    }
    if acks == 0 {
        return Ok(Dispatched::Now(None));
    }
    if waits.is_empty() {
        return encode(resp, version, correlation_id).map(|f| Dispatched::Now(Some(f)));
    }
    Ok(Dispatched::Later(Box::pin(answer_when_durable(
        resp,
        waits,
        version,
        correlation_id,
    ))))
}

/// A topic's answer when none of its partitions is appended: `code` for each.
fn every_partition(t: &ProduceTopic, code: ErrorCode) -> TopicProduceResponse {
    let mut tr = TopicProduceResponse::default();
    tr.name = topic_name(&t.name);
    tr.topic_id = super::uuid(t.topic_id.unwrap_or_default());
    for p in &t.partitions {
        let mut pr = PartitionProduceResponse::default();
        pr.index = p.index;
        pr.error_code = code.code();
        pr.base_offset = -1;
        tr.partition_responses.push(pr);
    }
    tr
}
