#!/usr/bin/env bash
# Scenario S1, cold catch-up (seed 000, KAFKA-7504), measured with Apache Kafka 4.3.1's own Java
# clients (org.apache.kafka.tools.ProducerPerformance and ConsumerPerformance) instead of
# `laminar perf` (librdkafka, bench/scenarios.sh s1): a consumer catches up on data that has
# left the page cache, from a disk throttled like a hard disk, while a producer runs at a fixed
# rate; does the producer's latency suffer?
#
# For each broker of BROKERS, one after the other (Laminar: `laminar serve`, Kafka:
# bench/kafka/run-kafka.sh; num.network.threads=NETWORK_THREADS on both):
#   1. start it on 127.0.0.1:PORT, data on this disk (a scratch dir under the repository);
#   2. create topic `big` (4 partitions) and `hot` (1 partition); fill `big` with FILL_RECORDS
#      records of 1024 B (ProducerPerformance, --throughput -1, acks=1);
#   3. ROUNDS_LAMINAR or ROUNDS_KAFKA rounds on that broker, each:
#      - settle the disk (sync, 6 s idle), drop the page cache (echo 1 > drop_caches: `big` is
#        cold again, every round);
#      - put the broker's process (all its threads) into a blkio cgroup throttling its disk
#        reads to READ_BPS bytes/s (and READ_IOPS reads/s when set);
#      - warm-up: ProducerPerformance to `hot`, RATE records/s of 512 B for WARMUP_S (kept in
#        the raw files, not summarised);
#      (a) ProducerPerformance to `hot`: RATE records/s of 512 B, acks=1, linger.ms=0
#          (PRODUCER_PROPS), RATE*(PRODUCER_WARMUP_S+DURATION_S) records of which the first
#          RATE*PRODUCER_WARMUP_S are --warmup-records (the fresh JVM's first sends, left out
#          of its steady-state percentiles): DURATION_S seconds measured, alone;
#      (b) the same producer while ConsumerPerformance reads `big` from offset 0 (a new group
#          every round, auto.offset.reset=earliest). The producer starts CONSUMER_LEAD_S after
#          the consumer's first progress line (it has joined its group and is fetching: the
#          catch-up is under way), and the consumer is stopped (by PID) when the producer
#          ends. Its MB/s over the producer's lifetime comes from its per-second
#          --show-detailed-stats lines;
#      - take the broker out of the cgroup, remove the cgroup.
#      Laminar only: its Prometheus metrics (--metrics-listen 127.0.0.1:METRICS_PORT) are saved
#      right before and right after each phase, so the summary can diff the histograms per
#      phase (fallocate calls, Produce request phases).
#   4. stop the broker, delete its data.
# Raw output (every tool's stdout+stderr, metrics, /proc/PID/io, the cgroup's byte counts, the
# phases' wall-clock times) goes to the run's raw directory outside the repository
# (bench_raw_dir OUT, bench/machine.sh: by default /var/tmp/laminar-bench-raw/<OUT's name>);
# bench/s1_java_summary.py writes OUT/summary.md
# (printed too): per broker and round the producer's p50/p99/p99.9/max in both phases, the
# consumer's MB/s, and pass = b.p99 <= max(1.2*a.p99, a.p99+5 ms) and b.max < 100 ms and
# consumer >= 0.9*READ_BPS (both in MB = 10^6 bytes).
# Needs root (drop_caches, a cgroup v1 blkio cgroup). Kafka comes from bench/kafka (Maven jars).
#
# Usage: bench/s1_java.sh [OUT]      (OUT default: bench/results/<date>-<host>-s1-java)
# Env:   BROKERS ("laminar kafka"), ROUNDS_LAMINAR (10), ROUNDS_KAFKA (2),
#        FILL_RECORDS (3500000), RATE (5000), DURATION_S (60), WARMUP_S (10),
#        PRODUCER_WARMUP_S (2), CONSUMER_LEAD_S (2), READ_BPS (20971520 = 20 MiB/s),
#        READ_IOPS (0: not set), FETCH_SIZE (1048576, ConsumerPerformance --fetch-size),
#        PRODUCER_PROPS ("acks=1 linger.ms=0"), PORT (19492; Kafka's controller takes PORT+1),
#        METRICS_PORT (PORT+5, Laminar's metrics), NETWORK_THREADS (1),
#        TOOL_HEAP (-Xmx512M), KAFKA_HEAP (-Xmx1g -Xms256m), FILL_TIMEOUT_S (1800),
#        SKIP_BUILD=1 (use target/release/laminar as it is), KAFKA_LIB (/tmp/kafka-lib),
#        TLS=1 (issue 30: the producer and the consumer over TLS, each broker with a PLAINTEXT
#        listener on PORT, for creating topics, and an SSL one on PORT+2; the same PEM
#        certificate, RSA 2048, for both brokers; bench/machine.sh make_tls_certs).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/machine.sh disable=SC1091
source bench/machine.sh

out=${1:-bench/results/$(date +%F)-$(hostname)-s1-java}
BROKERS=${BROKERS:-"laminar kafka"}
ROUNDS_LAMINAR=${ROUNDS_LAMINAR:-10}
ROUNDS_KAFKA=${ROUNDS_KAFKA:-2}
FILL_RECORDS=${FILL_RECORDS:-3500000}
RATE=${RATE:-5000}
DURATION_S=${DURATION_S:-60}
WARMUP_S=${WARMUP_S:-10}
PRODUCER_WARMUP_S=${PRODUCER_WARMUP_S:-2}
CONSUMER_LEAD_S=${CONSUMER_LEAD_S:-2}
READ_BPS=${READ_BPS:-20971520}
READ_IOPS=${READ_IOPS:-0}
TLS=${TLS:-0}
FETCH_SIZE=${FETCH_SIZE:-1048576}
PRODUCER_PROPS=${PRODUCER_PROPS:-"acks=1 linger.ms=0"}
PORT=${PORT:-19492}
METRICS_PORT=${METRICS_PORT:-$((PORT + 5))}
NETWORK_THREADS=${NETWORK_THREADS:-1}
TOOL_HEAP=${TOOL_HEAP:--Xmx512M}
KAFKA_HEAP=${KAFKA_HEAP:--Xmx1g -Xms256m}
FILL_TIMEOUT_S=${FILL_TIMEOUT_S:-1800}
export KAFKA_LIB=${KAFKA_LIB:-/tmp/kafka-lib}
DEVICE=$(cat /sys/block/vda/dev)
bootstrap=127.0.0.1:$PORT
ssl_bootstrap=127.0.0.1:$((PORT + 2))
# Where the producer and the consumer connect, and what else they are told (TLS=1).
client_bootstrap=$bootstrap
client_config=()
read -r -a producer_props <<< "$PRODUCER_PROPS"
# Every client has a time limit: a phase's producer its own duration plus this much.
CLIENT_SLACK_S=120

for b in $BROKERS; do
  [[ $b == laminar || $b == kafka ]] || { echo "unknown broker $b: laminar or kafka" >&2; exit 2; }
done
((EUID == 0)) || { echo "needs root (drop_caches, a blkio cgroup)" >&2; exit 1; }
[[ -d /sys/fs/cgroup/blkio ]] || { echo "no cgroup v1 blkio hierarchy at /sys/fs/cgroup/blkio" >&2; exit 1; }
# A listener already there would make wait_port succeed against the wrong broker.
for p in "$PORT" $((PORT + 1)) $((PORT + 2)) "$METRICS_PORT"; do
  if bash -c "exec 3<>/dev/tcp/127.0.0.1/$p" 2>/dev/null; then
    echo "something already listens on 127.0.0.1:$p; set PORT" >&2
    exit 1
  fi
done
# Stale raw files from another run would be summarised with these ones.
raw=$(bench_raw_dir "$out")
if [[ -n $(ls -A "$raw" 2>/dev/null) ]]; then
  echo "$raw already holds results; give another OUT (or move them away)" >&2
  exit 1
fi

bench/kafka/fetch-kafka.sh
[[ ${SKIP_BUILD:-} == 1 ]] || cargo build --release -p laminar --quiet
mkdir -p "$out" "$raw"
work=$(mktemp -d "$PWD/.bench-s1java.XXXXXX")
# A copy of the binary: target/release/laminar may be rebuilt while this runs, and the broker,
# the topics CLI and the version in config.txt must all be the same build.
cp target/release/laminar "$work/laminar"
bin=$work/laminar
cgroup=/sys/fs/cgroup/blkio/laminar-s1java-$$
launcher_pid="" # what to stop: laminar itself, or run-kafka.sh (it forwards SIGTERM to the JVM)
broker_pid=""   # the process that does the I/O (Kafka: run-kafka.sh's java child)
client_pids=()  # the clients running now (their `timeout` wrappers, which pass signals on)

cleanup() {
  local p
  for p in "${client_pids[@]}"; do
    if kill -0 "$p" 2>/dev/null; then kill -TERM "$p" 2>/dev/null || true; fi
  done
  for p in "${client_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  remove_blkio_cgroup "$cgroup"
  if [[ -n $launcher_pid ]] && kill -0 "$launcher_pid" 2>/dev/null; then
    kill -TERM "$launcher_pid" 2>/dev/null || true
    wait "$launcher_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
# Bash runs the EXIT trap on `exit`; turn TERM/INT into one so the cleanup always happens.
trap 'exit 143' TERM
trap 'exit 130' INT

java_tool_setup

# group.initial.rebalance.delay.ms = 0 as run-kafka.sh sets it for Kafka (Laminar's default is
# Kafka's 3000 ms): the consumer's group join is not what is measured.
cat > "$work/laminar.toml" <<TOML
"num.network.threads" = $NETWORK_THREADS
"group.initial.rebalance.delay.ms" = 0
TOML
kafka_extra=""
if [[ $TLS == 1 ]]; then
  make_tls_certs "$work"
  cat >> "$work/laminar.toml" <<TOML
"listeners" = "PLAINTEXT://$bootstrap,SSL://$ssl_bootstrap"
"ssl.keystore.type" = "PEM"
"ssl.keystore.location" = "$work/keystore.pem"
TOML
  kafka_extra="listeners=PLAINTEXT://$bootstrap,SSL://$ssl_bootstrap,CONTROLLER://127.0.0.1:$((PORT + 1))
advertised.listeners=PLAINTEXT://$bootstrap,SSL://$ssl_bootstrap,CONTROLLER://127.0.0.1:$((PORT + 1))
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL
ssl.keystore.type=PEM
ssl.keystore.location=$work/keystore.pem"
  client_bootstrap=$ssl_bootstrap
  client_config=(--command-config "$work/ssl-client.properties")
fi

{
  machine_info "$work"
  echo "laminar binary: $("$bin" --version) (a copy of target/release/laminar taken at the start)"
  echo "kafka: $("${java_tool[@]}" org.apache.kafka.tools.ConsumerPerformance --version 2>/dev/null | tail -n1) (jars from Maven Central in $KAFKA_LIB; broker heap $KAFKA_HEAP)"
  echo "java: $(java -version 2>&1 | paste -sd ';' | sed 's/;/; /g')"
  echo "clients: Kafka's ProducerPerformance and ConsumerPerformance (Java client), JVM ${TOOL_HEAP}"
  echo "brokers: $BROKERS"
  echo "rounds laminar: $ROUNDS_LAMINAR"
  echo "rounds kafka: $ROUNDS_KAFKA"
  echo "fill records: $FILL_RECORDS"
  echo "fill: $FILL_RECORDS records of 1024 B into big (4 partitions), ProducerPerformance --throughput -1, acks=1"
  echo "rate: $RATE"
  echo "duration s: $DURATION_S"
  echo "warmup s: $WARMUP_S"
  echo "producer warmup s: $PRODUCER_WARMUP_S"
  echo "consumer lead s: $CONSUMER_LEAD_S"
  echo "read bps: $READ_BPS"
  echo "read iops: $READ_IOPS"
  echo "device: $DEVICE"
  echo "producer: $RATE records/s of 512 B to hot (1 partition), $PRODUCER_PROPS, $DURATION_S s measured after $PRODUCER_WARMUP_S s of --warmup-records; a $WARMUP_S s warm-up producer before each round"
  echo "consumer: ConsumerPerformance on big from offset 0, a new group each round, --fetch-size $FETCH_SIZE; the producer starts $CONSUMER_LEAD_S s after its first progress line"
  echo "throttle: the broker's disk reads limited to $READ_BPS B/s$( ((READ_IOPS > 0)) && echo ", $READ_IOPS IOPS") on $DEVICE (blkio cgroup v1), page cache dropped before each round"
  echo "network threads: $NETWORK_THREADS (Laminar num.network.threads, Kafka num.network.threads); group.initial.rebalance.delay.ms 0 on both; other settings the brokers' defaults"
  if [[ $TLS == 1 ]]; then
    echo "tls: producer and consumer over TLS (an SSL listener on $ssl_bootstrap; PEM keystore, RSA 2048; the CA as the clients' PEM truststore); kernel TLS: $(cat /proc/sys/net/ipv4/tcp_available_ulp 2>/dev/null || echo unknown) (tcp_available_ulp)"
  fi
} > "$out/config.txt"
cat "$out/config.txt"

# start_broker BROKER DATA_DIR: in the background; waits for its port, sets launcher_pid and
# broker_pid.
start_broker() {
  local broker=$1 data=$2
  case $broker in
    laminar)
      # With TLS=1 the listeners come from the config file (--listen would replace them
      # with one PLAINTEXT listener).
      local listen=(--listen "$bootstrap")
      [[ $TLS == 1 ]] && listen=()
      "$bin" serve "${listen[@]}" --metrics-listen "127.0.0.1:$METRICS_PORT" \
        --data-dir "$data" --config "$work/laminar.toml" > "$raw/$broker-broker.log" 2>&1 &
      launcher_pid=$!
      broker_pid=$launcher_pid
      ;;
    kafka)
      KAFKA_NETWORK_THREADS=$NETWORK_THREADS KAFKA_HEAP_OPTS=$KAFKA_HEAP KAFKA_EXTRA_PROPS=$kafka_extra \
        bench/kafka/run-kafka.sh "$PORT" "$data" > "$raw/$broker-broker.log" 2>&1 &
      launcher_pid=$!
      ;;
  esac
  wait_port
  if [[ $broker == kafka ]]; then
    # run-kafka.sh's direct java child is kafka.Kafka (the storage format has exited by now).
    broker_pid=$(pgrep -P "$launcher_pid" -x java)
  fi
  echo "$broker: launcher pid $launcher_pid, broker pid $broker_pid" | tee -a "$raw/pids.txt"
}

create_topic() { # NAME PARTITIONS TAG
  local file=$raw/$3-topics.txt
  for _ in $(seq 1 30); do
    if timeout 60 "$bin" topics create "$1" --partitions "$2" --bootstrap "$bootstrap" >> "$file" 2>&1; then
      return 0
    fi
    sleep 1
  done
  echo "creating topic $1 failed, see $file" >&2
  return 1
}

now() { date +%s.%N; }

# producer FILE TOPIC RECORDS WARMUP_RECORDS RECORD_BYTES THROUGHPUT TIMEOUT [PROPS...]: a
# ProducerPerformance in the background (its timeout wrapper's PID in $!), all output to FILE
# after a line with the command.
producer() {
  local file=$1 topic=$2 records=$3 warmup=$4 size=$5 throughput=$6 limit=$7
  shift 7
  local cmd=("${java_tool[@]}" org.apache.kafka.tools.ProducerPerformance --bootstrap-server "$client_bootstrap"
    --topic "$topic" --num-records "$records" --record-size "$size" --throughput "$throughput"
    "${client_config[@]}")
  ((warmup > 0)) && cmd+=(--warmup-records "$warmup")
  cmd+=(--command-property "$@")
  echo "\$ ${cmd[*]}" > "$file"
  timeout "$limit" "${cmd[@]}" >> "$file" 2>&1 &
}

# wait_client PID FILE [STOPPED]: waits for a client, records its exit code in FILE; STOPPED=1:
# the script stopped it (SIGTERM, exit 143 expected).
wait_client() {
  local rc=0
  wait "$1" || rc=$?
  echo "[exit $rc]" >> "$2"
  if ((rc != 0)) && ! [[ ${3:-0} == 1 && $rc == 143 ]]; then
    echo "warning: $(basename "$2") exited $rc" >&2
  fi
}

scrape() { # TAG PHASE WHEN: Laminar's metrics, the broker's /proc/PID/io, the cgroup's bytes
  local tag=$1 phase=$2 when=$3
  if [[ $tag == *laminar* ]]; then
    curl -s --max-time 10 "http://127.0.0.1:$METRICS_PORT/metrics" > "$raw/$tag-$phase-metrics-$when.prom" ||
      echo "warning: metrics scrape $tag $phase $when failed" >&2
  fi
  cat "/proc/$broker_pid/io" > "$raw/$tag-$phase-io-$when.txt" 2>/dev/null || true
  cat "$cgroup/blkio.throttle.io_service_bytes" > "$raw/$tag-$phase-blkio-$when.txt" 2>/dev/null || true
}

phase_records=$((RATE * (PRODUCER_WARMUP_S + DURATION_S)))
phase_warmup=$((RATE * PRODUCER_WARMUP_S))
phase_limit=$((PRODUCER_WARMUP_S + DURATION_S + CLIENT_SLACK_S))

run_round() { # BROKER ROUND
  local broker=$1 round=$2 tag=r$2-$1 pid cpid t0 t1 tc0 tc1
  echo "$(date +%T) $broker round $round"
  settle_disk vda
  echo 1 > /proc/sys/vm/drop_caches
  # What is left of `big` in the page cache (RES column): the proof it is cold.
  find "$data" -path '*big-*' -type f -exec fincore --bytes {} + > "$raw/$tag-fincore.txt" 2>&1 || true
  mkdir "$cgroup"
  echo "$DEVICE $READ_BPS" > "$cgroup/blkio.throttle.read_bps_device"
  if ((READ_IOPS > 0)); then echo "$DEVICE $READ_IOPS" > "$cgroup/blkio.throttle.read_iops_device"; fi
  # cgroup v1: writing a PID to cgroup.procs moves its whole thread group.
  echo "$broker_pid" > "$cgroup/cgroup.procs"

  producer "$raw/$tag-warmup.txt" hot $((RATE * WARMUP_S)) 0 512 "$RATE" \
    $((WARMUP_S + CLIENT_SLACK_S)) "${producer_props[@]}"
  pid=$!
  client_pids=("$pid")
  wait_client "$pid" "$raw/$tag-warmup.txt"

  # (a) alone
  scrape "$tag" a before
  t0=$(now)
  producer "$raw/$tag-a-producer.txt" hot "$phase_records" "$phase_warmup" 512 "$RATE" \
    "$phase_limit" "${producer_props[@]}"
  pid=$!
  client_pids=("$pid")
  wait_client "$pid" "$raw/$tag-a-producer.txt"
  t1=$(now)
  scrape "$tag" a after
  printf 'producer_start %s\nproducer_end %s\n' "$t0" "$t1" > "$raw/$tag-a-times.txt"

  # (b) with the cold consumer
  scrape "$tag" b before
  local cfile=$raw/$tag-b-consumer.txt
  local ccmd=("${java_tool[@]}" org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$client_bootstrap" "${client_config[@]}"
    --topic big --num-records "$FILL_RECORDS" --group "s1java-$broker-r$round-$$"
    --fetch-size "$FETCH_SIZE" --timeout 60000 --reporting-interval 1000 --show-detailed-stats
    --date-format "yyyy-MM-dd'T'HH:mm:ss.SSSZ")
  echo "\$ ${ccmd[*]}" > "$cfile"
  tc0=$(now)
  timeout $((60 + CONSUMER_LEAD_S + phase_limit + 30)) "${ccmd[@]}" >> "$cfile" 2>&1 &
  cpid=$!
  client_pids=("$cpid")
  # The catch-up is under way once the consumer prints its first progress line (it has joined
  # its group and fetched): wait for it (at most 60 s), then CONSUMER_LEAD_S more.
  local tcf=""
  for _ in $(seq 1 600); do
    if grep -q '^[0-9]\{4\}-' "$cfile"; then tcf=$(now); break; fi
    kill -0 "$cpid" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n $tcf ]] || echo "warning: $tag: no progress line from the consumer before the producer" >&2
  sleep "$CONSUMER_LEAD_S"
  t0=$(now)
  producer "$raw/$tag-b-producer.txt" hot "$phase_records" "$phase_warmup" 512 "$RATE" \
    "$phase_limit" "${producer_props[@]}"
  pid=$!
  client_pids=("$cpid" "$pid")
  wait_client "$pid" "$raw/$tag-b-producer.txt"
  t1=$(now)
  # The consumer has done its part (or finished `big` early): stop it by its PID.
  local stopped=0
  if kill -0 "$cpid" 2>/dev/null; then
    kill -TERM "$cpid" 2>/dev/null || true
    echo "[stopped by the script when the producer ended]" >> "$cfile"
    stopped=1
  fi
  wait_client "$cpid" "$cfile" "$stopped"
  tc1=$(now)
  client_pids=()
  scrape "$tag" b after
  printf 'consumer_start %s\nconsumer_fetching %s\nproducer_start %s\nproducer_end %s\nconsumer_end %s\n' \
    "$tc0" "${tcf:-none}" "$t0" "$t1" "$tc1" > "$raw/$tag-b-times.txt"

  echo "$broker_pid" > /sys/fs/cgroup/blkio/cgroup.procs
  rmdir "$cgroup"
}

for broker in $BROKERS; do
  case $broker in laminar) rounds=$ROUNDS_LAMINAR ;; kafka) rounds=$ROUNDS_KAFKA ;; esac
  ((rounds > 0)) || continue
  data=$work/data-$broker
  settle_disk vda
  start_broker "$broker" "$data"
  create_topic big 4 "$broker"
  create_topic hot 1 "$broker"
  echo "$(date +%T) $broker fill: $FILL_RECORDS records"
  producer "$raw/$broker-fill.txt" big "$FILL_RECORDS" 0 1024 -1 "$FILL_TIMEOUT_S" acks=1
  pid=$!
  client_pids=("$pid")
  wait_client "$pid" "$raw/$broker-fill.txt"
  client_pids=()
  du -sk "$data" | awk '{print "data dir kB after the fill: " $1}' > "$raw/$broker-du.txt"
  for round in $(seq 1 "$rounds"); do run_round "$broker" "$round"; done
  du -sk "$data" | awk '{print "data dir kB at the end: " $1}' >> "$raw/$broker-du.txt"
  stop_broker
  # Kafka's INFO log lives in its data dir: keep it.
  if [[ -f $data/server.log ]]; then gzip -c "$data/server.log" > "$raw/$broker-server.log.gz"; fi
  rm -rf "$data"
done

python3 bench/s1_java_summary.py "$out"
