//! `laminar-load`: the scenarios' client load, the delivery verifier and hostile clients,
//! through librdkafka, against any Kafka-compatible broker. A binary of its own so that the
//! broker (`laminar`) builds without librdkafka.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "laminar-load",
    version,
    about = "Drive Kafka clients (librdkafka) against any Kafka-compatible broker and measure"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Produce as fast as possible into a topic of any Kafka-compatible broker (through
    /// librdkafka, acks=1): the data a catching-up consumer reads in scenarios S1 and S2.
    Fill {
        #[command(flatten)]
        config: laminar_load::client_perf::FillConfig,
        #[arg(long)]
        json: bool,
    },
    /// Produce at a fixed rate to any Kafka-compatible broker (through librdkafka) and report
    /// each record's produce latency (send to delivery report), optionally while a consumer
    /// reads another topic from its start (scenarios S1, S2, S3).
    Latency {
        #[command(flatten)]
        config: laminar_load::client_perf::LatencyConfig,
        #[arg(long)]
        json: bool,
    },
    /// One producer per partition at a fixed rate (each on its own connection) and a consumer
    /// reading every partition from its end, against any Kafka-compatible broker: produce and
    /// end-to-end latency per partition, and for the partitions other than --watch-partition
    /// together (scenario S4: one partition's disk stalls).
    Partitions {
        #[command(flatten)]
        config: laminar_load::partitions::PartitionsConfig,
        #[arg(long)]
        json: bool,
    },
    /// Check delivery, as Kafka's validate_delivery does: produce at a fixed rate with the
    /// idempotent producer at acks=all (through librdkafka) to any Kafka-compatible broker,
    /// record every acknowledged (partition, offset, record), then read every partition back
    /// and count lost, duplicated, reordered and corrupted records. Rides out a broker that
    /// dies and comes back during the run.
    Verify {
        #[command(flatten)]
        config: laminar_load::verify::VerifyConfig,
        /// Print one JSON object with the counts.
        #[arg(long)]
        json: bool,
    },
    /// Run producers (idempotent, acks=all), transactional producers and consumers in a group
    /// (read_committed) against any Kafka-compatible broker while something else breaks it,
    /// record the whole history (every acknowledgement, transaction outcome, assignment and
    /// poll), read every partition back, and report every anomaly: lost, duplicated or
    /// reordered records, non-monotonic or skipping polls, an offset holding two records,
    /// aborted reads, torn transactions, corrupted records.
    History {
        #[command(flatten)]
        config: laminar_load::history::workload::WorkloadConfig,
        #[arg(long)]
        json: bool,
    },
    /// Check a history that `history --out` wrote again.
    Check {
        file: std::path::PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Check a history that `history --out` wrote against its topic as it stands now (after
    /// later faults): read the topic again to the run's fence records; what the earlier read
    /// found must still be there, at the same offsets.
    Reread {
        file: std::path::PathBuf,
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        #[arg(long)]
        json: bool,
    },
    /// Hostile clients, one kind per phase, against any Kafka-compatible broker, while a
    /// well-behaved producer (librdkafka) sends at a fixed rate: idle connections, consumers
    /// that never read their responses, a connection flood, frames announcing 100 MB that
    /// never come, decompression bombs, requests with huge counts. Per phase: the producer's
    /// latency against the baseline phase, the broker's RSS (--broker-pid), and what the
    /// hostile clients saw (an error code, a closed connection, or no answer).
    Hostile {
        #[command(flatten)]
        config: laminar_load::hostile::HostileConfig,
        #[arg(long)]
        json: bool,
    },
    /// Consumers idle in long poll against any Kafka-compatible broker: one connection per
    /// partition of a topic where nothing is written, each fetching again as soon as it is
    /// answered (Fetch v4, 500 ms max wait). Prints "ready" on stderr once connected, and at
    /// the end how many fetches were answered, and how many before their wait ended.
    IdleFetchers {
        #[command(flatten)]
        config: laminar_load::idle_fetchers::IdleFetchersConfig,
        #[arg(long)]
        json: bool,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Fill { config, json } => {
            let report = laminar_load::client_perf::fill(&config)?;
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                println!(
                    "filled {} with {} records in {:.1} s: {:.1} MB/s",
                    report.config.topic, report.records, report.seconds, report.mb_per_s
                );
            }
            Ok(())
        }
        Command::Latency { config, json } => {
            let report = laminar_load::client_perf::latency(&config)?;
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                report.print_table();
            }
            Ok(())
        }
        Command::Partitions { config, json } => {
            let r = laminar_load::partitions::run(&config)?;
            if json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                let ms4 = |p: &laminar_metrics::Percentiles| {
                    let ms = |us: u64| us as f64 / 1000.0;
                    format!(
                        "{:.2}/{:.2}/{:.2}/{:.2}",
                        ms(p.p50),
                        ms(p.p99),
                        ms(p.p999),
                        ms(p.max)
                    )
                };
                println!("sent {}, delivered {}, failed {}", r.sent, r.delivered, r.failed);
                println!("partition  produce p50/p99/p99.9/max ms  end-to-end p50/p99/p99.9/max ms");
                for p in &r.partitions {
                    println!(
                        "{:>9}  {}  {}",
                        p.partition,
                        ms4(&p.produce_us),
                        ms4(&p.end_to_end_us)
                    );
                }
                println!(
                    "{:>9}  {}  {}",
                    "others",
                    ms4(&r.others_produce_us),
                    ms4(&r.others_end_to_end_us)
                );
            }
            Ok(())
        }
        Command::Verify { config, json } => {
            let r = laminar_load::verify::verify(&config)?;
            if json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                println!(
                    "{}: sent {}, acked {}, not acked {}, read back {} in {:.1} s\n\
                     lost {}, duplicated {}, reordered {}, corrupted {} \
                     (acked at another offset {}, not acked but present {}, producer restarts {})",
                    config.topic,
                    r.sent,
                    r.acked,
                    r.not_acked,
                    r.read,
                    r.seconds,
                    r.lost,
                    r.duplicated,
                    r.reordered,
                    r.corrupted,
                    r.moved,
                    r.not_acked_present,
                    r.producer_restarts
                );
            }
            Ok(())
        }
        Command::History { config, json } => {
            let r = laminar_load::history::workload::run(&config)?;
            if json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                println!(
                    "{}: {:.1} s, producer restarts {}",
                    config.topic, r.seconds, r.producer_restarts
                );
                print_history(&r.check);
            }
            Ok(())
        }
        Command::Check { file, json } => {
            let text = std::fs::read_to_string(&file)?;
            let r = laminar_load::history::check(&laminar_load::history::read(&text)?);
            if json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                print_history(&r);
            }
            Ok(())
        }
        Command::Reread {
            file,
            bootstrap,
            json,
        } => {
            let text = std::fs::read_to_string(&file)?;
            let events = laminar_load::history::read(&text)?;
            let r = laminar_load::history::workload::reread(&bootstrap, events)?;
            if json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                print_history(&r);
            }
            Ok(())
        }
        Command::IdleFetchers { config, json } => {
            let r = laminar_load::idle_fetchers::run(&config)?;
            if json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                println!(
                    "connections {} (failed {}), fetches answered {}, before their wait ended {}",
                    r.connections, r.failed_connections, r.fetches_answered, r.answered_early
                );
            }
            Ok(())
        }
        Command::Hostile { config, json } => {
            let r = laminar_load::hostile::run(&config)?;
            if json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                r.print_table();
            }
            Ok(())
        }
    }
}

fn print_history(r: &laminar_load::history::Report) {
    println!(
        "acked {}, unacked {}, transactions committed {} aborted {} unknown {}, polled {}, \
         assignments {}, final read {}",
        r.acked,
        r.unacked,
        r.txns_committed,
        r.txns_aborted,
        r.txns_unknown,
        r.polled,
        r.assignments,
        r.final_records
    );
    println!(
        "anomalies {}: lost {}, duplicated {}, inconsistent offsets {}, reordered {}, \
         non-monotonic polls {}, skipped polls {}, aborted reads {}, torn transactions {}, corrupted {}",
        r.anomalies(),
        r.lost,
        r.duplicated,
        r.inconsistent_offsets,
        r.reordered,
        r.nonmonotonic_polls,
        r.skipped_polls,
        r.aborted_reads,
        r.torn_txns,
        r.corrupted
    );
    for e in &r.examples {
        println!("  {e}");
    }
}
