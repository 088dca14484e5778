#!/usr/bin/env bash
# Three-broker clusters, Laminar and Apache Kafka 4.3.1 side by side on this machine (issue 12).
# Each broker is its own process with its own data directory, every node both broker and
# controller voter (Kafka's combined mode, a static quorum of 3); replication factor 3.
#
#   produce: ProducerPerformance (Kafka's own tool, the Java client): N records of 1024 B,
#            --throughput -1, acks=all, to a 1-partition and a 6-partition topic; then
#            `laminar-load latency` (librdkafka): as fast as it goes for MAX_S, acks=all, and at
#            RATE records/s of 512 B for DURATION_S, acks=all. ROUNDS rounds, alternating order.
#   s1f:     scenario S1 with a follower as the cold reader (seed 000): topic `big` (1 partition)
#            and topics `hot-acks1`, `hot-acksall` (3 partitions each); one follower of `big`
#            is stopped, FILL_BYTES go into `big`, its files are evicted from every page cache,
#            and the leader's disk reads are throttled to READ_BPS and READ_IOPS (a blkio
#            cgroup, a hard disk). Two producers (librdkafka, RATE records/s of 512 B each,
#            acks=1 to hot-acks1 and acks=all to hot-acksall) run for DURATION_S with the
#            follower down ("alone"), then again right after the follower is started, while it
#            catches up on `big` from the leader's cold, throttled disk ("catch-up"). The
#            follower's copy of `big` is measured when the phase ends. PRODUCER=java runs the
#            two producers with Kafka's own ProducerPerformance (the Java client) instead, each
#            phase RATE*(WARMUP_S+DURATION_S) records of which the first RATE*WARMUP_S are its
#            --warmup-records (left out of its steady-state percentiles).
# Raw output (every tool's output, the brokers' logs, top, the latency series) goes to the run's
# raw directory outside the repository (bench_raw_dir OUT, bench/machine.sh: by default
# /var/tmp/laminar-bench-raw/<OUT's name>), a summary with ratios and charts to OUT.
# Needs root for s1f (a blkio cgroup). Kafka comes from bench/kafka (Maven jars).
#
# Usage: bench/cluster.sh produce|s1f [OUT]    (OUT default bench/results/<date>-<host>-cluster-<part>)
# Env:   ROUNDS (2), BROKERS ("laminar kafka"), N (500000), RATE (2000), DURATION_S (30),
#        MAX_S (20), WARMUP_S (10), FILL_BYTES (2000000000), READ_BPS (52428800), READ_IOPS (400),
#        PORT (19200: node i listens on PORT+10*(i-1), its controller on that +1),
#        NETWORK_THREADS (2), IO_THREADS (4), TOOL_HEAP (-Xmx512M), KAFKA_HEAP (-Xmx1g -Xms256m),
#        LOAD_TIMEOUT_S (1200), SKIP_BUILD=1, KAFKA_LIB (/tmp/kafka-lib),
#        PRODUCER (librdkafka, or java: the s1f producers).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/machine.sh disable=SC1091
source bench/machine.sh

part=${1:?usage: bench/cluster.sh produce|s1f [OUT]}
[[ $part == produce || $part == s1f ]] || { echo "unknown part $part: produce or s1f" >&2; exit 2; }
out=${2:-bench/results/$(date +%F)-$(hostname)-cluster-$part}
ROUNDS=${ROUNDS:-2}
BROKERS=${BROKERS:-"laminar kafka"}
N=${N:-500000}
RATE=${RATE:-2000}
DURATION_S=${DURATION_S:-30}
MAX_S=${MAX_S:-20}
WARMUP_S=${WARMUP_S:-10}
PRODUCER=${PRODUCER:-librdkafka}
[[ $PRODUCER == librdkafka || $PRODUCER == java ]] || { echo "PRODUCER: librdkafka or java" >&2; exit 2; }
FILL_BYTES=${FILL_BYTES:-2000000000}
READ_BPS=${READ_BPS:-52428800}
READ_IOPS=${READ_IOPS:-400}
PORT=${PORT:-19200}
NETWORK_THREADS=${NETWORK_THREADS:-2}
IO_THREADS=${IO_THREADS:-4}
TOOL_HEAP=${TOOL_HEAP:--Xmx512M}
KAFKA_HEAP=${KAFKA_HEAP:--Xmx1g -Xms256m}
LOAD_TIMEOUT_S=${LOAD_TIMEOUT_S:-1200}
export KAFKA_LIB=${KAFKA_LIB:-/tmp/kafka-lib}
DEVICE=$(cat /sys/block/vda/dev)
NODES=(1 2 3)

node_port() { echo $((PORT + 10 * ($1 - 1))); }
bootstrap=127.0.0.1:$(node_port 1),127.0.0.1:$(node_port 2),127.0.0.1:$(node_port 3)
voters=""
for i in "${NODES[@]}"; do voters+="${voters:+,}$i@127.0.0.1:$(($(node_port "$i") + 1))"; done

for i in "${NODES[@]}"; do
  p=$(node_port "$i")
  if bash -c "exec 3<>/dev/tcp/127.0.0.1/$p" 2>/dev/null; then
    echo "something already listens on 127.0.0.1:$p; set PORT" >&2
    exit 1
  fi
done
raw=$(bench_raw_dir "$out")
if [[ -n $(ls -A "$raw" 2>/dev/null) ]]; then
  echo "$raw already holds results; give another OUT (or move them away)" >&2
  exit 1
fi
if [[ " $BROKERS " == *" kafka "* ]]; then bench/kafka/fetch-kafka.sh; fi
[[ ${SKIP_BUILD:-} == 1 ]] || cargo build --release --quiet -p laminar -p laminar-load
bin=$PWD/target/release/laminar
load=$PWD/target/release/laminar-load
mkdir -p "$out" "$raw/series"
work=$(mktemp -d "$PWD/.bench-cluster.XXXXXX")
# The secret the brokers prove to each other on the controller port (docs/security.md).
secret="$work/controller.secret"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$secret"
chmod 600 "$secret"
cgroup=/sys/fs/cgroup/blkio/laminar-cluster-$$
declare -A launcher_pid=() # node -> what to stop (laminar itself, or run-kafka.sh)
declare -A broker_pid=()   # node -> the broker process (Kafka: the java child)
load_pids=()
top_pid=""

cleanup() {
  local p n
  for p in "${load_pids[@]}" $top_pid; do kill -TERM "$p" 2>/dev/null || true; done
  remove_blkio_cgroup "$cgroup"
  for n in "${!launcher_pid[@]}"; do
    p=${launcher_pid[$n]}
    if [[ -n $p ]] && kill -0 "$p" 2>/dev/null; then kill -TERM "$p" 2>/dev/null || true; fi
  done
  for n in "${!launcher_pid[@]}"; do wait "${launcher_pid[$n]}" 2>/dev/null || true; done
  rm -rf "$work"
}
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
  echo "kafka: 4.3.1, jars from Maven Central in $KAFKA_LIB; heap $KAFKA_HEAP per broker; $(java -version 2>&1 | head -1)"
  echo "librdkafka (laminar perf): rdkafka-sys $(awk '/^name = "rdkafka-sys"/ {getline; gsub(/"/, "", $3); print $3}' Cargo.lock)"
  echo "part: $part; brokers: $BROKERS; rounds: $ROUNDS"
  echo "cluster: 3 processes, each broker + controller voter, replication factor 3, min.insync.replicas 1 (both defaults)"
  echo "network threads: $NETWORK_THREADS, io threads: $IO_THREADS (each broker)"
  echo "flush: both brokers' defaults (Laminar fsyncs before acks=all is answered on every replica; Kafka does not fsync)"
  if [[ $part == produce ]]; then
    echo "ProducerPerformance: $N records of 1024 B, --throughput -1, acks=all, 1 and 6 partitions"
    echo "perf latency: as fast as it goes for $MAX_S s, acks=all, 1 partition; $RATE records/s of 512 B for $DURATION_S s, acks=all, after $WARMUP_S s of the same"
  else
    echo "fill: $FILL_BYTES bytes of 1 KiB records into big (1 partition) with one follower stopped, then evicted"
    echo "leader's disk reads throttled to $READ_BPS B/s, $READ_IOPS IOPS ($DEVICE)"
    echo "producers ($PRODUCER): $RATE records/s of 512 B each, acks=1 to hot-acks1, acks=all to hot-acksall (3 partitions each), linger.ms=0, $DURATION_S s per phase after a $WARMUP_S s warm-up"
  fi
} > "$out/config.txt"
cat "$out/config.txt"

# start_node BROKER NODE DATA CLUSTER_ID: in the background; waits for nothing.
start_node() {
  local broker=$1 node=$2 data=$3 cid=$4 port
  port=$(node_port "$node")
  case $broker in
    laminar)
      "$bin" serve --listen "127.0.0.1:$port" --data-dir "$data" \
        --metrics-listen "127.0.0.1:$((port + 5))" \
        --config "$work/laminar.toml" --set "node.id=$node" \
        --set "controller.quorum.voters=$voters" --set "controller.quorum.secret.file=$secret" > "$data.log" 2>&1 &
      ;;
    kafka)
      KAFKA_NODE_ID=$node KAFKA_QUORUM_VOTERS=$voters KAFKA_CLUSTER_ID=$cid KAFKA_INTERNAL_RF=3 \
        CONTROLLER_PORT=$((port + 1)) KAFKA_HEAP_OPTS=$KAFKA_HEAP \
        KAFKA_NETWORK_THREADS=$NETWORK_THREADS KAFKA_IO_THREADS=$IO_THREADS \
        bench/kafka/run-kafka.sh "$port" "$data" > "$data.log" 2>&1 &
      ;;
  esac
  launcher_pid[$node]=$!
  broker_pid[$node]=""
}

wait_node() { # NODE
  local node=$1 port launcher
  port=$(node_port "$node")
  launcher=${launcher_pid[$node]}
  for _ in $(seq 1 180); do
    if bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null; then
      broker_pid[$node]=$(pgrep -P "$launcher" -x java || echo "$launcher")
      return 0
    fi
    kill -0 "$launcher" 2>/dev/null || { echo "node $node exited before listening" >&2; return 1; }
    sleep 1
  done
  echo "node $node did not listen on $port in 180 s" >&2
  return 1
}

stop_node() { # NODE
  local node=$1
  kill -TERM "${launcher_pid[$node]}"
  wait "${launcher_pid[$node]}" || true
  unset "launcher_pid[$node]" "broker_pid[$node]"
}

start_cluster() { # BROKER TAG
  local broker=$1 tag=$2 cid="" i
  if [[ $broker == kafka ]]; then
    cid=$(timeout 60 java -cp "$KAFKA_LIB/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n1)
  fi
  for i in "${NODES[@]}"; do start_node "$broker" "$i" "$work/$tag-n$i" "$cid"; done
  for i in "${NODES[@]}"; do wait_node "$i"; done
  # The machine's CPU through the round (two cores for three brokers and the loads).
  top -b -d 5 > "$raw/$tag-top.txt" 2>&1 &
  top_pid=$!
}

stop_cluster() { # TAG: stops every node still running, keeps their logs
  local tag=$1 i
  if [[ -n $top_pid ]]; then kill "$top_pid" 2>/dev/null || true; wait "$top_pid" 2>/dev/null || true; fi
  top_pid=""
  gzip -f "$raw/$tag-top.txt"
  for i in "${!launcher_pid[@]}"; do stop_node "$i"; done
  for i in "${NODES[@]}"; do
    cp "$work/$tag-n$i.log" "$raw/$tag-n$i.log" 2>/dev/null || true
    # Kafka's INFO log (ISR changes, fetcher errors) lives in its data dir: keep it.
    if [[ -f $work/$tag-n$i/server.log ]]; then
      gzip -c "$work/$tag-n$i/server.log" > "$raw/$tag-n$i-server.log.gz"
    fi
    rm -rf "$work/$tag-n$i"
  done
}

# create_topic TAG NAME PARTITIONS: replication factor 3, retried while the brokers register.
create_topic() {
  local tag=$1 name=$2 partitions=$3 file=$raw/$1-topics.txt
  for _ in $(seq 1 60); do
    if "$bin" topics create "$name" --partitions "$partitions" --replication-factor 3 \
      --bootstrap "$bootstrap" >> "$file" 2>&1; then
      return 0
    fi
    sleep 1
  done
  echo "creating $name failed, see $file" >&2
  return 1
}

# wait_isr TOPIC SIZE: until every partition of TOPIC has SIZE in-sync replicas (max 120 s).
wait_isr() {
  local topic=$1 size=$2
  for _ in $(seq 1 120); do
    if kcat -b "$bootstrap" -L -J -t "$topic" 2>/dev/null |
      jq -e --argjson n "$size" '[.topics[0].partitions[] | (.isrs | length) == $n] | all and length > 0' > /dev/null; then
      return 0
    fi
    sleep 1
  done
  echo "$topic did not reach $size in-sync replicas" >&2
  return 1
}

leader_of() { # TOPIC: partition 0's leader
  kcat -b "$bootstrap" -L -J -t "$1" | jq -r '.topics[0].partitions[] | select(.partition == 0) | .leader'
}

# run_load FILE COMMAND...: with a time limit, output to FILE after the command line.
run_load() {
  local file=$1 rc=0
  shift
  echo "\$ $*" > "$file"
  echo "$(date +%T) $(basename "$file" .txt)"
  timeout "$LOAD_TIMEOUT_S" "$@" >> "$file" 2>&1 || rc=$?
  echo "[exit $rc]" >> "$file"
  if ((rc != 0)); then echo "warning: $(basename "$file") exited $rc" >&2; fi
}

display_name() { case $1 in laminar) echo Laminar ;; kafka) echo Kafka ;; *) echo "$1" ;; esac; }

produce_round() { # BROKER ROUND
  local broker=$1 round=$2 tag=r$2-$1 p
  start_cluster "$broker" "$tag"
  for p in 1 6; do create_topic "$tag" "pp-p$p" "$p"; done
  create_topic "$tag" max-p1 1
  create_topic "$tag" latency-p1 1
  for p in 1 6; do wait_isr "pp-p$p" 3; done
  wait_isr max-p1 3
  wait_isr latency-p1 3
  for p in 1 6; do
    run_load "$raw/$tag-pp-p$p.txt" "${java_tool[@]}" org.apache.kafka.tools.ProducerPerformance \
      --bootstrap-server "$bootstrap" --topic "pp-p$p" --num-records "$N" --record-size 1024 \
      --throughput -1 --command-property acks=all
  done
  run_load "$raw/$tag-max-p1.txt" "$load" latency --bootstrap "$bootstrap" --topic max-p1 \
    --records-per-s 0 --record-bytes 1024 --duration-s "$MAX_S" --acks all --json
  # The fixed-rate load is measured after WARMUP_S of the same load (a fresh JVM needs it).
  "$load" latency --bootstrap "$bootstrap" --topic latency-p1 --records-per-s "$RATE" \
    --record-bytes 512 --duration-s "$WARMUP_S" --acks all > /dev/null 2>&1
  run_load "$raw/$tag-latency-p1.txt" "$load" latency --bootstrap "$bootstrap" \
    --topic latency-p1 --records-per-s "$RATE" --record-bytes 512 --duration-s "$DURATION_S" \
    --acks all --json --series-out "$raw/series/$tag-latency-p1.json" \
    --label "$(display_name "$broker") acks=all r$round"
  stop_cluster "$tag"
}

big_bytes() { # DATA: bytes of `big`'s segments in DATA
  find "$1" -path '*big-0*' -name '*.log' -printf '%s\n' 2>/dev/null | awk '{s += $1} END {print s + 0}'
}

# Two producers at once, acks=1 and acks=all, for DURATION_S; PHASE labels the files.
measure_hot() { # BROKER TAG PHASE
  local broker=$1 tag=$2 phase=$3 acks pids=()
  for acks in 1 all; do
    if [[ $PRODUCER == java ]]; then
      # The Java client disables idempotence by itself at acks=1.
      timeout "$LOAD_TIMEOUT_S" "${java_tool[@]}" org.apache.kafka.tools.ProducerPerformance \
        --bootstrap-server "$bootstrap" --topic "hot-acks$acks" --record-size 512 \
        --num-records $((RATE * (WARMUP_S + DURATION_S))) --warmup-records $((RATE * WARMUP_S)) \
        --throughput "$RATE" --command-property "acks=$acks" linger.ms=0 \
        > "$raw/$tag-$phase-acks$acks.txt" 2>&1 &
    else
      timeout "$LOAD_TIMEOUT_S" "$load" latency --bootstrap "$bootstrap" --topic "hot-acks$acks" \
        --records-per-s "$RATE" --record-bytes 512 --duration-s "$DURATION_S" --acks "$acks" --json \
        --series-out "$raw/series/$tag-$phase-acks$acks.json" \
        --label "$(display_name "$broker") $phase acks=$acks" > "$raw/$tag-$phase-acks$acks.txt" 2>&1 &
    fi
    pids+=($!)
  done
  load_pids=("${pids[@]}")
  for p in "${pids[@]}"; do wait "$p" || echo "warning: a $phase producer exited $?" >&2; done
  load_pids=()
top_pid=""
}

s1f_round() { # BROKER ROUND
  local broker=$1 round=$2 tag=r$2-$1 leader follower i fill
  start_cluster "$broker" "$tag"
  create_topic "$tag" big 1
  create_topic "$tag" hot-acks1 3
  create_topic "$tag" hot-acksall 3
  for t in big hot-acks1 hot-acksall; do wait_isr "$t" 3; done
  leader=$(leader_of big)
  follower=$(( leader % 3 + 1 ))
  echo "big: leader $leader, stopped follower $follower" | tee "$raw/$tag-roles.txt"
  stop_node "$follower"
  fill=$("$load" fill --bootstrap "$bootstrap" --topic big --bytes "$FILL_BYTES" --json)
  echo "$fill" > "$raw/$tag-fill.txt"
  "$load" latency --bootstrap "$bootstrap" --topic hot-acks1 --records-per-s "$RATE" \
    --record-bytes 512 --duration-s "$WARMUP_S" > /dev/null 2>&1
  "$load" latency --bootstrap "$bootstrap" --topic hot-acksall --records-per-s "$RATE" \
    --record-bytes 512 --duration-s "$WARMUP_S" --acks all > /dev/null 2>&1
  sync
  for i in "${NODES[@]}"; do evict_big "$work/$tag-n$i"; done
  find "$work/$tag-n$leader" -path '*big-*' -type f -exec fincore --bytes {} + > "$raw/$tag-fincore-leader.txt" || true
  mkdir "$cgroup"
  echo "$DEVICE $READ_BPS" > "$cgroup/blkio.throttle.read_bps_device"
  echo "$DEVICE $READ_IOPS" > "$cgroup/blkio.throttle.read_iops_device"
  echo "${broker_pid[$leader]}" > "$cgroup/cgroup.procs"
  measure_hot "$broker" "$tag" alone
  # The follower comes back: it catches up on `big` from the leader's cold, throttled disk
  # while both producers run.
  start_node "$broker" "$follower" "$work/$tag-n$follower" ""
  measure_hot "$broker" "$tag" catch-up
  echo "follower's big after the catch-up phase: $(big_bytes "$work/$tag-n$follower") of $(big_bytes "$work/$tag-n$leader") bytes" |
    tee -a "$raw/$tag-roles.txt"
  if [[ $broker == laminar ]]; then
    # Did the leader's socket threads stall, and how long did its disk calls take?
    curl -s "http://127.0.0.1:$(($(node_port "$leader") + 5))/metrics" |
      grep -E '^laminar_(event_loop|disk_call|fetch_stuck)' > "$raw/$tag-leader-metrics.txt" || true
  fi
  echo "${broker_pid[$leader]}" > /sys/fs/cgroup/blkio/cgroup.procs
  rmdir "$cgroup"
  stop_cluster "$tag"
}

read -r -a brokers <<< "$BROKERS"
for round in $(seq 1 "$ROUNDS"); do
  order=("${brokers[@]}")
  if ((round % 2 == 0)); then
    order=()
    for ((i = ${#brokers[@]} - 1; i >= 0; i--)); do order+=("${brokers[i]}"); done
  fi
  echo "round $round: ${order[*]}" | tee -a "$out/order.txt"
  for broker in "${order[@]}"; do
    # The previous round's deleted data must not slow this one's disk (see settle_disk).
    settle_disk
    if [[ $part == produce ]]; then produce_round "$broker" "$round"; else s1f_round "$broker" "$round"; fi
  done
done

LAMINAR=$bin python3 bench/cluster_summary.py "$part" "$out"
