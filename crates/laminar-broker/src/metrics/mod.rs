//! Everything the broker measures, in one place, and its Prometheus rendering (invariant 5:
//! every stall is visible). The figures themselves are recorded where they happen: request
//! phases and socket-thread stalls in `net`, disk calls in `laminar-storage`.

pub mod http;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use laminar_metrics::prometheus::Exposition;
use laminar_metrics::Histogram;
use laminar_protocol::{ApiKey, API_TABLE};
use laminar_storage::Store;

use laminar_net::{NetMetrics, RequestPhases};

pub struct BrokerMetrics {
    pub net: Arc<NetMetrics>,
    /// One set of phase histograms per API, in `API_TABLE` order.
    phases: Vec<(ApiKey, Arc<RequestPhases>)>,
}

impl Default for BrokerMetrics {
    fn default() -> Self {
        BrokerMetrics {
            net: Arc::new(NetMetrics::default()),
            phases: API_TABLE
                .iter()
                .map(|s| (s.key, Arc::new(RequestPhases::default())))
                .collect(),
        }
    }
}

impl BrokerMetrics {
    pub fn phases(&self, api: ApiKey) -> Arc<RequestPhases> {
        self.phases
            .iter()
            .find(|(k, _)| *k == api)
            .map(|(_, p)| p.clone())
            .expect("every API in the table has phases")
    }

    /// The text of `GET /metrics`. Takes a snapshot of every histogram: run it off the
    /// socket threads.
    pub fn render(
        &self,
        store: &Store,
        stuck_reads: &laminar_data::stuck_reads::StuckReads,
        txns: &laminar_coordinators::txn::TxnCoordinator,
    ) -> String {
        let mut e = Exposition::default();
        let phase_names = [
            "request_queue",
            "local",
            "wait",
            "response_queue",
            "send",
            "total",
        ];
        let mut phase_samples = Vec::new();
        for (api, p) in &self.phases {
            let hs = [
                &p.request_queue_us,
                &p.local_us,
                &p.wait_us,
                &p.response_queue_us,
                &p.send_us,
                &p.total_us,
            ];
            for (phase, h) in phase_names.iter().zip(hs) {
                phase_samples.push(([("api", api.name()), ("phase", *phase)], h.snapshot()));
            }
        }
        e.latency_histograms(
            "laminar_request_phase_seconds",
            "Time each request spent in each phase: request_queue (behind earlier requests of \
             its connection), local (handler work), wait (storage, I/O pool, fsync, long poll, \
             rebalance), response_queue, send, and total.",
            phase_samples.iter().map(|(l, h)| (&l[..], h.clone())),
        );

        let s = store.metrics();
        let n = &self.net;
        let disk: [(&str, Histogram<u64>); 10] = [
            ("pwrite", s.segment_write_us.snapshot()),
            ("fdatasync", s.segment_fsync_us.snapshot()),
            ("fallocate", s.segment_allocate_us.snapshot()),
            ("create", s.segment_create_us.snapshot()),
            ("rename", s.segment_rename_us.snapshot()),
            ("truncate", s.segment_trim_us.snapshot()),
            ("read", s.segment_read_us.snapshot()),
            ("metadata_fsync", s.metadata_fsync_us.snapshot()),
            ("sendfile", n.sendfile_us.snapshot()),
            ("cold_read", n.cold_read_us.snapshot()),
        ];
        let disk_labels: Vec<[(&str, &str); 1]> = disk.iter().map(|(c, _)| [("call", *c)]).collect();
        e.latency_histograms(
            "laminar_disk_call_seconds",
            "Latency of each disk call: segment pwrite and fdatasync; fallocate and create of \
             the next segment's file (on a preparer thread); the flusher's rename of a rolled \
             segment and truncate of a sealed one's preallocated tail; reads through \
             the storage interface, checkpoint/index/directory fsyncs, sendfile of resident \
             ranges, and reads of cold ranges on the I/O pool.",
            disk_labels.iter().zip(disk).map(|(l, (_, h))| (&l[..], h)),
        );
        e.latency_histograms(
            "laminar_log_flush_seconds",
            "One whole flush of one log: data fsyncs, index writes and checkpoint.",
            [(&[][..], s.log_flush_us.snapshot())],
        );
        e.latency_histograms(
            "laminar_event_loop_lateness_seconds",
            "How late a socket thread woke a 10 ms timer.",
            [(&[][..], n.event_loop_lateness_us.snapshot())],
        );
        e.latency_histograms(
            "laminar_event_loop_stalled_poll_seconds",
            "Polls of connection tasks that ran past event.loop.stall.threshold.ms.",
            [(&[][..], n.stalled_poll_us.snapshot())],
        );
        e.counters(
            "laminar_event_loop_stalls_total",
            "Stalls the watchdog logged while they were happening.",
            [(&[][..], n.stalls_total.load(Ordering::Relaxed))],
        );
        e.counters(
            "laminar_event_loop_stalls_waiting_for_cpu_total",
            "Of the stalls logged, those whose socket thread spent most of the time runnable but waiting for a CPU (the machine overloaded, not the thread blocked).",
            [(&[][..], n.stalls_waiting_for_cpu_total.load(Ordering::Relaxed))],
        );
        e.gauges(
            "laminar_connections_open",
            "Client connections open now.",
            [(&[][..], n.connections_open.load(Ordering::Relaxed))],
        );
        // The broker's runtime: the socket threads' tasks (one per idle connection, three per
        // connection that has sent a request) and the broker's own.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            e.gauges(
                "laminar_runtime_tasks",
                "Tasks alive on the broker's runtime: one per idle connection, three per \
                 connection that has sent a request, and the broker's own.",
                [(&[][..], rt.metrics().num_alive_tasks() as i64)],
            );
        }
        e.counters(
            "laminar_connection_accept_throttled_seconds_total",
            "Time new connections waited in the listen backlog because max.connection.creation.rate was reached.",
            [(
                &[][..],
                n.accept_throttled_us_total.load(Ordering::Relaxed) / 1_000_000,
            )],
        );
        e.counters(
            "laminar_connections_refused_total",
            "Connections closed at accept because max.connections was reached.",
            [(&[][..], n.connections_refused_total.load(Ordering::Relaxed))],
        );
        e.counters(
            "laminar_ktls_connections_total",
            "TLS connections whose keys went to the kernel after the handshake (ssl.ktls.enable).",
            [(&[][..], n.ktls_connections_total.load(Ordering::Relaxed))],
        );
        e.counters(
            "laminar_ktls_fallbacks_total",
            "TLS connections kernel TLS was asked for that stayed in user space (no tls module, a cipher the kernel lacks).",
            [(&[][..], n.ktls_fallbacks_total.load(Ordering::Relaxed))],
        );
        e.counters(
            "laminar_connections_closed_for_errors_total",
            "Connections closed for bad input (a bad frame, an unknown API, a malformed request).",
            [(
                &[][..],
                n.connections_closed_for_errors_total.load(Ordering::Relaxed),
            )],
        );
        e.gauges(
            "laminar_inflight_request_bytes",
            "Bytes of requests read and not yet handled (bounded by queued.max.request.bytes).",
            [(&[][..], n.inflight_request_bytes() as i64)],
        );
        e.gauges(
            "laminar_inflight_request_bytes_max",
            "The most request bytes in flight at once since startup.",
            [(
                &[][..],
                n.inflight_request_bytes_max.load(Ordering::Relaxed) as i64,
            )],
        );
        e.counters(
            "laminar_log_lines_dropped_total",
            "Broker log lines dropped because the log queue was full.",
            [(
                &[][..],
                laminar_metrics::log::DROPPED_LINES.load(Ordering::Relaxed),
            )],
        );
        e.counters(
            "laminar_checkpoint_failures_total",
            "Recovery-point checkpoints (or index writes) that failed after their data fsync succeeded; the log stayed online.",
            [(&[][..], store.metrics().checkpoint_failures.load(Ordering::Relaxed))],
        );
        e.counters(
            "laminar_damaged_batches_found_total",
            "Batches found damaged on disk (CRC, length or offsets) by a read that checks what this process has not checked before sending it; none was served.",
            [(
                &[][..],
                laminar_storage::metrics::DAMAGED_BATCHES_FOUND.load(Ordering::Relaxed),
            )],
        );
        let m = store.metrics();
        e.counters(
            "laminar_segment_appends_past_allocation_total",
            "Appends that wrote past their segment's preallocated blocks (the write grew the file; ext4 allocates at writeback).",
            [(&[][..], m.appends_past_allocation.load(Ordering::Relaxed))],
        );
        e.counters(
            "laminar_segment_rolls_deferred_total",
            "Appends whose due roll waited because no next segment file was prepared yet (the segment grew past segment.bytes or segment.ms).",
            [(&[][..], m.rolls_deferred.load(Ordering::Relaxed))],
        );
        e.counters(
            "laminar_segment_rolls_inline_total",
            "Rolls that created their segment file on the append path (a segment at its 2 GiB limit with no file prepared).",
            [(&[][..], m.rolls_inline.load(Ordering::Relaxed))],
        );
        e.counters(
            "laminar_segment_prepare_failures_total",
            "Failures to create the next segment's file ahead of its roll (retried at the next append).",
            [(&[][..], m.prepare_failures.load(Ordering::Relaxed))],
        );
        e.counters(
            "laminar_segment_allocate_failures_total",
            "fallocate failures of a prepared segment file (ENOSPC: the file was used unallocated).",
            [(&[][..], m.allocate_failures.load(Ordering::Relaxed))],
        );
        e.counters(
            "laminar_storage_threads_added_total",
            "Storage threads added because every thread was busy and a job had run past 20 ms (a disk stalled a write).",
            [(
                &[][..],
                laminar_data::storage_pool::THREADS_ADDED.load(Ordering::Relaxed),
            )],
        );
        e.counters(
            "laminar_fetch_stuck_reads_total",
            "Partition reads that took over 100 ms on the I/O pool (a stalled write or a slow disk): fetches were answered without the partition until the read returned.",
            [(&[][..], stuck_reads.found_total.load(Ordering::Relaxed))],
        );
        e.counters(
            "laminar_fetch_long_poll_wakeups_total",
            "Fetches waiting in long poll woken to read again before their wait ended: by an append, a flush or a high watermark's move on a partition they asked for (only those).",
            [(
                &[][..],
                crate::handlers::fetch::LONG_POLL_WAKEUPS.load(Ordering::Relaxed),
            )],
        );
        e.gauges(
            "laminar_fetch_stuck_partitions",
            "Partitions fetches skip now because a read of theirs is stuck.",
            [(&[][..], stuck_reads.count() as i64)],
        );
        e.counters(
            "laminar_produce_large_batches_total",
            "Compressed batches that expanded past 1 MiB in validation and were validated apart, one at a time (decompression bombs, or very compressible data).",
            [(
                &[][..],
                laminar_data::produce::LARGE_BATCHES_VALIDATED.load(Ordering::Relaxed),
            )],
        );
        e.counters(
            "laminar_produce_large_batches_refused_total",
            "Of those, batches refused (past the 64 MiB bound, or malformed): CORRUPT_MESSAGE.",
            [(
                &[][..],
                laminar_data::produce::LARGE_BATCHES_REFUSED.load(Ordering::Relaxed),
            )],
        );
        e.counters(
            "laminar_producer_states_evicted_total",
            "Idempotent producers' states (and transactional verification guards) forgotten because a partition already held 10,000: each such producer's next batch gets UNKNOWN_PRODUCER_ID and it starts its sequence again.",
            [(
                &[][..],
                laminar_data::producers::PRODUCERS_EVICTED.load(Ordering::Relaxed),
            )],
        );
        e.counters(
            "laminar_storage_job_panics_total",
            "Storage jobs (appends) that panicked: each failed its request, and its thread carried on.",
            [(
                &[][..],
                laminar_data::storage_pool::JOB_PANICS.load(Ordering::Relaxed),
            )],
        );
        let logs = store.logs();
        let labels: Vec<(String, String)> = logs
            .iter()
            .map(|(id, _)| (id.topic.clone(), id.partition.to_string()))
            .collect();
        let per_log = |f: &dyn Fn(&laminar_storage::Log) -> i64| -> Vec<([(&str, &str); 2], i64)> {
            labels
                .iter()
                .zip(&logs)
                .map(|((t, p), (_, log))| ([("topic", t.as_str()), ("partition", p.as_str())], f(log)))
                .collect()
        };
        let ends = per_log(&|l| l.log_end().0);
        e.gauges(
            "laminar_partition_log_end_offset",
            "The next offset each partition's log will assign.",
            ends.iter().map(|(l, v)| (&l[..], *v)),
        );
        let starts = per_log(&|l| l.log_start().0);
        e.gauges(
            "laminar_partition_log_start_offset",
            "The first offset each partition's log still holds.",
            starts.iter().map(|(l, v)| (&l[..], *v)),
        );
        let unstable = per_log(&|l| l.log_end().0 - l.last_stable_offset().0);
        e.gauges(
            "laminar_partition_unstable_offsets",
            "Offsets between each partition's last stable offset (the first record of its oldest open transaction) and its end: what read_committed consumers cannot read yet. A transaction left open holds it until it times out.",
            unstable.iter().map(|(l, v)| (&l[..], *v)),
        );
        let unflushed = per_log(&|l| l.log_end().0 - l.flushed_end().0);
        e.gauges(
            "laminar_partition_unflushed_offsets",
            "Offsets appended to each partition's log and not yet covered by an fsync.",
            unflushed.iter().map(|(l, v)| (&l[..], *v)),
        );
        let compacted: Vec<([(&str, &str); 2], f64)> = labels
            .iter()
            .zip(&logs)
            .filter(|(_, (_, log))| log.config().cleanup_compact)
            .map(|((t, p), (_, log))| {
                (
                    [("topic", t.as_str()), ("partition", p.as_str())],
                    log.dirty_ratio(),
                )
            })
            .collect();
        e.fraction_gauges(
            "laminar_log_cleaner_dirty_ratio",
            "Of each compacted partition's cleanable bytes, the share written since the cleaner last mapped it (as the cleaner last measured it).",
            compacted.iter().map(|(l, v)| (&l[..], *v)),
        );
        e.counters(
            "laminar_log_cleaner_passes_total",
            "Cleaning passes finished.",
            [(&[][..], s.cleaner_passes.load(Ordering::Relaxed))],
        );
        e.counters(
            "laminar_log_cleaner_failures_total",
            "Cleaning passes that failed; the log waits log.cleaner.backoff.ms before the next.",
            [(&[][..], s.cleaner_failures.load(Ordering::Relaxed))],
        );
        e.counters(
            "laminar_log_cleaner_bytes_total",
            "Bytes the cleaner read and wrote.",
            [
                (
                    &[("direction", "read")][..],
                    s.cleaner_bytes_read.load(Ordering::Relaxed),
                ),
                (
                    &[("direction", "written")][..],
                    s.cleaner_bytes_written.load(Ordering::Relaxed),
                ),
            ],
        );
        e.counters(
            "laminar_log_cleaner_records_removed_total",
            "Records the cleaner removed (superseded, expired tombstones, keyless).",
            [(&[][..], s.cleaner_records_removed.load(Ordering::Relaxed))],
        );
        e.latency_histograms(
            "laminar_log_cleaner_pass_seconds",
            "The time of each whole cleaning pass (the cleaner's time).",
            [(&[][..], s.cleaner_pass_us.snapshot())],
        );
        let tm = &txns.metrics;
        e.counters(
            "laminar_transactions_ended_total",
            "Transactions the coordinator completed, by result.",
            [
                (&[("result", "commit")][..], tm.commits.load(Ordering::Relaxed)),
                (&[("result", "abort")][..], tm.aborts.load(Ordering::Relaxed)),
            ],
        );
        e.counters(
            "laminar_transactions_timed_out_total",
            "Transactions the coordinator aborted because they ran past their timeout (their producers fenced).",
            [(&[][..], tm.timed_out.load(Ordering::Relaxed))],
        );
        e.counters(
            "laminar_transaction_marker_retries_total",
            "Markers, or a commit's offsets, that failed (a log offline, a full disk) and are tried again every second: the transaction stays unfinished meanwhile.",
            [(&[][..], tm.retries.load(Ordering::Relaxed))],
        );
        e.counters(
            "laminar_transaction_waits_total",
            "Requests that waited for their transactional id to be free (a change being written, or the previous transaction being completed).",
            [(&[][..], tm.waits.load(Ordering::Relaxed))],
        );
        e.latency_histograms(
            "laminar_transaction_completion_seconds",
            "From a transaction's commit or abort decision being durable to its markers (and a commit's offsets) being durable: how long its producer's next transaction waits.",
            [(&[][..], tm.completion_us.snapshot())],
        );
        let states: Vec<(&'static str, i64)> = txns
            .count_by_status()
            .into_iter()
            .map(|(s, n)| (s.name(), n))
            .collect();
        let state_labels: Vec<[(&str, &str); 1]> = states.iter().map(|(s, _)| [("state", *s)]).collect();
        e.gauges(
            "laminar_transactional_ids",
            "Transactional ids the coordinator knows, by the state of their transaction.",
            state_labels.iter().zip(&states).map(|(l, (_, n))| (&l[..], *n)),
        );
        e.gauges(
            "laminar_logs_offline",
            "Logs taken offline by a failed fsync or write.",
            [(
                &[][..],
                logs.iter().filter(|(_, l)| l.offline_reason().is_some()).count() as i64,
            )],
        );
        e.finish()
    }
}
