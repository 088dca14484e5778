//! The `laminar` command: a thin front end that only parses arguments and wires crates.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

mod admin;
mod command_config;
use laminar_perf::log_perf::{self, LogPerfConfig};
use laminar_perf::plot;
use laminar_records::Compression;

#[derive(Parser)]
#[command(
    name = "laminar",
    version,
    about = "Laminar: a Kafka-compatible streaming log broker"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Kafka's client properties for the commands that talk to a broker (security.protocol,
    /// sasl.mechanism, sasl.jaas.config, ssl.truststore.*), as Kafka's tools take them.
    #[arg(long, global = true)]
    command_config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker. With no options: 127.0.0.1:9092, data in ./data, node 0.
    Serve(ServeArgs),
    /// Manage topics on any Kafka-compatible broker (Laminar or Apache Kafka).
    Topics {
        #[command(subcommand)]
        command: TopicsCommand,
    },
    /// The brokers of a cluster and its active controller.
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// Inspect consumer groups and reset their committed offsets.
    Groups {
        #[command(subcommand)]
        command: GroupsCommand,
    },
    /// Client byte-rate quotas (consumer_byte_rate, producer_byte_rate) per client-id.
    Quotas {
        #[command(subcommand)]
        command: QuotasCommand,
    },
    /// ACLs (DescribeAcls, CreateAcls, DeleteAcls), as `kafka-acls` manages them.
    Acls {
        #[command(subcommand)]
        command: AclsCommand,
    },
    /// SCRAM users (DescribeUserScramCredentials, AlterUserScramCredentials), as
    /// `kafka-configs --entity-type users` manages them.
    Users {
        #[command(subcommand)]
        command: UsersCommand,
    },
    /// Performance suites that print latency percentiles and throughput.
    Perf {
        #[command(subcommand)]
        suite: PerfSuite,
    },
}

#[derive(Subcommand)]
enum TopicsCommand {
    /// List topic names.
    List {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
    /// Show a topic's partitions and configs.
    Describe {
        topic: String,
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
    /// Create a topic.
    Create {
        topic: String,
        /// Partitions (default: the broker's num.partitions).
        #[arg(long, default_value_t = -1)]
        partitions: i32,
        /// Replicas of each partition (default: the broker's default.replication.factor).
        #[arg(long, default_value_t = -1)]
        replication_factor: i16,
        /// A topic config, as name=value; may be repeated.
        #[arg(long = "config", value_parser = parse_key_value)]
        configs: Vec<(String, String)>,
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
    /// Set or remove a topic's configs (IncrementalAlterConfigs); a removed one falls back to
    /// the broker's default.
    Alter {
        topic: String,
        /// A config to set, as name=value; may be repeated.
        #[arg(long = "add-config", value_parser = parse_key_value)]
        add: Vec<(String, String)>,
        /// A config to remove; may be repeated.
        #[arg(long = "delete-config")]
        delete: Vec<String>,
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
    /// Delete a topic and its data.
    Delete {
        topic: String,
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// The cluster id, the active controller, and every broker (fenced ones marked).
    Describe {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
}

#[derive(Subcommand)]
enum QuotasCommand {
    /// Every client-id quota (and the default client's).
    Describe {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
    /// Set or remove quotas of one client-id, or of the default client (--default).
    Alter {
        #[arg(long, required_unless_present = "default", conflicts_with = "default")]
        client_id: Option<String>,
        #[arg(long)]
        default: bool,
        /// A quota to set, as name=bytes_per_second; may be repeated.
        #[arg(long = "add-config", value_parser = parse_key_value)]
        add: Vec<(String, String)>,
        /// A quota to remove; may be repeated.
        #[arg(long = "delete-config")]
        delete: Vec<String>,
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
}

/// Which ACLs: kafka-acls's flags.
#[derive(clap::Args)]
struct AclArgs {
    /// Principals allowed (`User:alice`); may be repeated.
    #[arg(long = "allow-principal")]
    allow: Vec<String>,
    /// Principals denied; may be repeated.
    #[arg(long = "deny-principal")]
    deny: Vec<String>,
    /// Operations (Read, Write, Create, Delete, Alter, Describe, ClusterAction,
    /// DescribeConfigs, AlterConfigs, IdempotentWrite, All); may be repeated.
    #[arg(long = "operation")]
    operations: Vec<String>,
    #[arg(long)]
    topic: Option<String>,
    #[arg(long)]
    group: Option<String>,
    #[arg(long = "transactional-id")]
    transactional_id: Option<String>,
    #[arg(long)]
    cluster: bool,
    /// literal or prefixed.
    #[arg(long = "resource-pattern-type", default_value = "literal")]
    pattern: String,
    /// The client host the ACL is for.
    #[arg(long = "host", default_value = "*")]
    host: String,
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
}

#[derive(Subcommand)]
enum AclsCommand {
    /// Every ACL, or those on the resource given.
    List(AclArgs),
    /// Adds an ACL for each principal and operation on the resource.
    Add(AclArgs),
    /// Removes the ACLs that match.
    Remove(AclArgs),
}

#[derive(Subcommand)]
enum UsersCommand {
    /// Every SCRAM user (or the ones named) with its mechanisms and iterations; never a
    /// password, which the broker does not have.
    Describe {
        #[arg(long = "user")]
        users: Vec<String>,
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
    /// Set a user's SCRAM credential for a mechanism (salted and hashed here; the password
    /// is not sent).
    Alter {
        #[arg(long)]
        user: String,
        #[arg(long, default_value = "SCRAM-SHA-512")]
        mechanism: String,
        /// The password; without it, the first line of standard input (off the command
        /// line and the process list).
        #[arg(long)]
        password: Option<String>,
        #[arg(long, default_value_t = 4096)]
        iterations: u32,
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
    /// Remove a user's credential for a mechanism.
    Delete {
        #[arg(long)]
        user: String,
        #[arg(long, default_value = "SCRAM-SHA-512")]
        mechanism: String,
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
}

#[derive(Subcommand)]
enum GroupsCommand {
    /// List groups and their states.
    List {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
    /// Members, assignments, and committed offset and lag per partition.
    Describe {
        group: String,
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
    /// Set a group's committed offsets for a topic. The group must have no active members.
    ResetOffsets {
        group: String,
        #[arg(long)]
        topic: String,
        #[arg(long, conflicts_with_all = ["to_latest", "to_timestamp"])]
        to_earliest: bool,
        #[arg(long, conflicts_with = "to_timestamp")]
        to_latest: bool,
        /// Milliseconds since the epoch: the first offset at or after it.
        #[arg(long)]
        to_timestamp: Option<i64>,
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
}

fn parse_key_value(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{s:?} is not name=value"))
}

#[derive(Args)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
    /// Data directory.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// host:port that clients are told to connect to (default: the listen address).
    #[arg(long)]
    advertised: Option<String>,
    /// A laminar.toml of settings by their Kafka names (see docs/configuration.md).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Address of the Prometheus endpoint (GET /metrics), or "none" (default 127.0.0.1:9644).
    #[arg(long)]
    metrics_listen: Option<String>,
    /// A setting by its Kafka name, as name=value, over laminar.toml's; may be repeated
    /// (`--set node.id=2 --set controller.quorum.voters=1@127.0.0.1:9093,...`).
    #[arg(long = "set", value_parser = parse_key_value)]
    settings: Vec<(String, String)>,
    /// The log's lines: `text` (RFC 3339 UTC time, level, message) or `json` (one object a
    /// line, the same three fields), on standard error.
    #[arg(long, value_enum, default_value_t = LogFormatArg::Text)]
    log_format: LogFormatArg,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormatArg {
    Text,
    Json,
}

#[derive(Subcommand)]
enum PerfSuite {
    /// Drive the storage engine in-process (no network): appends and reads, with flushing.
    ///
    /// Writers append batches of --set-size records of --message-size bytes, round-robin over
    /// the partitions. Each record value is about half compressible: its first half is random
    /// bytes, its second half a repeated 16-byte pattern. Readers follow every partition from
    /// its start while the writers run and verify every batch's CRC. Append latency is one
    /// append call (validation, offset assignment, pwrite); read latency is one read call
    /// (index lookup, header walk, pread of up to --read-bytes). With --records-per-s the
    /// writers append on a fixed schedule, and an append that starts late counts its latency
    /// from when it was due.
    /// MB are 10^6 bytes of record batches as stored.
    Log(PerfLogArgs),
    /// Draw the series that runs saved (perf latency or perf log --series-out) on one pair of
    /// charts: PREFIX-over-time.svg (latency against time) and PREFIX-percentiles.svg
    /// (latency by percentile, HdrHistogram's scale); no over-time chart when no series has
    /// a time series. Prints the paths written. Each file holds one series or an array.
    Plot {
        /// The charts' title, e.g. the scenario.
        #[arg(long, default_value = "latency")]
        title: String,
        /// Path prefix of the two SVG files.
        #[arg(long)]
        out: PathBuf,
        #[arg(required = true, value_name = "FILE.json")]
        files: Vec<PathBuf>,
    },
}

#[derive(Args)]
struct PerfLogArgs {
    /// Directory for the logs; must be empty or new. What the run writes there is removed
    /// afterwards unless --keep. Default: a fresh directory under the current one.
    #[arg(long)]
    dir: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    partitions: u32,
    /// Bytes of each record value.
    #[arg(long, default_value_t = 1024)]
    message_size: usize,
    /// Records per batch (per append).
    #[arg(long, default_value_t = 100)]
    set_size: usize,
    /// none, gzip, snappy, lz4 or zstd. Batches are compressed once, before timing starts.
    #[arg(long, default_value = "none", value_parser = parse_compression)]
    compression: Compression,
    /// Records to append in total.
    #[arg(long, default_value_t = 1_000_000)]
    messages: u64,
    /// Reader threads; each reads every partition from the start.
    #[arg(long, default_value_t = 1)]
    readers: usize,
    /// Writer threads.
    #[arg(long, default_value_t = 1)]
    writers: usize,
    /// Byte budget of one read.
    #[arg(long, default_value_t = 1 << 20)]
    read_bytes: u64,
    /// Append at this fixed rate (records per second, over all writers) instead of as fast
    /// as possible. An append that starts late counts its latency from when it was due.
    #[arg(long)]
    records_per_s: Option<u64>,
    /// Flush (fdatasync) each log at least this often. Default: never during the run.
    #[arg(long)]
    flush_interval_ms: Option<u64>,
    /// Flush each log once this many records are unflushed.
    #[arg(long)]
    flush_messages: Option<u64>,
    #[arg(long, default_value_t = 1 << 30)]
    segment_bytes: u64,
    /// fallocate step for data files; 0 disables preallocation.
    #[arg(long, default_value_t = 32 << 20)]
    preallocate_bytes: u64,
    /// Durable mode: every append waits for the fsync that covers it, as acks=all does
    /// (group commit on the store's flusher threads).
    #[arg(long)]
    durable: bool,
    /// In durable mode, how many appends of one writer may wait for their fsync at once (a
    /// producer's max.in.flight.requests.per.connection).
    #[arg(long, default_value_t = 5)]
    durable_inflight: usize,
    /// Flusher threads, shared by every partition (the broker's default is 2).
    #[arg(long, default_value_t = laminar_perf::log_perf::default_flush_threads())]
    flush_threads: usize,
    /// Keep the data directory afterwards.
    #[arg(long)]
    keep: bool,
    /// Print exactly one JSON object on stdout instead of a table.
    #[arg(long)]
    json: bool,
    /// Also write the append latency over time (max per 100 ms, by start or due time) and by
    /// percentile to this file, for `laminar perf plot`; with --durable, as an array of two
    /// series: append, then durable latency.
    #[arg(long, value_name = "FILE")]
    series_out: Option<PathBuf>,
    /// The series' legend in the charts; the durable series is "LABEL durable". Default:
    /// "perf log <partitions>p <records/s or max> flush <interval or off>", plus
    /// "inflight <n>" with --durable.
    #[arg(long)]
    label: Option<String>,
}

fn parse_compression(s: &str) -> Result<Compression, String> {
    Compression::parse(s)
        .ok_or_else(|| format!("unknown compression {s:?}: use none, gzip, snappy, lz4 or zstd"))
}

fn perf_log(args: PerfLogArgs) -> anyhow::Result<()> {
    let dir = match args.dir {
        Some(d) => d,
        None => std::env::current_dir()?.join(format!("laminar-perf-log-{}", std::process::id())),
    };
    let cfg = LogPerfConfig {
        dir,
        partitions: args.partitions,
        message_size: args.message_size,
        set_size: args.set_size,
        compression: args.compression,
        messages: args.messages,
        readers: args.readers,
        writers: args.writers,
        read_bytes: args.read_bytes,
        records_per_s: args.records_per_s,
        flush_interval_ms: args.flush_interval_ms,
        flush_messages: args.flush_messages,
        segment_bytes: args.segment_bytes,
        preallocate_bytes: args.preallocate_bytes,
        durable_inflight: args.durable.then_some(args.durable_inflight),
        flush_threads: args.flush_threads,
        keep: args.keep,
        series_out: args.series_out,
        label: args.label,
    };
    let report = log_perf::run(&cfg).context("perf log")?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        report.print_table();
    }
    Ok(())
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    laminar_metrics::log::set_format(match args.log_format {
        LogFormatArg::Text => laminar_metrics::log::LogFormat::Text,
        LogFormatArg::Json => laminar_metrics::log::LogFormat::Json,
    });
    let mut config = laminar_broker::BrokerConfig::default();
    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
        config.apply_toml(&text).map_err(anyhow::Error::msg)?;
    }
    if let Some(l) = args.listen {
        // One PLAINTEXT listener there; the rest of the listener settings stay.
        config.listeners.listeners = laminar_broker::listeners::ListenerSettings::plaintext(l).listeners;
        config.mark_set("listeners");
    }
    if let Some(d) = args.data_dir {
        config.data_dir = d;
        config.mark_set("log.dirs");
    }
    if let Some(a) = &args.advertised {
        config
            .set("advertised.listeners", a)
            .map_err(anyhow::Error::msg)?;
    }
    if let Some(m) = &args.metrics_listen {
        config.set("metrics.listeners", m).map_err(anyhow::Error::msg)?;
    }
    for (name, value) in &args.settings {
        config.set(name, value).map_err(anyhow::Error::msg)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.num_network_threads)
        .thread_name("laminar-net")
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let broker = laminar_broker::RunningBroker::start(config)
            .await
            .context("start broker")?;
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        laminar_broker::info!("shutting down: finishing requests in flight, then flushing");
        broker.shutdown().await.context("clean shutdown")?;
        // Give the log thread a moment to print the last lines.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        Ok(())
    })
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(path) = &cli.command_config {
        command_config::set(command_config::load(path)?);
    }
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Cluster { command } => match command {
            ClusterCommand::Describe { bootstrap } => admin::cluster_describe(&bootstrap),
        },
        Command::Groups { command } => match command {
            GroupsCommand::List { bootstrap } => admin::groups_list(&bootstrap),
            GroupsCommand::Describe { group, bootstrap } => admin::groups_describe(&bootstrap, &group),
            GroupsCommand::ResetOffsets {
                group,
                topic,
                to_earliest,
                to_latest,
                to_timestamp,
                bootstrap,
            } => {
                let to = match (to_earliest, to_latest, to_timestamp) {
                    (true, _, _) => admin::ResetTo::Earliest,
                    (_, true, _) => admin::ResetTo::Latest,
                    (_, _, Some(t)) => admin::ResetTo::Timestamp(t),
                    _ => anyhow::bail!("say where to: --to-earliest, --to-latest or --to-timestamp MS"),
                };
                admin::groups_reset(&bootstrap, &group, &topic, to)
            }
        },
        Command::Topics { command } => match command {
            TopicsCommand::List { bootstrap } => admin::list(&bootstrap),
            TopicsCommand::Describe { topic, bootstrap } => admin::describe(&bootstrap, &topic),
            TopicsCommand::Create {
                topic,
                partitions,
                replication_factor,
                configs,
                bootstrap,
            } => admin::create(&bootstrap, &topic, partitions, replication_factor, &configs),
            TopicsCommand::Alter {
                topic,
                add,
                delete,
                bootstrap,
            } => admin::alter(&bootstrap, &topic, &add, &delete),
            TopicsCommand::Delete { topic, bootstrap } => admin::delete(&bootstrap, &topic),
        },
        Command::Quotas { command } => match command {
            QuotasCommand::Describe { bootstrap } => admin::quotas_describe(&bootstrap),
            QuotasCommand::Alter {
                client_id,
                default: _,
                add,
                delete,
                bootstrap,
            } => admin::quotas_alter(&bootstrap, client_id.as_deref(), &add, &delete),
        },
        Command::Acls { command } => match command {
            AclsCommand::List(a) => admin::acls(admin::AclAction::List, &acl_spec(a)?),
            AclsCommand::Add(a) => admin::acls(admin::AclAction::Add, &acl_spec(a)?),
            AclsCommand::Remove(a) => admin::acls(admin::AclAction::Remove, &acl_spec(a)?),
        },
        Command::Users { command } => match command {
            UsersCommand::Describe { users, bootstrap } => admin::users_describe(&bootstrap, &users),
            UsersCommand::Alter {
                user,
                mechanism,
                password,
                iterations,
                bootstrap,
            } => {
                let password = match password {
                    Some(p) => p,
                    None => {
                        let mut line = String::new();
                        std::io::stdin()
                            .read_line(&mut line)
                            .context("reading the password from standard input")?;
                        line.trim_end_matches(['\r', '\n']).to_string()
                    }
                };
                anyhow::ensure!(!password.is_empty(), "an empty password");
                admin::users_alter(&bootstrap, &user, &mechanism, Some((&password, iterations)))
            }
            UsersCommand::Delete {
                user,
                mechanism,
                bootstrap,
            } => admin::users_alter(&bootstrap, &user, &mechanism, None),
        },
        Command::Perf { suite } => match suite {
            PerfSuite::Log(args) => perf_log(args),
            PerfSuite::Plot { title, out, files } => {
                let mut series = Vec::new();
                for f in &files {
                    series.extend(plot::read_series(f)?);
                }
                for path in plot::write_charts(&out, &title, &series)? {
                    println!("{}", path.display());
                }
                Ok(())
            }
        },
    }
}

/// kafka-acls's flags as the request's fields.
fn acl_spec(a: AclArgs) -> anyhow::Result<admin::AclSpec> {
    let resources = [
        a.topic.map(|t| (2i8, t)),
        a.group.map(|g| (3, g)),
        a.cluster.then(|| (4, "kafka-cluster".to_string())),
        a.transactional_id.map(|t| (5, t)),
    ];
    let mut given = resources.into_iter().flatten();
    let resource = given.next();
    if given.next().is_some() {
        anyhow::bail!("one resource at a time: --topic, --group, --cluster or --transactional-id");
    }
    let pattern = match a.pattern.to_ascii_lowercase().as_str() {
        "literal" => 3,
        "prefixed" => 4,
        other => anyhow::bail!("--resource-pattern-type {other}: literal or prefixed"),
    };
    let operations = a
        .operations
        .iter()
        .map(|o| {
            admin::operation_code(o).ok_or_else(|| anyhow::anyhow!("--operation {o}: not an ACL operation"))
        })
        .collect::<anyhow::Result<Vec<i8>>>()?;
    let principals = a
        .allow
        .into_iter()
        .map(|p| (p, 3i8))
        .chain(a.deny.into_iter().map(|p| (p, 2i8)))
        .collect();
    Ok(admin::AclSpec {
        resource,
        pattern,
        operations,
        principals,
        host: a.host,
        bootstrap: a.bootstrap,
    })
}
