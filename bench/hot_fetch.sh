#!/usr/bin/env bash
# Hot fetches, two Laminar builds side by side: what one fetched MiB costs the broker in CPU
# when every byte is in the page cache (the consumer at the tail, the common case), to price
# a change to the send path (the residency check runs on every range sent).
#
# One topic of 1 partition is filled once (`laminar-load fill`, 1 KiB records, LOAD) with BIN_A;
# then per round, each build in turn (order alternating: A B, B A, ...) starts on that data
# directory and Kafka's ConsumerPerformance reads all of it (a fresh group, from the start).
# The broker's CPU time (utime + stime of /proc/PID/stat) over the read, divided by the MiB
# ConsumerPerformance reports, is the figure; its MB/s is printed too (on 2 cores the Java
# consumer shares the CPU, so MB/s is not the broker's limit). The broker logs and the
# consumer's output go to the run's raw directory outside the repository (bench_raw_dir OUT,
# bench/machine.sh: by default /var/tmp/laminar-bench-raw/<OUT's name>); OUT gets config.txt
# and summary.txt.
#
# Usage: BIN_A=path BIN_B=path bench/hot_fetch.sh OUT
#        (A_LABEL and B_LABEL, say the commits, go into OUT/config.txt)
# Env:   FILL_BYTES (2 GiB), ROUNDS (3), PORT (19300), NETWORK_THREADS (2), IO_THREADS (4),
#        TOOL_HEAP (-Xmx512M), LOAD_TIMEOUT_S (600), KAFKA_LIB (/tmp/kafka-lib).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/machine.sh disable=SC1091
source bench/machine.sh
# shellcheck source=bench/brokers.sh disable=SC1091
source bench/brokers.sh

out=${1:?usage: BIN_A=... BIN_B=... bench/hot_fetch.sh OUT}
: "${BIN_A:?}" "${BIN_B:?}"
load=${LOAD:-target/release/laminar-load}
[[ -x $load ]] || cargo build --release -p laminar-load
FILL_BYTES=${FILL_BYTES:-$((2 << 30))}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-19300}
NETWORK_THREADS=${NETWORK_THREADS:-2}
IO_THREADS=${IO_THREADS:-4}
REBALANCE_DELAY_MS=0
TOOL_HEAP=${TOOL_HEAP:--Xmx512M}
LOAD_TIMEOUT_S=${LOAD_TIMEOUT_S:-600}
export KAFKA_LIB=${KAFKA_LIB:-/tmp/kafka-lib}
bootstrap=127.0.0.1:$PORT
records=$((FILL_BYTES / 1024))

if bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null; then
  echo "something already listens on 127.0.0.1:$PORT; set PORT" >&2
  exit 1
fi
raw=$(bench_raw_dir "$out")
if [[ -n $(ls -A "$raw" 2>/dev/null) ]]; then
  echo "$raw already holds results; give another OUT (or move them away)" >&2
  exit 1
fi
bench/kafka/fetch-kafka.sh
mkdir -p "$out" "$raw"
work=$(mktemp -d "$PWD/.bench-hot-fetch.XXXXXX")
launcher_pid="" broker_pid="" tool_pid=""
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
java_tool_setup
cat > "$work/laminar.toml" <<TOML
"num.network.threads" = $NETWORK_THREADS
"num.io.threads" = $IO_THREADS
"group.initial.rebalance.delay.ms" = 0
TOML
{
  machine_info "$work"
  echo "A: $BIN_A ($("$BIN_A" --version)) ${A_LABEL:-}"
  echo "B: $BIN_B ($("$BIN_B" --version)) ${B_LABEL:-}"
  echo "fill: $FILL_BYTES bytes, $records records of 1024 B, 1 partition"
  echo "rounds: $ROUNDS"
} > "$out/config.txt"
cat "$out/config.txt"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

data=$work/data
bin=$BIN_A
start_broker laminar "$data" "$raw/fill-broker.log"
"$bin" topics create hot --partitions 1 --bootstrap "$bootstrap" > /dev/null
"$load" fill --bootstrap "$bootstrap" --topic hot --bytes "$FILL_BYTES" > "$raw/fill.txt"
stop_broker

hz=$(getconf CLK_TCK)
echo "round build cpu_s mib ms_cpu_per_gib mb_per_s" > "$out/summary.txt"
for round in $(seq 1 "$ROUNDS"); do
  if ((round % 2)); then order="A B"; else order="B A"; fi
  for build in $order; do
    if [[ $build == A ]]; then bin=$BIN_A; else bin=$BIN_B; fi
    tag=r$round-$build
    start_broker laminar "$data" "$raw/$tag-broker.log"
    # Warm: every byte in the page cache before the measured read (it was just written, but a
    # round may follow another's eviction pressure).
    cat "$data"/hot-0/* > /dev/null 2>&1 || true
    before=$(cpu_ticks "$broker_pid")
    run_load "$tag-consume" "${java_tool[@]}" org.apache.kafka.tools.ConsumerPerformance \
      --bootstrap-server "$bootstrap" --topic hot --num-records "$records" --group "hot-$tag"
    after=$(cpu_ticks "$broker_pid")
    stop_broker
    # ConsumerPerformance's data line: start, end, data.consumed.in.MB, MB.sec, ...
    read -r mib mbs < <(awk -F', ' 'NF > 5 && $3 ~ /^[0-9.]+$/ {print $3, $4}' \
      "$raw/$tag-consume.txt" | tail -1)
    cpu_s=$(echo "scale=3; ($after - $before) / $hz" | bc)
    per_gib=$(echo "scale=1; 1000 * $cpu_s * 1024 / $mib" | bc)
    echo "$round $build $cpu_s $mib $per_gib $mbs" | tee -a "$out/summary.txt"
  done
done
awk 'NR > 1 {n[$2]++; s[$2] += $5; m[$2] += $6}
     END {printf "mean ms CPU per GiB: A %.1f, B %.1f (B/A %.3f); mean MB/s: A %.1f, B %.1f\n",
          s["A"]/n["A"], s["B"]/n["B"], (s["B"]/n["B"]) / (s["A"]/n["A"]), m["A"]/n["A"], m["B"]/n["B"]}' \
  "$out/summary.txt" | tee -a "$out/summary.txt"
