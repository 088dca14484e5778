#!/usr/bin/env bash
# shellcheck disable=SC2034,SC2154  # work, java_tool, broker_pid: set and read by the sourced files
# Issue 30's TLS benchmark, first part: Laminar beside Apache Kafka 4.3.1, each with a
# PLAINTEXT and an SSL listener (the same PEM certificate, TLS 1.3 negotiated by both), measured
# with Kafka's own perf tools (the Java client) over each:
#   1. ProducerPerformance: N records of 1024 B, --throughput -1, acks=1, to a 1-partition topic;
#   2. ConsumerPerformance: those N records, in a consumer group;
#   3. (BURST > 0) established producers during a burst of new TLS connections: a
#      ProducerPerformance over TLS, RATE records/s of 512 B, acks=1, linger.ms=0, to a
#      1-partition topic, BURST_S seconds measured after 2 s of --warmup-records, twice: alone
#      ("steady"), then with a burst of BURST new TLS connections (bench/tls_burst.py: each a
#      handshake and one ApiVersions, all opened at once and held until all are answered) a
#      third and two thirds of the way through ("burst").
# ROUNDS rounds in alternating broker order (a fresh broker and data directory each time);
# within a round, plaintext then TLS. This kernel has no kernel TLS (tcp_available_ulp lists
# no `tls`), so Laminar's fetches over TLS are read on the I/O pool and encrypted in user space
# (the measured fallback), as Kafka's are. Raw output in the run's raw directory outside the
# repository (bench_raw_dir OUT, bench/machine.sh: by default /var/tmp/laminar-bench-raw/<OUT's
# name>), the summary (records/s, MB/s, produce latency percentiles, and Laminar/Kafka ratios)
# in OUT/summary.md (bench/tls_summary.py).
#
# Usage: bench/tls.sh [OUT]      (OUT default: bench/results/<date>-<host>-tls)
# Env:   N (500000), ROUNDS (2), BROKERS ("laminar kafka"), PORT (19092; Kafka's controller
#        takes PORT+1, the SSL listeners PORT+2), NETWORK_THREADS (2), IO_THREADS (4),
#        TOOL_HEAP, LOAD_TIMEOUT_S (1800), SKIP_BUILD=1, KAFKA_LIB (/tmp/kafka-lib),
#        BURST (1000; 0: no burst part), RATE (5000), BURST_S (30), SKIP_THROUGHPUT=1 (only
#        the burst part). BROKERS may name `base`: another Laminar build, BASE_BIN (the
#        fallback path before and after a change, say).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/machine.sh disable=SC1091
source bench/machine.sh
# shellcheck source=bench/brokers.sh disable=SC1091
source bench/brokers.sh

out=${1:-bench/results/$(date +%F)-$(hostname)-tls}
N=${N:-500000}
ROUNDS=${ROUNDS:-2}
BROKERS=${BROKERS:-"laminar kafka"}
PORT=${PORT:-19092}
NETWORK_THREADS=${NETWORK_THREADS:-2}
IO_THREADS=${IO_THREADS:-4}
TOOL_HEAP=${TOOL_HEAP:--Xmx512M}
LOAD_TIMEOUT_S=${LOAD_TIMEOUT_S:-1800}
export KAFKA_LIB=${KAFKA_LIB:-/tmp/kafka-lib}
RECORD_BYTES=1024
BURST=${BURST:-1000}
RATE=${RATE:-5000}
BURST_S=${BURST_S:-30}
SSL_PORT=$((PORT + 2))
bootstrap=127.0.0.1:$PORT
ssl_bootstrap=127.0.0.1:$SSL_PORT

prepare_run tls
: > "$out/order.txt"
if [[ " $BROKERS " == *" kafka "* ]]; then bench/kafka/fetch-kafka.sh; fi
[[ ${SKIP_BUILD:-} == 1 ]] || cargo build --release --quiet -p laminar
bin=$PWD/target/release/laminar
java_tool_setup

make_tls_certs "$work"

cat > "$work/laminar.toml" <<TOML
"num.network.threads" = $NETWORK_THREADS
"num.io.threads" = $IO_THREADS
"group.initial.rebalance.delay.ms" = 0
"listeners" = "PLAINTEXT://$bootstrap,SSL://$ssl_bootstrap"
"ssl.keystore.type" = "PEM"
"ssl.keystore.location" = "$work/keystore.pem"
TOML

# Laminar here takes its listeners from its config file (brokers.sh's --listen would replace
# them with one PLAINTEXT listener).
start_laminar() { # BROKER DATA LOG: `base` is BASE_BIN, another Laminar build
  local b=$bin
  [[ $1 == base ]] && b=$BASE_BIN
  "$b" serve --data-dir "$2" --metrics-listen none --config "$work/laminar.toml" > "$3" 2>&1 &
  launcher_pid=$!
  broker_pid=$launcher_pid
  wait_port
}

{
  machine_info "$work"
  echo "kafka: $("${java_tool[@]}" org.apache.kafka.tools.ConsumerPerformance --version 2>/dev/null | tail -1) (jars from Maven Central in $KAFKA_LIB)"
  echo "java: $(java -version 2>&1 | paste -sd ';' | sed 's/;/; /g')"
  echo "openssl: $(openssl version)"
  echo "kernel TLS: $(cat /proc/sys/net/ipv4/tcp_available_ulp 2>/dev/null || echo unknown) (tcp_available_ulp)"
  echo "N: $N; record bytes: $RECORD_BYTES; rounds: $ROUNDS; brokers: $BROKERS"
  echo "network threads: $NETWORK_THREADS; io threads: $IO_THREADS"
  echo "certificate: RSA 2048, PEM keystore (key and chain), CA trusted by the client (PEM truststore)"
  echo "burst: $BURST new TLS connections, twice, during $BURST_S s of ProducerPerformance over TLS at $RATE records/s of 512 B (acks=1, linger.ms=0, after 2 s of --warmup-records); python $(python3 -c 'import ssl, sys; print(sys.version.split()[0], ssl.OPENSSL_VERSION)')"
} > "$out/config.txt"
cat "$out/config.txt"

# broker_cpu: the broker process's CPU seconds so far (user and system, from /proc/PID/stat).
broker_cpu() {
  awk -v hz="$(getconf CLK_TCK)" '{print "broker cpu s:", $14 / hz, "user", $15 / hz, "sys"}' \
    "/proc/$broker_pid/stat"
}

run_broker() { # BROKER ROUND
  local broker=$1 round=$2
  local tag=r$round-$broker data=$work/$broker-r$round mode addr props
  if [[ $broker == kafka ]]; then
    KAFKA_NETWORK_THREADS=$NETWORK_THREADS KAFKA_IO_THREADS=$IO_THREADS \
      KAFKA_EXTRA_PROPS="listeners=PLAINTEXT://$bootstrap,SSL://$ssl_bootstrap,CONTROLLER://127.0.0.1:$((PORT + 1))
advertised.listeners=PLAINTEXT://$bootstrap,SSL://$ssl_bootstrap,CONTROLLER://127.0.0.1:$((PORT + 1))
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL
ssl.keystore.type=PEM
ssl.keystore.location=$work/keystore.pem" \
      bench/kafka/run-kafka.sh "$PORT" "$data" > "$raw/$tag-broker.log" 2>&1 &
    launcher_pid=$!
    wait_port
    broker_pid=$(pgrep -P "$launcher_pid" -x java)
  else
    start_laminar "$broker" "$data" "$raw/$tag-broker.log"
  fi
  sleep 2
  local modes=(plaintext tls)
  [[ ${SKIP_THROUGHPUT:-} == 1 ]] && modes=()
  for mode in "${modes[@]}"; do
    addr=$bootstrap
    props=()
    if [[ $mode == tls ]]; then
      addr=$ssl_bootstrap
      props=(--command-config "$work/ssl-client.properties")
    fi
    create_topic "produce-$mode" 1 "$tag"
    broker_cpu > "$raw/$tag-$mode-produce-cpu.txt"
    run_load "$tag-$mode-produce" /usr/bin/time -f "client cpu s: %U user %S sys %e wall" \
      "${java_tool[@]}" org.apache.kafka.tools.ProducerPerformance \
      --bootstrap-server "$addr" --topic "produce-$mode" --num-records "$N" \
      --record-size "$RECORD_BYTES" --throughput -1 --command-property acks=1 "${props[@]}"
    broker_cpu >> "$raw/$tag-$mode-produce-cpu.txt"
    broker_cpu > "$raw/$tag-$mode-consume-cpu.txt"
    run_load "$tag-$mode-consume" /usr/bin/time -f "client cpu s: %U user %S sys %e wall" \
      "${java_tool[@]}" org.apache.kafka.tools.ConsumerPerformance \
      --bootstrap-server "$addr" --topic "produce-$mode" --num-records "$N" \
      --group "tls-consumer-$tag-$mode" "${props[@]}"
    broker_cpu >> "$raw/$tag-$mode-consume-cpu.txt"
  done
  ((BURST > 0)) && burst_phases "$tag"
  stop_broker
  if [[ -f $data/server.log ]]; then cp "$data/server.log" "$raw/$tag-server.log"; fi
  rm -rf "$data"
}

# burst_phases TAG: the producer over TLS alone, then during two bursts of new connections.
burst_phases() {
  local tag=$1 phase file rc k
  create_topic rate 1 "$tag"
  for phase in steady burst; do
    file=$raw/$tag-$phase-rate.txt
    local cmd=("${java_tool[@]}" org.apache.kafka.tools.ProducerPerformance
      --bootstrap-server "$ssl_bootstrap" --topic rate --num-records $((RATE * (2 + BURST_S)))
      --warmup-records $((RATE * 2)) --record-size 512 --throughput "$RATE"
      --command-config "$work/ssl-client.properties" --command-property acks=1 linger.ms=0)
    echo "\$ ${cmd[*]}" > "$file"
    echo "$(date +%T) $tag-$phase-rate"
    timeout $((BURST_S + 120)) "${cmd[@]}" >> "$file" 2>&1 &
    tool_pid=$!
    if [[ $phase == burst ]]; then
      sleep $((2 + BURST_S / 3))
      for k in 1 2; do
        timeout 120 python3 bench/tls_burst.py 127.0.0.1 "$SSL_PORT" "$work/ca.pem" "$BURST" \
          > "$raw/$tag-burst-$k.json" 2>&1 || echo "warning: burst $k failed" >&2
        ((k == 2)) || sleep $((BURST_S / 3))
      done
    fi
    rc=0
    wait "$tool_pid" || rc=$?
    tool_pid=""
    echo "[exit $rc]" >> "$file"
    ((rc == 0)) || echo "warning: $tag-$phase-rate exited $rc" >&2
  done
}

run_rounds
python3 bench/tls_summary.py "$out" > "$out/summary.md"
cat "$out/summary.md"
