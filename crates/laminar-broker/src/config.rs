//! Broker settings. Every setting uses Kafka's name where Kafka has one, and can be set in
//! `laminar.toml` under that name (quoted, since the names contain dots):
//!
//! ```toml
//! "auto.create.topics.enable" = false
//! "num.partitions" = 3
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::listeners::ListenerSettings;
use crate::security::SecuritySettings;

/// One setting: its name, its default, and what it means. `laminar serve --help-config`
/// and docs/configuration.md list these.
pub struct SettingDoc {
    pub name: &'static str,
    pub default: &'static str,
    pub doc: &'static str,
}

pub const SETTINGS: &[SettingDoc] = &[
    SettingDoc {
        name: "listeners",
        default: "PLAINTEXT://127.0.0.1:9092",
        doc: "Where to accept connections, as Kafka names them: `NAME://host:port,...` (port 0: any free port). `host:port` alone is one listener named PLAINTEXT (--listen).",
    },
    SettingDoc {
        name: "advertised.listeners",
        default: "each listener's bound address",
        doc: "What clients are told to connect to, per listener: `NAME://host:port,...`. A client is told the endpoints of the listener it came in on.",
    },
    SettingDoc {
        name: "listener.security.protocol.map",
        default: "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        doc: "Each listener name's security protocol: `NAME:PROTOCOL,...`.",
    },
    SettingDoc {
        name: "inter.broker.listener.name",
        default: "PLAINTEXT, else the first listener",
        doc: "The listener other brokers reach this one on: where followers fetch and coordinators send transaction markers.",
    },
    SettingDoc {
        name: "sasl.enabled.mechanisms",
        default: "SCRAM-SHA-256,SCRAM-SHA-512",
        doc: "The SASL mechanisms of SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512. A listener may have its own (`listener.name.<listener>.sasl.enabled.mechanisms`); PLAIN's users are the `user_NAME=\"password\"` options of `listener.name.<listener>.plain.sasl.jaas.config`, SCRAM's are managed with AlterUserScramCredentials (`kafka-configs --entity-type users`).",
    },
    SettingDoc {
        name: "connections.max.reauth.ms",
        default: "0",
        doc: "A SASL session lasts this long; the client authenticates again before it ends (KIP-368), or its connection is closed. 0: sessions do not expire.",
    },
    SettingDoc {
        name: "connection.failed.authentication.delay.ms",
        default: "100",
        doc: "A failed authentication is answered after this long, and the connection then serves nothing.",
    },
    SettingDoc {
        name: "log.dirs",
        default: "./data",
        doc: "Data directory (--data-dir).",
    },
    SettingDoc {
        name: "node.id",
        default: "0",
        doc: "This broker's node id.",
    },
    SettingDoc {
        name: "controller.quorum.voters",
        default: "none (a single node)",
        doc: "The controller quorum, as `1@host:port,2@host:port,3@host:port`. Set, the broker runs in a cluster; a node whose node.id is listed runs a controller voter listening on its address (Kafka's combined mode).",
    },
    SettingDoc {
        name: "broker.heartbeat.interval.ms",
        default: "2000",
        doc: "How often a broker heartbeats the active controller.",
    },
    SettingDoc {
        name: "broker.session.timeout.ms",
        default: "9000",
        doc: "A broker that has not heartbeat for this long is fenced: its leaderships move to other in-sync replicas.",
    },
    SettingDoc {
        name: "auto.leader.rebalance.enable",
        default: "true",
        doc: "The active controller checks every leader.imbalance.check.interval.seconds for partitions not led by their preferred (first) replica while it is live and in sync, and makes it lead again (a preferred election, as kafka-leader-election does).",
    },
    SettingDoc {
        name: "leader.imbalance.check.interval.seconds",
        default: "300",
        doc: "How often the active controller looks for partitions to give back to their preferred replica (auto.leader.rebalance.enable).",
    },
    SettingDoc {
        name: "replica.lag.time.max.ms",
        default: "30000",
        doc: "A follower that has not caught up with its leader for this long leaves the ISR.",
    },
    SettingDoc {
        name: "min.insync.replicas",
        default: "1",
        doc: "Default min.insync.replicas of topics: an acks=all produce to a partition with fewer in-sync replicas gets NOT_ENOUGH_REPLICAS.",
    },
    SettingDoc {
        name: "default.replication.factor",
        default: "1",
        doc: "Replication factor of topics created without one (CreateTopics with -1, auto-creation).",
    },
    SettingDoc {
        name: "auto.create.topics.enable",
        default: "true",
        doc: "Create unknown topics on Metadata and Produce.",
    },
    SettingDoc {
        name: "num.partitions",
        default: "1",
        doc: "Partitions of auto-created topics.",
    },
    SettingDoc {
        name: "log.retention.ms",
        default: "604800000",
        doc: "Default retention.ms of topics; -1 keeps forever.",
    },
    SettingDoc {
        name: "log.retention.bytes",
        default: "-1",
        doc: "Default retention.bytes of topics; -1 is unlimited.",
    },
    SettingDoc {
        name: "log.segment.bytes",
        default: "1073741824",
        doc: "Default segment.bytes of topics.",
    },
    SettingDoc {
        name: "log.roll.ms",
        default: "604800000",
        doc: "Default segment.ms of topics.",
    },
    SettingDoc {
        name: "log.flush.interval.ms",
        default: "none",
        doc: "Background fsync interval; acks=all always waits for its own fsync.",
    },
    SettingDoc {
        name: "log.read.after.fsync",
        default: "true",
        doc: "Consumers (and ListOffsets' latest) see a record only once it is on the disk of the leader and of every in-sync replica, so that no power cut takes back a record a consumer has read and no offset read is used again for another record. A consumer's read held back by unsynced records asks for their fsync (acks=1 appends themselves ask for none, so appends nobody reads cost no fsync). `false`: as Kafka, once every in-sync follower has it, whether or not the leader has synced it (a consumer sees acks=1 records sooner).",
    },
    SettingDoc {
        name: "log.flush.interval.messages",
        default: "none",
        doc: "Fsync once this many records are unflushed.",
    },
    SettingDoc {
        name: "log.flush.offset.checkpoint.interval.ms",
        default: "1000",
        doc: "Write each log's recovery-point checkpoint at most this often (fsyncs advance it in memory); recovery validates what was appended since.",
    },
    SettingDoc {
        name: "log.preallocate.bytes",
        default: "33554432",
        doc: "fallocate step for segment files; 0 disables.",
    },
    SettingDoc {
        name: "log.retention.check.interval.ms",
        default: "300000",
        doc: "How often retention runs.",
    },
    SettingDoc {
        name: "log.cleanup.policy",
        default: "delete",
        doc: "Default cleanup.policy of topics: delete (retention), compact (the newest record of each key is kept), or compact,delete.",
    },
    SettingDoc {
        name: "log.cleaner.enable",
        default: "true",
        doc: "Run the log cleaner, which compacts topics whose cleanup.policy holds compact.",
    },
    SettingDoc {
        name: "log.cleaner.threads",
        default: "1",
        doc: "Threads of the log cleaner; each cleans one log at a time.",
    },
    SettingDoc {
        name: "log.cleaner.backoff.ms",
        default: "15000",
        doc: "How long the cleaner sleeps when no log is due for cleaning.",
    },
    SettingDoc {
        name: "log.cleaner.dedupe.buffer.size",
        default: "134217728",
        doc: "Memory of the cleaner's offset map (48 bytes a key): a pass maps at most this many keys' worth of dirty records, and the next pass goes on from there.",
    },
    SettingDoc {
        name: "log.cleaner.io.buffer.size",
        default: "524288",
        doc: "Size of each read and write of a cleaning pass.",
    },
    SettingDoc {
        name: "log.cleaner.io.max.bytes.per.second",
        default: "none",
        doc: "Bytes a second the cleaner reads and writes together, at most; none: no limit.",
    },
    SettingDoc {
        name: "log.cleaner.min.cleanable.ratio",
        default: "0.5",
        doc: "Default min.cleanable.dirty.ratio of topics.",
    },
    SettingDoc {
        name: "log.cleaner.min.compaction.lag.ms",
        default: "0",
        doc: "Default min.compaction.lag.ms of topics.",
    },
    SettingDoc {
        name: "log.cleaner.max.compaction.lag.ms",
        default: "9223372036854775807",
        doc: "Default max.compaction.lag.ms of topics.",
    },
    SettingDoc {
        name: "log.message.timestamp.type",
        default: "CreateTime",
        doc: "Default message.timestamp.type of topics: CreateTime keeps the producer's timestamps; LogAppendTime sets each batch's to the time of its append.",
    },
    SettingDoc {
        name: "log.cleaner.delete.retention.ms",
        default: "86400000",
        doc: "Default delete.retention.ms of topics.",
    },
    SettingDoc {
        name: "message.max.bytes",
        default: "1048588",
        doc: "Largest record batch a producer may send.",
    },
    SettingDoc {
        name: "socket.request.max.bytes",
        default: "104857600",
        doc: "Largest request frame; checked before any allocation.",
    },
    SettingDoc {
        name: "queued.max.request.bytes",
        default: "268435456",
        doc: "Bytes of requests read and not yet handled, over all connections; a connection whose next frame does not fit stops reading until it does. At least socket.request.max.bytes.",
    },
    SettingDoc {
        name: "max.connections",
        default: "20000",
        doc: "Connections accepted at once; more are closed at accept. Kept within the open-file limit (raised to the hard limit at start, less 1024 for logs). An idle connection costs about 3 KiB.",
    },
    SettingDoc {
        name: "max.connection.creation.rate",
        default: "none",
        doc: "New connections accepted per second at most (Kafka's name, KIP-612, listener-wide); more wait in the listen backlog, so a connection flood costs the broker no tasks.",
    },
    SettingDoc {
        name: "max.connections.per.ip",
        default: "2147483647",
        doc: "Connections from one IP address at once, as Kafka's; more are closed at accept (an IPv4 client of a dual-stack listener counts as its IPv4 address).",
    },
    SettingDoc {
        name: "max.connections.per.ip.overrides",
        default: "none",
        doc: "Per-address exceptions to max.connections.per.ip: `ip:count,ip:count` (IPv6 in brackets: `[::1]:count`).",
    },
    SettingDoc {
        name: "queued.max.unauthenticated.request.bytes",
        default: "33554432",
        doc: "Bytes of requests that connections which have not authenticated (SASL) may hold at once, over all of them, apart from queued.max.request.bytes: clients nobody knows cannot spend the budget authenticated ones need.",
    },
    SettingDoc {
        name: "max.inflight.requests.per.connection",
        default: "100",
        doc: "Requests of one connection being handled at once; reading pauses beyond it.",
    },
    SettingDoc {
        name: "num.network.threads",
        default: "2",
        doc: "Socket threads (the async runtime's workers).",
    },
    SettingDoc {
        name: "num.io.threads",
        default: "4",
        doc: "Concurrency of the I/O pool that reads cold data and batch headers.",
    },
    SettingDoc {
        name: "num.storage.threads",
        default: "2",
        doc: "Threads that append to logs; while a write is stuck on the disk the pool grows, up to 64.",
    },
    SettingDoc {
        name: "group.initial.rebalance.delay.ms",
        default: "3000",
        doc: "How long a new group waits for more members before its first rebalance completes.",
    },
    SettingDoc {
        name: "offsets.retention.minutes",
        default: "10080",
        doc: "Committed offsets of an empty group expire after this long.",
    },
    SettingDoc {
        name: "offsets.topic.segment.bytes",
        default: "104857600",
        doc: "Segment size of `__consumer_offsets`, set when the topic is created: the cleaner compacts only segments that have rolled.",
    },
    SettingDoc {
        name: "producer.id.expiration.ms",
        default: "86400000",
        doc: "An idempotent producer's state on a partition is forgotten this long after its last batch's timestamp (KIP-854).",
    },
    SettingDoc {
        name: "producer.id.expiration.check.interval.ms",
        default: "600000",
        doc: "How often expired producer state is looked for.",
    },
    SettingDoc {
        name: "transaction.max.timeout.ms",
        default: "900000",
        doc: "The longest transaction.timeout.ms a producer may ask for in InitProducerId.",
    },
    SettingDoc {
        name: "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        default: "10000",
        doc: "How often the transaction coordinator looks for transactions past their timeout, and aborts them.",
    },
    SettingDoc {
        name: "transactional.id.expiration.ms",
        default: "604800000",
        doc: "A transactional id with no transaction in progress is forgotten this long after its last update.",
    },
    SettingDoc {
        name: "transaction.state.log.segment.bytes",
        default: "104857600",
        doc: "Segment size of `__transaction_state`, set when the topic is created.",
    },
    SettingDoc {
        name: "metrics.listeners",
        default: "127.0.0.1:9644",
        doc: "Address of the Prometheus endpoint (GET /metrics); \"none\" turns it off (--metrics-listen).",
    },
    SettingDoc {
        name: "event.loop.stall.threshold.ms",
        default: "50",
        doc: "A socket thread busy this long in one poll is logged as a stall, with what it was doing.",
    },
    SettingDoc {
        name: "socket.send.buffer.bytes",
        default: "102400",
        doc: "SO_SNDBUF of each client connection, as Kafka's default: it bounds the kernel memory a consumer that stops reading can hold (1,000 such consumers: 100 MiB, not the 1.6 GiB that put the kernel's TCP memory under pressure). -1 leaves the kernel's autotuning (up to net.ipv4.tcp_wmem's maximum, 4 MiB by default); consume throughput measured the same either way (bench/results/2026-11-23-vm-sndbuf).",
    },
    SettingDoc {
        name: "socket.send.chunk.bytes",
        default: "65536",
        doc: "Largest piece of a response written before other connections get a turn.",
    },
];

#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub listeners: ListenerSettings,
    pub security: SecuritySettings,
    pub data_dir: PathBuf,
    pub node_id: i32,
    /// Empty: a single node.
    pub controller_quorum_voters: Vec<laminar_cluster::Voter>,
    /// `controller.quorum.secret.file`: the file holding the secret the brokers and
    /// controllers of a cluster prove to each other on the controller port.
    pub controller_quorum_secret_file: Option<PathBuf>,
    pub broker_heartbeat_interval_ms: u64,
    pub broker_session_timeout_ms: u64,
    pub auto_leader_rebalance_enable: bool,
    pub leader_imbalance_check_interval_seconds: u64,
    pub default_replication_factor: u16,
    pub replica_lag_time_max_ms: u64,
    pub min_insync_replicas: u16,
    pub auto_create_topics_enable: bool,
    pub num_partitions: u32,
    pub log_retention_ms: Option<i64>,
    pub log_retention_bytes: Option<u64>,
    pub log_segment_bytes: u64,
    pub log_roll_ms: Option<u64>,
    pub log_flush_interval_ms: Option<u64>,
    pub log_read_after_fsync: bool,
    pub log_flush_interval_messages: Option<u64>,
    pub log_flush_offset_checkpoint_interval_ms: u64,
    pub log_preallocate_bytes: u64,
    pub log_retention_check_interval_ms: u64,
    pub log_cleanup_policy: CleanupPolicy,
    pub log_cleaner_enable: bool,
    pub log_cleaner_threads: usize,
    pub log_cleaner_backoff_ms: u64,
    pub log_cleaner_dedupe_buffer_size: usize,
    pub log_cleaner_io_buffer_size: usize,
    pub log_cleaner_io_max_bytes_per_second: Option<u64>,
    pub log_cleaner_min_cleanable_ratio: f64,
    pub log_cleaner_min_compaction_lag_ms: i64,
    pub log_cleaner_max_compaction_lag_ms: i64,
    pub log_cleaner_delete_retention_ms: i64,
    /// `log.message.timestamp.type` is LogAppendTime.
    pub log_message_timestamp_log_append: bool,
    pub message_max_bytes: usize,
    pub socket_request_max_bytes: usize,
    pub queued_max_request_bytes: usize,
    pub max_connections: usize,
    pub max_inflight_requests_per_connection: usize,
    pub num_network_threads: usize,
    pub num_io_threads: usize,
    pub num_storage_threads: usize,
    pub socket_send_chunk_bytes: usize,
    /// SO_SNDBUF of client connections; `None`: the kernel's autotuning.
    pub socket_send_buffer_bytes: Option<usize>,
    pub max_connection_creation_rate: Option<u32>,
    pub max_connections_per_ip: usize,
    pub max_connections_per_ip_overrides: std::collections::HashMap<std::net::IpAddr, usize>,
    pub queued_max_unauthenticated_request_bytes: usize,
    pub group_initial_rebalance_delay_ms: u64,
    pub offsets_retention_minutes: u64,
    pub offsets_topic_segment_bytes: u64,
    pub producer_id_expiration_ms: u64,
    pub producer_id_expiration_check_interval_ms: u64,
    pub transaction_max_timeout_ms: u64,
    pub transaction_abort_timed_out_transaction_cleanup_interval_ms: u64,
    pub transactional_id_expiration_ms: u64,
    pub transaction_state_log_segment_bytes: u64,
    pub metrics_listen: Option<SocketAddr>,
    pub event_loop_stall_threshold_ms: u64,
    /// The settings given in `laminar.toml` or on the command line (the rest are defaults):
    /// DescribeConfigs reports them as `STATIC_BROKER_CONFIG`.
    pub set_names: std::collections::BTreeSet<&'static str>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            listeners: ListenerSettings::default(),
            security: SecuritySettings::default(),
            data_dir: PathBuf::from("./data"),
            node_id: 0,
            controller_quorum_voters: Vec::new(),
            controller_quorum_secret_file: None,
            broker_heartbeat_interval_ms: 2000,
            broker_session_timeout_ms: 9000,
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval_seconds: 300,
            default_replication_factor: 1,
            replica_lag_time_max_ms: 30_000,
            min_insync_replicas: 1,
            auto_create_topics_enable: true,
            num_partitions: 1,
            log_retention_ms: Some(7 * 24 * 3600 * 1000),
            log_retention_bytes: None,
            log_segment_bytes: 1 << 30,
            log_roll_ms: Some(7 * 24 * 3600 * 1000),
            log_flush_interval_ms: None,
            log_read_after_fsync: true,
            log_flush_interval_messages: None,
            log_flush_offset_checkpoint_interval_ms: 1000,
            log_preallocate_bytes: 32 << 20,
            log_retention_check_interval_ms: 300_000,
            log_cleanup_policy: CleanupPolicy::DELETE,
            log_cleaner_enable: true,
            log_cleaner_threads: 1,
            log_cleaner_backoff_ms: 15_000,
            log_cleaner_dedupe_buffer_size: 128 << 20,
            log_cleaner_io_buffer_size: 512 << 10,
            log_cleaner_io_max_bytes_per_second: None,
            log_cleaner_min_cleanable_ratio: 0.5,
            log_cleaner_min_compaction_lag_ms: 0,
            log_cleaner_max_compaction_lag_ms: i64::MAX,
            log_cleaner_delete_retention_ms: 86_400_000,
            log_message_timestamp_log_append: false,
            message_max_bytes: 1_048_588,
            socket_request_max_bytes: 100 << 20,
            queued_max_request_bytes: 256 << 20,
            max_connections: 20_000,
            max_inflight_requests_per_connection: 100,
            num_network_threads: 2,
            num_io_threads: 4,
            num_storage_threads: 2,
            socket_send_chunk_bytes: 64 << 10,
            socket_send_buffer_bytes: Some(102_400),
            max_connection_creation_rate: None,
            max_connections_per_ip: i32::MAX as usize,
            max_connections_per_ip_overrides: Default::default(),
            queued_max_unauthenticated_request_bytes: 32 << 20,
            group_initial_rebalance_delay_ms: 3000,
            offsets_retention_minutes: 10080,
            offsets_topic_segment_bytes: 104_857_600,
            producer_id_expiration_ms: 86_400_000,
            producer_id_expiration_check_interval_ms: 600_000,
            transaction_max_timeout_ms: 900_000,
            transaction_abort_timed_out_transaction_cleanup_interval_ms: 10_000,
            transactional_id_expiration_ms: 604_800_000,
            transaction_state_log_segment_bytes: 104_857_600,
            metrics_listen: Some("127.0.0.1:9644".parse().unwrap()),
            event_loop_stall_threshold_ms: 50,
            set_names: Default::default(),
        }
    }
}

/// `cleanup.policy`: a list of `delete` and `compact`, as Kafka spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupPolicy {
    pub delete: bool,
    pub compact: bool,
}

impl CleanupPolicy {
    pub const DELETE: CleanupPolicy = CleanupPolicy {
        delete: true,
        compact: false,
    };

    pub fn parse(value: &str) -> Result<CleanupPolicy, String> {
        let mut p = CleanupPolicy {
            delete: false,
            compact: false,
        };
        for item in value.split(',').map(str::trim) {
            match item {
                "delete" => p.delete = true,
                "compact" => p.compact = true,
                _ => {
                    return Err(format!(
                        "cleanup.policy: {item:?} is not delete or compact (a list of them)"
                    ))
                }
            }
        }
        Ok(p)
    }
}

impl std::fmt::Display for CleanupPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.compact, self.delete) {
            (true, true) => f.write_str("compact,delete"),
            (true, false) => f.write_str("compact"),
            _ => f.write_str("delete"),
        }
    }
}

/// `min.cleanable.dirty.ratio` and its broker default: a number from 0 to 1.
pub fn parse_ratio(key: &str, value: &str) -> Result<f64, String> {
    value
        .parse::<f64>()
        .ok()
        .filter(|r| (0.0..=1.0).contains(r))
        .ok_or_else(|| format!("{key}: {value:?} is not a number from 0 to 1"))
}

fn opt_i64(v: i64) -> Option<i64> {
    (v >= 0).then_some(v)
}

impl BrokerConfig {
    /// Applies the settings of a `laminar.toml`. Unknown names are an error, so a typo is
    /// never silently ignored.
    pub fn apply_toml(&mut self, text: &str) -> Result<(), String> {
        // The parser's own message quotes the line, which may hold a password: only where.
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let line = e
                .span()
                .map_or(0, |span| text[..span.start].matches('\n').count() + 1);
            format!("laminar.toml, line {line}: {}", e.message())
        })?;
        for (key, value) in table {
            let s = match &value {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            self.set(&key, &s)?;
        }
        Ok(())
    }

    /// Sets `key` as given in `laminar.toml` or on the command line.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        self.set_value(key, value).map_err(|e| {
            // A refused secret is not repeated in the error (it goes to the terminal and logs).
            if crate::security::is_secret(key) && !value.is_empty() {
                e.replace(&format!("{value:?}"), crate::security::HIDDEN)
                    .replace(value, crate::security::HIDDEN)
            } else {
                e
            }
        })?;
        self.mark_set(key);
        Ok(())
    }

    /// Sets `key` without recording it as given at start (a dynamic broker config).
    pub fn set_value(&mut self, key: &str, value: &str) -> Result<(), String> {
        let int = || {
            value
                .parse::<i64>()
                .map_err(|_| format!("{key}: {value:?} is not an integer"))
        };
        let boolean = || {
            value
                .parse::<bool>()
                .map_err(|_| format!("{key}: {value:?} is not true or false"))
        };
        let positive = |v: i64| {
            if v > 0 {
                Ok(v as u64)
            } else {
                Err(format!("{key} must be positive"))
            }
        };
        if let Some(set) = self.security.set(key, value) {
            return set;
        }
        match key {
            "listeners" => self.listeners.set_listeners(value)?,
            "advertised.listeners" => self.listeners.set_advertised(value)?,
            "listener.security.protocol.map" => self.listeners.set_protocol_map(value)?,
            "inter.broker.listener.name" => self.listeners.set_inter_broker(value)?,
            "controller.listener.names" => self.listeners.set_controller(value)?,
            "log.dirs" => self.data_dir = PathBuf::from(value),
            "node.id" => self.node_id = int()? as i32,
            "controller.quorum.voters" => {
                self.controller_quorum_voters = laminar_cluster::parse_voters(value)?
            }
            "controller.quorum.secret.file" => {
                self.controller_quorum_secret_file =
                    (!value.trim().is_empty()).then(|| PathBuf::from(value.trim()))
            }
            "broker.heartbeat.interval.ms" => self.broker_heartbeat_interval_ms = positive(int()?)?,
            "broker.session.timeout.ms" => self.broker_session_timeout_ms = positive(int()?)?,
            "replica.lag.time.max.ms" => self.replica_lag_time_max_ms = positive(int()?)?,
            "auto.leader.rebalance.enable" => self.auto_leader_rebalance_enable = boolean()?,
            "leader.imbalance.check.interval.seconds" => {
                self.leader_imbalance_check_interval_seconds = positive(int()?)?
            }
            "min.insync.replicas" => {
                self.min_insync_replicas =
                    u16::try_from(positive(int()?)?).map_err(|_| format!("{key}: {value} is too large"))?
            }
            "default.replication.factor" => {
                self.default_replication_factor =
                    u16::try_from(positive(int()?)?).map_err(|_| format!("{key}: {value} is too large"))?
            }
            "auto.create.topics.enable" => self.auto_create_topics_enable = boolean()?,
            "num.partitions" => self.num_partitions = positive(int()?)? as u32,
            "log.retention.ms" => self.log_retention_ms = opt_i64(int()?),
            "log.retention.bytes" => self.log_retention_bytes = opt_i64(int()?).map(|v| v as u64),
            "log.segment.bytes" => self.log_segment_bytes = positive(int()?)?,
            "log.roll.ms" => self.log_roll_ms = Some(positive(int()?)?),
            "log.flush.interval.ms" => self.log_flush_interval_ms = Some(positive(int()?)?),
            "log.read.after.fsync" => self.log_read_after_fsync = boolean()?,
            "log.flush.interval.messages" => self.log_flush_interval_messages = Some(positive(int()?)?),
            "log.flush.offset.checkpoint.interval.ms" => {
                self.log_flush_offset_checkpoint_interval_ms = positive(int()?)?
            }
            "log.preallocate.bytes" => self.log_preallocate_bytes = int()?.max(0) as u64,
            "log.retention.check.interval.ms" => self.log_retention_check_interval_ms = positive(int()?)?,
            "log.cleanup.policy" => self.log_cleanup_policy = CleanupPolicy::parse(value)?,
            "log.cleaner.enable" => self.log_cleaner_enable = boolean()?,
            "log.cleaner.threads" => self.log_cleaner_threads = positive(int()?)? as usize,
            "log.cleaner.backoff.ms" => self.log_cleaner_backoff_ms = positive(int()?)?,
            "log.cleaner.dedupe.buffer.size" => {
                self.log_cleaner_dedupe_buffer_size = positive(int()?)? as usize
            }
            "log.cleaner.io.buffer.size" => self.log_cleaner_io_buffer_size = positive(int()?)? as usize,
            "log.cleaner.io.max.bytes.per.second" => {
                self.log_cleaner_io_max_bytes_per_second = match value {
                    "none" => None,
                    // Kafka's default is Double.MaxValue, and it takes a double.
                    _ => value
                        .parse::<f64>()
                        .ok()
                        .filter(|v| *v > 0.0)
                        .map(|v| v.min(u64::MAX as f64) as u64)
                        .map(Some)
                        .ok_or(format!("{key}: {value:?} is not a positive number"))?,
                }
            }
            "log.cleaner.min.cleanable.ratio" => {
                self.log_cleaner_min_cleanable_ratio = parse_ratio(key, value)?
            }
            "log.cleaner.min.compaction.lag.ms" => self.log_cleaner_min_compaction_lag_ms = int()?.max(0),
            "log.cleaner.max.compaction.lag.ms" => {
                self.log_cleaner_max_compaction_lag_ms = positive(int()?)? as i64
            }
            "log.cleaner.delete.retention.ms" => self.log_cleaner_delete_retention_ms = int()?.max(0),
            "log.message.timestamp.type" => self.log_message_timestamp_log_append = log_append_time(value)?,
            "message.max.bytes" => self.message_max_bytes = positive(int()?)? as usize,
            "socket.request.max.bytes" => self.socket_request_max_bytes = positive(int()?)? as usize,
            "queued.max.request.bytes" => self.queued_max_request_bytes = positive(int()?)? as usize,
            "max.connections" => self.max_connections = positive(int()?)? as usize,
            "max.connection.creation.rate" => {
                self.max_connection_creation_rate = Some(positive(int()?)?.min(u32::MAX as u64) as u32)
            }
            "max.connections.per.ip" => self.max_connections_per_ip = positive(int()?)? as usize,
            "max.connections.per.ip.overrides" => {
                self.max_connections_per_ip_overrides = crate::listeners::parse_ip_overrides(value)?
            }
            "queued.max.unauthenticated.request.bytes" => {
                self.queued_max_unauthenticated_request_bytes = positive(int()?)? as usize
            }
            "max.inflight.requests.per.connection" => {
                self.max_inflight_requests_per_connection = positive(int()?)? as usize
            }
            "num.network.threads" => self.num_network_threads = positive(int()?)? as usize,
            "num.io.threads" => self.num_io_threads = positive(int()?)? as usize,
            "num.storage.threads" => self.num_storage_threads = positive(int()?)? as usize,
            "group.initial.rebalance.delay.ms" => {
                self.group_initial_rebalance_delay_ms = int()?.max(0) as u64
            }
            "offsets.retention.minutes" => self.offsets_retention_minutes = positive(int()?)?,
            "offsets.topic.segment.bytes" => self.offsets_topic_segment_bytes = positive(int()?)?,
            "producer.id.expiration.ms" => self.producer_id_expiration_ms = positive(int()?)?,
            "producer.id.expiration.check.interval.ms" => {
                self.producer_id_expiration_check_interval_ms = positive(int()?)?
            }
            "transaction.max.timeout.ms" => self.transaction_max_timeout_ms = positive(int()?)?,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms" => {
                self.transaction_abort_timed_out_transaction_cleanup_interval_ms = positive(int()?)?
            }
            "transactional.id.expiration.ms" => self.transactional_id_expiration_ms = positive(int()?)?,
            "transaction.state.log.segment.bytes" => {
                self.transaction_state_log_segment_bytes = positive(int()?)?
            }
            "socket.send.chunk.bytes" => self.socket_send_chunk_bytes = positive(int()?)? as usize,
            "socket.send.buffer.bytes" => {
                self.socket_send_buffer_bytes = opt_i64(int()?).filter(|&v| v > 0).map(|v| v as usize)
            }
            "metrics.listeners" => {
                self.metrics_listen = match value {
                    "none" | "" => None,
                    v => Some(v.parse().map_err(|e| format!("{key}: {e}"))?),
                }
            }
            "event.loop.stall.threshold.ms" => self.event_loop_stall_threshold_ms = positive(int()?)?,
            _ => return Err(format!("unknown setting {key:?}")),
        }
        Ok(())
    }

    /// Records that `key` was given (a command-line flag that sets a field directly).
    pub fn mark_set(&mut self, key: &str) {
        if let Some(s) = SETTINGS.iter().find(|s| s.name == key) {
            self.set_names.insert(s.name);
        }
    }

    /// A setting's value, as `describe` prints it; `None` for a name that is not a setting.
    pub fn value_of(&self, key: &str) -> Option<String> {
        self.describe().lines().find_map(|l| {
            l.strip_prefix(key)
                .and_then(|r| r.strip_prefix(" = "))
                .map(str::to_string)
        })
    }

    /// The settings in effect, one `name = value` per line, for the startup log.
    pub fn describe(&self) -> String {
        let o = |v: Option<i64>| v.map_or("-1".to_string(), |v| v.to_string());
        let u = |v: Option<u64>| v.map_or("none".to_string(), |v| v.to_string());
        let mut lines = self.listeners.describe();
        lines.extend(self.security.describe());
        lines.extend([
            format!("log.dirs = {}", self.data_dir.display()),
            format!("node.id = {}", self.node_id),
            format!(
                "controller.quorum.voters = {}",
                if self.controller_quorum_voters.is_empty() {
                    "none".to_string()
                } else {
                    self.controller_quorum_voters
                        .iter()
                        .map(|v| format!("{}@{}", v.id, v.addr))
                        .collect::<Vec<_>>()
                        .join(",")
                }
            ),
            format!(
                "broker.heartbeat.interval.ms = {}",
                self.broker_heartbeat_interval_ms
            ),
            format!("broker.session.timeout.ms = {}", self.broker_session_timeout_ms),
            format!("default.replication.factor = {}", self.default_replication_factor),
            format!("replica.lag.time.max.ms = {}", self.replica_lag_time_max_ms),
            format!(
                "auto.leader.rebalance.enable = {}",
                self.auto_leader_rebalance_enable
            ),
            format!(
                "leader.imbalance.check.interval.seconds = {}",
                self.leader_imbalance_check_interval_seconds
            ),
            format!("min.insync.replicas = {}", self.min_insync_replicas),
            format!("auto.create.topics.enable = {}", self.auto_create_topics_enable),
            format!("num.partitions = {}", self.num_partitions),
            format!("log.retention.ms = {}", o(self.log_retention_ms)),
            format!(
                "log.retention.bytes = {}",
                o(self.log_retention_bytes.map(|v| v as i64))
            ),
            format!("log.segment.bytes = {}", self.log_segment_bytes),
            format!("log.flush.interval.ms = {}", u(self.log_flush_interval_ms)),
            format!("log.read.after.fsync = {}", self.log_read_after_fsync),
            format!(
                "log.flush.interval.messages = {}",
                u(self.log_flush_interval_messages)
            ),
            format!(
                "log.flush.offset.checkpoint.interval.ms = {}",
                self.log_flush_offset_checkpoint_interval_ms
            ),
            format!("log.cleanup.policy = {}", self.log_cleanup_policy),
            format!("log.cleaner.enable = {}", self.log_cleaner_enable),
            format!("log.cleaner.threads = {}", self.log_cleaner_threads),
            format!("log.cleaner.backoff.ms = {}", self.log_cleaner_backoff_ms),
            format!(
                "log.cleaner.dedupe.buffer.size = {}",
                self.log_cleaner_dedupe_buffer_size
            ),
            format!("log.cleaner.io.buffer.size = {}", self.log_cleaner_io_buffer_size),
            format!(
                "log.cleaner.io.max.bytes.per.second = {}",
                u(self.log_cleaner_io_max_bytes_per_second)
            ),
            format!(
                "log.cleaner.min.cleanable.ratio = {}",
                self.log_cleaner_min_cleanable_ratio
            ),
            format!(
                "log.cleaner.min.compaction.lag.ms = {}",
                self.log_cleaner_min_compaction_lag_ms
            ),
            format!(
                "log.cleaner.max.compaction.lag.ms = {}",
                self.log_cleaner_max_compaction_lag_ms
            ),
            format!(
                "log.cleaner.delete.retention.ms = {}",
                self.log_cleaner_delete_retention_ms
            ),
            format!(
                "log.message.timestamp.type = {}",
                if self.log_message_timestamp_log_append {
                    "LogAppendTime"
                } else {
                    "CreateTime"
                }
            ),
            format!("message.max.bytes = {}", self.message_max_bytes),
            format!("socket.request.max.bytes = {}", self.socket_request_max_bytes),
            format!("queued.max.request.bytes = {}", self.queued_max_request_bytes),
            format!("max.connections = {}", self.max_connections),
            format!("max.connections.per.ip = {}", self.max_connections_per_ip),
            format!(
                "max.connections.per.ip.overrides = {}",
                self.max_connections_per_ip_overrides
                    .iter()
                    .map(|(ip, n)| format!("{ip}:{n}"))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            format!(
                "queued.max.unauthenticated.request.bytes = {}",
                self.queued_max_unauthenticated_request_bytes
            ),
            format!(
                "max.connection.creation.rate = {}",
                self.max_connection_creation_rate
                    .map_or("none".to_string(), |r| r.to_string())
            ),
            format!(
                "socket.send.buffer.bytes = {}",
                self.socket_send_buffer_bytes.map_or(-1, |v| v as i64)
            ),
            format!(
                "max.inflight.requests.per.connection = {}",
                self.max_inflight_requests_per_connection
            ),
            format!("num.network.threads = {}", self.num_network_threads),
            format!("num.io.threads = {}", self.num_io_threads),
            format!("num.storage.threads = {}", self.num_storage_threads),
            format!(
                "group.initial.rebalance.delay.ms = {}",
                self.group_initial_rebalance_delay_ms
            ),
            format!("offsets.retention.minutes = {}", self.offsets_retention_minutes),
            format!(
                "offsets.topic.segment.bytes = {}",
                self.offsets_topic_segment_bytes
            ),
            format!("producer.id.expiration.ms = {}", self.producer_id_expiration_ms),
            format!(
                "producer.id.expiration.check.interval.ms = {}",
                self.producer_id_expiration_check_interval_ms
            ),
            format!("transaction.max.timeout.ms = {}", self.transaction_max_timeout_ms),
            format!(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms = {}",
                self.transaction_abort_timed_out_transaction_cleanup_interval_ms
            ),
            format!(
                "transactional.id.expiration.ms = {}",
                self.transactional_id_expiration_ms
            ),
            format!(
                "transaction.state.log.segment.bytes = {}",
                self.transaction_state_log_segment_bytes
            ),
            format!(
                "metrics.listeners = {}",
                self.metrics_listen.map_or("none".to_string(), |a| a.to_string())
            ),
            format!(
                "event.loop.stall.threshold.ms = {}",
                self.event_loop_stall_threshold_ms
            ),
        ]);
        lines.join("\n")
    }
}

/// Whether a `message.timestamp.type` value is LogAppendTime (or CreateTime).
pub fn log_append_time(value: &str) -> Result<bool, String> {
    match value {
        "CreateTime" => Ok(false),
        "LogAppendTime" => Ok(true),
        other => Err(format!(
            "message.timestamp.type: {other:?} is neither CreateTime nor LogAppendTime"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_settings_use_kafka_names_and_typos_are_errors() {
        let mut c = BrokerConfig::default();
        c.apply_toml(
            r#"
"auto.create.topics.enable" = false
"num.partitions" = 3
"log.retention.ms" = -1
"listeners" = "127.0.0.1:19999"
"advertised.listeners" = "broker.example:9092"
"socket.send.buffer.bytes" = 65536
"#,
        )
        .unwrap();
        assert_eq!(c.socket_send_buffer_bytes, Some(65_536));
        c.set("socket.send.buffer.bytes", "-1").unwrap();
        assert_eq!(c.socket_send_buffer_bytes, None);
        assert!(!c.auto_create_topics_enable);
        assert_eq!(c.num_partitions, 3);
        assert_eq!(c.log_retention_ms, None);
        let l = c.listeners.resolve(&["127.0.0.1:19999".parse().unwrap()]);
        assert_eq!((l[0].host.as_str(), l[0].port), ("broker.example", 9092));
        assert!(c
            .apply_toml(r#""auto.create.topic.enable" = true"#)
            .unwrap_err()
            .contains("unknown setting"));
        assert!(c.apply_toml(r#""num.partitions" = "many""#).is_err());
        assert!(c.apply_toml(r#""num.partitions" = 0"#).is_err());
        // Every documented setting is accepted by `set`.
        for s in SETTINGS {
            let value = match s.name {
                "listeners" | "metrics.listeners" => "127.0.0.1:1",
                "advertised.listeners" => "h:1",
                "listener.security.protocol.map" => "PLAINTEXT:PLAINTEXT",
                "inter.broker.listener.name" => "PLAINTEXT",
                "sasl.enabled.mechanisms" => "PLAIN,SCRAM-SHA-512",
                "log.dirs" => "/tmp/x",
                "auto.create.topics.enable"
                | "log.cleaner.enable"
                | "auto.leader.rebalance.enable"
                | "log.read.after.fsync" => "true",
                "log.cleanup.policy" => "compact,delete",
                "log.cleaner.min.cleanable.ratio" => "0.25",
                "log.message.timestamp.type" => "LogAppendTime",
                "controller.quorum.voters" => "1@127.0.0.1:1,2@127.0.0.1:2",
                "max.connections.per.ip.overrides" => "127.0.0.1:5,[::1]:7",
                _ => "5",
            };
            c.set(s.name, value).unwrap_or_else(|e| panic!("{}: {e}", s.name));
        }
    }
}
