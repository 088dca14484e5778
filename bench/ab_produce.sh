#!/usr/bin/env bash
# Kafka's ProducerPerformance against two Laminar builds side by side: A (the build before a
# change) and B (after), in alternating order each round (A first in odd rounds, B first in
# even ones), each run on a fresh broker and a fresh data directory. S5 (bench/s5.sh) runs
# every load once per round; this runs only the produce loads, so that many rounds fit in
# the time of a few S5 rounds and a small difference shows above the machine's noise.
#
# Per round and build: a fresh broker; for each load of LOADS (default "p1-acks1 p1-acksall",
# pP-acksA: a P-partition topic, acks=A), a `sync`, a fresh topic and N records of 1024 B at
# --throughput -1, Java client defaults otherwise; the broker's CPU time during the load is
# appended to the load's output. Raw output: RAW/r<round>-<A|B>-<load>.txt, RAW being the run's
# raw directory outside the repository (bench_raw_dir OUT, bench/machine.sh: by default
# /var/tmp/laminar-bench-raw/<OUT's name>); bench/ab_produce_summary.py prints the medians and
# the B/A ratios into OUT/summary.txt.
#
# A_CONFIG and B_CONFIG add TOML lines to one build's configuration (the same binary as both,
# e.g. B_CONFIG='"log.read.after.fsync" = false', compares one setting). TAIL=1 runs Kafka's
# ConsumerPerformance on each load's topic beside the producer, started TAIL_LEAD_S before it
# (its group joined by then), reading the N records as they come: the broker's CPU then
# covers serving it too; its output goes to RAW/r<round>-<A|B>-<load>-tail.txt.
#
# Usage: BIN_A=path BIN_B=path bench/ab_produce.sh OUT
# Env:   ROUNDS (10), N (1000000), LOADS, PORT (19092), NETWORK_THREADS (2), IO_THREADS (4),
#        TOOL_HEAP (-Xmx512M), LOAD_TIMEOUT_S (600), KAFKA_LIB (/tmp/kafka-lib), A_LABEL, B_LABEL,
#        A_CONFIG, B_CONFIG, TAIL (0), TAIL_LEAD_S (5).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/machine.sh disable=SC1091
source bench/machine.sh
# shellcheck source=bench/brokers.sh disable=SC1091
source bench/brokers.sh

out=${1:?usage: BIN_A=... BIN_B=... bench/ab_produce.sh OUT}
: "${BIN_A:?}" "${BIN_B:?}"
ROUNDS=${ROUNDS:-10}
N=${N:-1000000}
LOADS=${LOADS:-"p1-acks1 p1-acksall"}
PORT=${PORT:-19092}
NETWORK_THREADS=${NETWORK_THREADS:-2}
IO_THREADS=${IO_THREADS:-4}
REBALANCE_DELAY_MS=0 # brokers.sh reads it (for Kafka)
TOOL_HEAP=${TOOL_HEAP:--Xmx512M}
LOAD_TIMEOUT_S=${LOAD_TIMEOUT_S:-600}
A_CONFIG=${A_CONFIG:-}
B_CONFIG=${B_CONFIG:-}
TAIL=${TAIL:-0}
TAIL_LEAD_S=${TAIL_LEAD_S:-5}
export KAFKA_LIB=${KAFKA_LIB:-/tmp/kafka-lib}
bootstrap=127.0.0.1:$PORT
# brokers.sh starts `laminar` from $bin and `base` from $BASE_BIN: B and A.
bin=$BIN_B
BASE_BIN=$BIN_A

prepare_run ab-produce

java_tool_setup
# The configuration of BUILD (A|B), where brokers.sh's start_broker reads it.
write_config() {
  local extra=$A_CONFIG
  [[ $1 == B ]] && extra=$B_CONFIG
  {
    echo "\"num.network.threads\" = $NETWORK_THREADS"
    echo "\"num.io.threads\" = $IO_THREADS"
    if [[ -n $extra ]]; then echo "$extra"; fi
  } > "$work/laminar.toml"
}
{
  machine_info "$work"
  echo "A: $BIN_A ($("$BIN_A" --version)) ${A_LABEL:-}${A_CONFIG:+ with $A_CONFIG}"
  echo "B: $BIN_B ($("$BIN_B" --version)) ${B_LABEL:-}${B_CONFIG:+ with $B_CONFIG}"
  echo "rounds: $ROUNDS, N: $N, loads: $LOADS, network threads: $NETWORK_THREADS, io threads: $IO_THREADS"
  if ((TAIL)); then
    echo "a consumer tails each load's topic (ConsumerPerformance, started ${TAIL_LEAD_S} s before the producer)"
  fi
  echo "tool jvm: ${java_tool[*]:0:8}"
} > "$out/config.txt"
cat "$out/config.txt"

run_build() { # BUILD(A|B) ROUND
  local build=$1 round=$2 broker=laminar load partitions acks
  [[ $build == A ]] && broker=base
  local tag=r$round-$build data=$work/$build-r$round tail_pid
  write_config "$build"
  start_broker "$broker" "$data" "$raw/$tag-broker.log"
  for load in $LOADS; do
    partitions=${load%%-*}
    partitions=${partitions#p}
    acks=${load#*-acks}
    create_topic "$load" "$partitions" "$tag"
    local before after
    # The previous load's dirty pages (acks=1 asks for no fsync) written out first, so that
    # their writeback does not land in this load's window.
    sync
    before=$(cpu_ticks "$broker_pid")
    tail_pid=""
    if ((TAIL)); then
      timeout "$LOAD_TIMEOUT_S" "${java_tool[@]}" org.apache.kafka.tools.ConsumerPerformance \
        --bootstrap-server "$bootstrap" --topic "$load" --messages "$N" --timeout 60000 \
        --group "tail-$tag-$load" > "$raw/$tag-$load-tail.txt" 2>&1 &
      tail_pid=$!
      sleep "$TAIL_LEAD_S"
    fi
    run_load "$tag-$load" "${java_tool[@]}" org.apache.kafka.tools.ProducerPerformance \
      --bootstrap-server "$bootstrap" --topic "$load" --num-records "$N" \
      --record-size 1024 --throughput -1 --command-property "acks=$acks"
    if [[ -n $tail_pid ]]; then
      wait "$tail_pid" || echo "[tail exit $?]" >> "$raw/$tag-$load-tail.txt"
    fi
    after=$(cpu_ticks "$broker_pid")
    echo "broker cpu s: $(awk -v a="$before" -v b="$after" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", (b - a) / hz}')" \
      >> "$raw/$tag-$load.txt"
  done
  stop_broker
  rm -rf "$data"
}

for round in $(seq 1 "$ROUNDS"); do
  if ((round % 2)); then sequence="A B"; else sequence="B A"; fi
  echo "round $round: $sequence" | tee -a "$out/order.txt"
  for build in $sequence; do run_build "$build" "$round"; done
done

python3 bench/ab_produce_summary.py "$out" | tee "$out/summary.txt"
