#!/usr/bin/env bash
# Transactional produce beside Apache Kafka 4.3.1 (issue 13), measured with Kafka's own
# ProducerPerformance (the Java client, transaction.version 2 on both brokers): a transactional
# producer (acks=all, idempotent, as transactions require) sends N records of RECORD_BYTES
# at --throughput -1 to a 1-partition topic, committing every 10, 100 and 1000 ms
# (--transaction-duration-ms). It reports throughput and the latency of each send.
#
# Per round, for each broker, one after the other (a fresh data directory and broker process
# each time; ROUNDS rounds in alternating order: Laminar first in odd rounds, Kafka first in
# even ones). Every tool's output goes to RAW/r<round>-<broker>-txn<ms>.txt, RAW being the run's
# raw directory outside the repository (bench_raw_dir OUT, bench/machine.sh: by default
# /var/tmp/laminar-bench-raw/<OUT's name>), and the summary (OUT/summary.md: each run, then the
# Laminar/Kafka ratios per round) is made from them by the python at the end.
#
# Kafka runs on its defaults: it does not fsync on commit (the page cache and replication are
# its durability); Laminar answers acks=all after the fsync that covers the records, and makes
# the commit decision and the markers durable before the next transaction of the producer.
#
# Usage: bench/transactions.sh [OUT]   (OUT default: bench/results/<date>-<host>-transactions)
# Env:   N (200000), RECORD_BYTES (1024), DURATIONS_MS ("10 100 1000"), ROUNDS (2),
#        THROUGHPUT (-1: as fast as it goes; records/s for latency at a fixed load),
#        BROKERS ("laminar kafka"), PORT (19092), NETWORK_THREADS (2), IO_THREADS (4),
#        TOOL_HEAP (-Xmx512M), LOAD_TIMEOUT_S (1800), SKIP_BUILD=1, KAFKA_LIB (/tmp/kafka-lib).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/machine.sh disable=SC1091
source bench/machine.sh
# shellcheck source=bench/brokers.sh disable=SC1091
source bench/brokers.sh

out=${1:-bench/results/$(date +%F)-$(hostname)-transactions}
N=${N:-200000}
RECORD_BYTES=${RECORD_BYTES:-1024}
DURATIONS_MS=${DURATIONS_MS:-"10 100 1000"}
THROUGHPUT=${THROUGHPUT:--1}
ROUNDS=${ROUNDS:-2}
BROKERS=${BROKERS:-"laminar kafka"}
PORT=${PORT:-19092}
NETWORK_THREADS=${NETWORK_THREADS:-2}
IO_THREADS=${IO_THREADS:-4}
REBALANCE_DELAY_MS=0
TOOL_HEAP=${TOOL_HEAP:--Xmx512M}
LOAD_TIMEOUT_S=${LOAD_TIMEOUT_S:-1800}
export KAFKA_LIB=${KAFKA_LIB:-/tmp/kafka-lib}
bootstrap=127.0.0.1:$PORT

if bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null; then
  echo "something already listens on 127.0.0.1:$PORT; set PORT" >&2
  exit 1
fi
if [[ " $BROKERS " == *" kafka "* ]]; then bench/kafka/fetch-kafka.sh; fi
[[ ${SKIP_BUILD:-} == 1 ]] || cargo build --release --quiet
bin=$PWD/target/release/laminar
raw=$(bench_raw_dir "$out")
if [[ -n $(ls -A "$raw" 2>/dev/null) ]]; then
  echo "$raw already holds results; give another OUT (or move them away)" >&2
  exit 1
fi
mkdir -p "$out" "$raw"
: > "$out/order.txt"
work=$(mktemp -d "$PWD/.bench-txn.XXXXXX")
launcher_pid="" broker_pid="" tool_pid=""
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

java_tool_setup
cat > "$work/laminar.toml" <<TOML
"num.network.threads" = $NETWORK_THREADS
"num.io.threads" = $IO_THREADS
TOML

{
  machine_info "$work"
  echo "kafka: $("${java_tool[@]}" org.apache.kafka.tools.ConsumerPerformance --version 2>/dev/null | tail -1) (jars from Maven Central in $KAFKA_LIB)"
  echo "java: $(java -version 2>&1 | paste -sd ';' | sed 's/;/; /g')"
  echo "N: $N, record bytes: $RECORD_BYTES, transaction durations ms: $DURATIONS_MS, throughput: $THROUGHPUT"
  echo "rounds: $ROUNDS, brokers: $BROKERS"
  echo "network threads: $NETWORK_THREADS, io threads: $IO_THREADS"
  echo "tool jvm: ${java_tool[*]:0:8}"
} > "$out/config.txt"
cat "$out/config.txt"

run_broker() { # BROKER ROUND
  local broker=$1 round=$2
  local tag=r$round-$broker data=$work/$broker-r$round ms
  start_broker "$broker" "$data" "$raw/$tag-broker.log"
  for ms in $DURATIONS_MS; do
    create_topic "txn-$ms" 1 "$tag"
    run_load "$tag-txn$ms" "${java_tool[@]}" org.apache.kafka.tools.ProducerPerformance \
      --bootstrap-server "$bootstrap" --topic "txn-$ms" --num-records "$N" \
      --record-size "$RECORD_BYTES" --throughput "$THROUGHPUT" --transaction-duration-ms "$ms" \
      --transactional-id "bench-txn-$ms"
  done
  stop_broker
  if [[ -f $data/server.log ]]; then cp "$data/server.log" "$raw/$tag-server.log"; fi
  rm -rf "$data"
}

run_rounds

python3 - "$out" "$raw" <<'PY'
import pathlib, re, sys
out, raw = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
line = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                  r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")
runs = {}
for f in sorted(raw.glob("r*-*-txn*.txt")):
    m = re.match(r"r(\d+)-(\w+)-txn(\d+)\.txt", f.name)
    found = [line.search(l) for l in f.read_text().splitlines()]
    found = [x for x in found if x]
    if m and found:
        runs[(int(m[1]), m[2], int(m[3]))] = found[-1]
rows = ["| round | broker | txn ms | records/s | MB/s | avg ms | p50 | p95 | p99 | p99.9 | max ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|"]
for (r, b, ms), x in sorted(runs.items()):
    rows.append(f"| {r} | {b} | {ms} | {float(x[2]):,.0f} | {x[3]} | {x[4]} | {x[6]} | {x[7]} | {x[8]} | {x[9]} | {x[5]} |")
ratios = ["| round | txn ms | throughput Laminar/Kafka | p50 | p99 | p99.9 |", "|---|---|---|---|---|---|"]
for (r, b, ms), x in sorted(runs.items()):
    k = runs.get((r, "kafka", ms))
    if b != "laminar" or not k:
        continue
    q = lambda i: f"{float(x[i]) / max(float(k[i]), 1):.2f}x"
    ratios.append(f"| {r} | {ms} | {float(x[2]) / float(k[2]):.2f}x | {q(6)} | {q(8)} | {q(9)} |")
text = "# Transactional produce, Laminar beside Kafka (ProducerPerformance)\n\n" \
       + "\n".join(rows) + "\n\nRatios (latency ratios of 1 ms floors use 1 ms):\n\n" + "\n".join(ratios) + "\n"
(out / "summary.md").write_text(text)
print(text)
PY
