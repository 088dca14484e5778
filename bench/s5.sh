#!/usr/bin/env bash
# Scenario S5: Laminar beside Apache Kafka 4.3.1, measured with Kafka's own perf tools (the
# Java client), so that the comparison does not rest on Laminar's own client (librdkafka).
#
# Per round, for each broker, one after the other on this machine (a fresh data directory and a
# fresh broker process every time; ROUNDS rounds in alternating order: Laminar first in odd
# rounds, Kafka first in even ones, so neither always runs on the warmer/cooler machine):
#   1. ProducerPerformance: N records of 1024 B, --throughput -1, acks=1 and acks=all, to a
#      1-partition and to an 8-partition topic (four fresh topics, Java client defaults
#      otherwise);
#   2. ConsumerPerformance: the N records of the 1-partition acks=1 topic, in a consumer group
#      (reports MB/s, fetch MB/s and rebalance.time.ms);
#   3. EndToEndLatency (produce one record, wait until the consumer sees it, repeat):
#      E2E_RECORDS records of 512 B, acks=all and acks=1;
#   4. `laminar-load latency` (librdkafka, linger.ms=0): E2E_RATE records/s of 512 B for
#      E2E_DURATION_S, acks=all and acks=1 (produce latency: send to delivery report);
#   5. the broker's RSS: VmRSS 2 s after it starts listening (idle) and VmHWM after the loads.
# Every tool's stdout+stderr goes to RAW/r<round>-<broker>-<load>.txt, RAW being the run's raw
# directory outside the repository (bench_raw_dir OUT, bench/machine.sh: by default
# /var/tmp/laminar-bench-raw/<OUT's name>); bench/s5_summary.py parses them into
# OUT/summary.md. Latency series for `laminar perf plot` go to RAW/series/:
# step 4's from `perf latency --series-out` (labelled "<Laminar|Kafka> acks=<acks> r<round>"),
# and step 1's, which s5_summary.py makes from the few percentiles ProducerPerformance prints.
# s5_summary.py then draws the charts (OUT/chart-*.svg, linked from summary.md): one per
# ProducerPerformance load and one per acks of `perf latency`, both brokers, every round.
#
# Usage: bench/s5.sh [OUT]        (OUT default: bench/results/<date>-<host>-s5)
# BROKERS may also name `base`: another Laminar build (BASE_BIN, e.g. the build before a
# change), run the same way, so that BROKERS="base laminar" compares two builds (the summary
# then gives this build / base).
# Env:   N (1000000), ROUNDS (2), BROKERS ("laminar kafka"), BASE_BIN, E2E_DURATION_S (30), PORT (19092;
#        Kafka's controller takes PORT+1), E2E_RATE (5000), E2E_RECORDS (10000),
#        NETWORK_THREADS (2), IO_THREADS (4), REBALANCE_DELAY_MS (0), TOOL_HEAP (-Xmx512M, as
#        kafka-producer-perf-test.sh), LOAD_TIMEOUT_S (3600, per tool run), SKIP_BUILD=1,
#        KAFKA_LIB (/tmp/kafka-lib).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/machine.sh disable=SC1091
source bench/machine.sh
# shellcheck source=bench/brokers.sh disable=SC1091
source bench/brokers.sh

out=${1:-bench/results/$(date +%F)-$(hostname)-s5}
N=${N:-1000000}
ROUNDS=${ROUNDS:-2}
BROKERS=${BROKERS:-"laminar kafka"}
E2E_DURATION_S=${E2E_DURATION_S:-30}
E2E_RATE=${E2E_RATE:-5000}
E2E_RECORDS=${E2E_RECORDS:-10000}
PORT=${PORT:-19092}
NETWORK_THREADS=${NETWORK_THREADS:-2}
IO_THREADS=${IO_THREADS:-4}
REBALANCE_DELAY_MS=${REBALANCE_DELAY_MS:-0}
TOOL_HEAP=${TOOL_HEAP:--Xmx512M}
LOAD_TIMEOUT_S=${LOAD_TIMEOUT_S:-3600}
export KAFKA_LIB=${KAFKA_LIB:-/tmp/kafka-lib}
RECORD_BYTES=1024
E2E_BYTES=512
bootstrap=127.0.0.1:$PORT

for b in $BROKERS; do
  [[ $b == laminar || $b == kafka || $b == base ]] || { echo "unknown broker $b: laminar, base or kafka" >&2; exit 2; }
  [[ $b != base || -x ${BASE_BIN:-} ]] || { echo "BROKERS names base: set BASE_BIN to a laminar binary" >&2; exit 2; }
done

prepare_run s5
mkdir -p "$raw/series"
: > "$out/order.txt"
if [[ " $BROKERS " == *" kafka "* ]]; then bench/kafka/fetch-kafka.sh; fi
[[ ${SKIP_BUILD:-} == 1 ]] || cargo build --release --quiet -p laminar -p laminar-load
bin=$PWD/target/release/laminar
load=$PWD/target/release/laminar-load

java_tool_setup

# Equal broker settings where both have them. Laminar's num.io.threads is its cold-read pool,
# Kafka's its request handlers: same name and number, not the same job.
cat > "$work/laminar.toml" <<TOML
"num.network.threads" = $NETWORK_THREADS
"num.io.threads" = $IO_THREADS
"group.initial.rebalance.delay.ms" = $REBALANCE_DELAY_MS
TOML

{
  machine_info "$work"
  echo "laminar work tree: $(git status --porcelain -- crates Cargo.toml Cargo.lock 2>/dev/null | wc -l) changed file(s) under crates/, Cargo.toml, Cargo.lock"
  echo "kafka: $("${java_tool[@]}" org.apache.kafka.tools.ConsumerPerformance --version 2>/dev/null | tail -1) (jars from Maven Central in $KAFKA_LIB)"
  echo "java: $(java -version 2>&1 | paste -sd ';' | sed 's/;/; /g')"
  echo "librdkafka (laminar-load latency): rdkafka-sys $(awk '/^name = "rdkafka-sys"/ {getline; gsub(/"/, "", $3); print $3}' Cargo.lock)"
  echo "N: $N"
  echo "rounds: $ROUNDS"
  echo "brokers: $BROKERS"
  if [[ " $BROKERS " == *" base "* ]]; then echo "base: $BASE_BIN ($("$BASE_BIN" --version)) ${BASE_LABEL:-}"; fi
  echo "record bytes: $RECORD_BYTES (ProducerPerformance), $E2E_BYTES (latency loads)"
  echo "e2e records: $E2E_RECORDS"
  echo "perf latency: $E2E_RATE records/s for $E2E_DURATION_S s"
  echo "network threads: $NETWORK_THREADS"
  echo "io threads: $IO_THREADS"
  echo "group.initial.rebalance.delay.ms: $REBALANCE_DELAY_MS"
  echo "tool jvm: ${java_tool[*]:0:8}"
} > "$out/config.txt"
cat "$out/config.txt"

acks_tag() { [[ $1 == all ]] && echo acksall || echo "acks$1"; }

display_name() { case $1 in laminar) echo Laminar ;; base) echo "Laminar base" ;; kafka) echo Kafka ;; *) echo "$1" ;; esac; }

run_broker() { # BROKER ROUND
  local broker=$1 round=$2
  local tag=r$round-$broker data=$work/$broker-r$round
  start_broker "$broker" "$data" "$raw/$tag-broker.log"
  # Idle RSS: the broker up, no client yet, after it has settled for 2 s.
  sleep 2
  echo "idle VmRSS kB: $(status_kb "$broker_pid" VmRSS)" > "$raw/$tag-rss.txt"

  # Every load gets its own topic, created up front (`laminar topics` speaks the Kafka
  # protocol, so it works on both), so that no load reads or appends to another's data.
  local p acks topic
  for p in 1 8; do
    for acks in 1 all; do create_topic "produce-p$p-$(acks_tag $acks)" "$p" "$tag"; done
  done
  for acks in 1 all; do
    create_topic "e2e-$(acks_tag $acks)" 1 "$tag"
    create_topic "latency-$(acks_tag $acks)" 1 "$tag"
  done

  for p in 1 8; do
    for acks in 1 all; do
      topic=produce-p$p-$(acks_tag $acks)
      run_load "$tag-$topic" "${java_tool[@]}" org.apache.kafka.tools.ProducerPerformance \
        --bootstrap-server "$bootstrap" --topic "$topic" --num-records "$N" \
        --record-size "$RECORD_BYTES" --throughput -1 --command-property "acks=$acks"
    done
  done

  run_load "$tag-consume-p1" "${java_tool[@]}" org.apache.kafka.tools.ConsumerPerformance \
    --bootstrap-server "$bootstrap" --topic produce-p1-acks1 --num-records "$N" \
    --group "s5-consumer-$tag"

  for acks in all 1; do
    topic=e2e-$(acks_tag $acks)
    run_load "$tag-$topic" "${java_tool[@]}" org.apache.kafka.tools.EndToEndLatency \
      --bootstrap-server "$bootstrap" --topic "$topic" --num-records "$E2E_RECORDS" \
      --producer-acks "$acks" --record-size "$E2E_BYTES"
  done

  for acks in all 1; do
    topic=latency-$(acks_tag $acks)
    run_load "$tag-$topic" "$load" latency --bootstrap "$bootstrap" --topic "$topic" \
      --records-per-s "$E2E_RATE" --record-bytes "$E2E_BYTES" --duration-s "$E2E_DURATION_S" \
      --acks "$acks" --json --series-out "$raw/series/$tag-$topic.json" \
      --label "$(display_name "$broker") acks=$acks r$round"
  done

  echo "VmHWM kB after the loads: $(status_kb "$broker_pid" VmHWM)" >> "$raw/$tag-rss.txt"
  # What the disk holds, for the record (and a check that the loads wrote where we think).
  du -sk "$data" | awk '{print "data dir kB: " $1}' >> "$raw/$tag-rss.txt"
  stop_broker
  # Kafka's INFO log (its full KafkaConfig dump included) lives in the data dir: keep it.
  if [[ -f $data/server.log ]]; then cp "$data/server.log" "$raw/$tag-server.log"; fi
  rm -rf "$data"
}

run_rounds

# The summary draws the charts with this build's `laminar perf plot`.
LAMINAR=$bin python3 bench/s5_summary.py "$out"
