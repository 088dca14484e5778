#!/usr/bin/env bash
# A producer beside consumers idle in long poll: what an append costs the consumers waiting
# on other partitions. Two Laminar builds, A (before a change) and B (after), each run
# alone and beside IDLE idle consumers (`laminar-load idle-fetchers`: one connection per
# partition of a topic where nothing is written, Fetch with a 500 ms wait, as a consumer's
# default fetch.max.wait.ms), in alternating order: builds A B in odd rounds, B A in even
# ones, and within a build "alone idle" or "idle alone" likewise. Each run: a fresh broker and
# data directory; the idle topic (IDLE partitions) and a one-partition topic per load;
# Kafka's ProducerPerformance with 1024 B records, Java client defaults otherwise:
#   max:  N records at --throughput -1 (throughput, broker CPU per GB);
#   rate: RATE_N records at RATE records/s (latency percentiles at a load both can carry).
# The broker's CPU time during each load is appended to its output. Raw output goes to the
# run's raw directory outside the repository (bench_raw_dir OUT, bench/machine.sh: by default
# /var/tmp/laminar-bench-raw/<OUT's name>): r<round>-<A|B>-<alone|idle>-<load>.txt and the
# fetchers' reports; bench/idle_consumers_summary.py writes OUT/summary.md.
#
# Usage: BIN_A=path BIN_B=path LOAD_BIN=path/laminar-load bench/idle_consumers.sh OUT
# Env:   ROUNDS (3), IDLE (1000), N (1000000), RATE (5000), RATE_N (150000), ACKS (1),
#        PORT (19092), NETWORK_THREADS (2), IO_THREADS (4), TOOL_HEAP (-Xmx512M),
#        LOAD_TIMEOUT_S (600), KAFKA_LIB (/tmp/kafka-lib), A_LABEL, B_LABEL.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/machine.sh disable=SC1091
source bench/machine.sh
# shellcheck source=bench/brokers.sh disable=SC1091
source bench/brokers.sh

out=${1:?usage: BIN_A=... BIN_B=... LOAD_BIN=... bench/idle_consumers.sh OUT}
: "${BIN_A:?}" "${BIN_B:?}" "${LOAD_BIN:?}"
ROUNDS=${ROUNDS:-3}
IDLE=${IDLE:-1000}
N=${N:-1000000}
RATE=${RATE:-5000}
RATE_N=${RATE_N:-150000}
ACKS=${ACKS:-1}
PORT=${PORT:-19092}
NETWORK_THREADS=${NETWORK_THREADS:-2}
IO_THREADS=${IO_THREADS:-4}
REBALANCE_DELAY_MS=0 # brokers.sh reads it (for Kafka)
TOOL_HEAP=${TOOL_HEAP:--Xmx512M}
LOAD_TIMEOUT_S=${LOAD_TIMEOUT_S:-600}
export KAFKA_LIB=${KAFKA_LIB:-/tmp/kafka-lib}
bootstrap=127.0.0.1:$PORT
# brokers.sh starts `laminar` from $bin and `base` from $BASE_BIN: B and A.
bin=$BIN_B
BASE_BIN=$BIN_A

prepare_run idle-consumers
fetchers_pid=""
stop_fetchers() {
  if [[ -n $fetchers_pid ]] && kill -0 "$fetchers_pid" 2>/dev/null; then
    kill -TERM "$fetchers_pid" 2>/dev/null || true
    wait "$fetchers_pid" 2>/dev/null || true
  fi
  fetchers_pid=""
}
trap 'stop_fetchers; cleanup' EXIT

java_tool_setup
cat > "$work/laminar.toml" <<TOML
"num.network.threads" = $NETWORK_THREADS
"num.io.threads" = $IO_THREADS
TOML
{
  machine_info "$work"
  echo "A: $BIN_A ($("$BIN_A" --version)) ${A_LABEL:-}"
  echo "B: $BIN_B ($("$BIN_B" --version)) ${B_LABEL:-}"
  echo "rounds: $ROUNDS, idle consumers: $IDLE, max: N $N; rate: $RATE records/s, $RATE_N records; acks $ACKS"
  echo "network threads: $NETWORK_THREADS, io threads: $IO_THREADS"
  echo "tool jvm: ${java_tool[*]:0:8}"
} > "$out/config.txt"
cat "$out/config.txt"

produce() { # TAG LOAD
  local tag=$1 load=$2 before after
  local args=(--num-records "$N" --throughput -1)
  [[ $load == rate ]] && args=(--num-records "$RATE_N" --throughput "$RATE")
  create_topic "$load" 1 "$tag"
  before=$(cpu_ticks "$broker_pid")
  run_load "$tag-$load" "${java_tool[@]}" org.apache.kafka.tools.ProducerPerformance \
    --bootstrap-server "$bootstrap" --topic "$load" "${args[@]}" \
    --record-size 1024 --command-property "acks=$ACKS"
  after=$(cpu_ticks "$broker_pid")
  echo "broker cpu s: $(awk -v a="$before" -v b="$after" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", (b - a) / hz}')" \
    >> "$raw/$tag-$load.txt"
}

run_one() { # BUILD(A|B) MODE(alone|idle) ROUND
  local build=$1 mode=$2 round=$3 broker=laminar
  [[ $build == A ]] && broker=base
  local tag=r$round-$build-$mode data=$work/$build-$mode-r$round
  echo "$(date +%T) $tag"
  start_broker "$broker" "$data" "$raw/$tag-broker.log"
  create_topic idle "$IDLE" "$tag"
  if [[ $mode == idle ]]; then
    "$LOAD_BIN" idle-fetchers --bootstrap "$bootstrap" --topic idle --partitions "$IDLE" \
      --duration-s 100000 > "$raw/$tag-fetchers.txt" 2>&1 &
    fetchers_pid=$!
    # Connected, and every fetch in long poll.
    for _ in $(seq 1 100); do
      grep -q '^ready' "$raw/$tag-fetchers.txt" && break
      sleep 0.2
    done
    sleep 3
  fi
  produce "$tag" max
  produce "$tag" rate
  stop_fetchers
  stop_broker
  rm -rf "$data"
}

for round in $(seq 1 "$ROUNDS"); do
  if ((round % 2)); then builds="A B" modes="alone idle"; else builds="B A" modes="idle alone"; fi
  echo "round $round: $builds; $modes" | tee -a "$out/order.txt"
  for build in $builds; do
    for mode in $modes; do run_one "$build" "$mode" "$round"; done
  done
done

python3 bench/idle_consumers_summary.py "$out" | tee "$out/summary.md"
