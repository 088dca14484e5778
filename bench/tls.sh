#!/usr/bin/env bash
# shellcheck disable=SC2034,SC2154  # work, java_tool, broker_pid: set and read by the sourced files
# Issue 30's TLS benchmark, first part: Laminar beside Apache Kafka 4.3.1, each with a
# PLAINTEXT and an SSL listener (the same PEM certificate, TLS 1.3 negotiated by both), measured
# with Kafka's own perf tools (the Java client) over each:
#   1. ProducerPerformance: N records of 1024 B, --throughput -1, acks=1, to a 1-partition topic;
#   2. ConsumerPerformance: those N records, in a consumer group.
# ROUNDS rounds in alternating broker order (a fresh broker and data directory each time);
# within a round, plaintext then TLS. This kernel has no kernel TLS (tcp_available_ulp lists
# no `tls`), so Laminar's fetches over TLS are read on the I/O pool and encrypted in user space
# (the measured fallback), as Kafka's are. Raw output in OUT/raw/, the summary (records/s, MB/s,
# produce latency percentiles, and Laminar/Kafka ratios) in OUT/summary.md (bench/tls_summary.py).
#
# Usage: bench/tls.sh [OUT]      (OUT default: bench/results/<date>-<host>-tls)
# Env:   N (500000), ROUNDS (2), BROKERS ("laminar kafka"), PORT (19092; Kafka's controller
#        takes PORT+1, the SSL listeners PORT+2), NETWORK_THREADS (2), IO_THREADS (4),
#        TOOL_HEAP, LOAD_TIMEOUT_S (1800), SKIP_BUILD=1, KAFKA_LIB (/tmp/kafka-lib).
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
SSL_PORT=$((PORT + 2))
bootstrap=127.0.0.1:$PORT
ssl_bootstrap=127.0.0.1:$SSL_PORT

prepare_run tls
: > "$out/order.txt"
if [[ " $BROKERS " == *" kafka "* ]]; then bench/kafka/fetch-kafka.sh; fi
[[ ${SKIP_BUILD:-} == 1 ]] || cargo build --release --quiet -p laminar
bin=$PWD/target/release/laminar
java_tool_setup

# One CA and a certificate for 127.0.0.1; the keystore is the key (PKCS#8) and the chain.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=bench CA" \
  -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$work/broker.key" \
  -out "$work/broker.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$work/san.ext"
openssl x509 -req -in "$work/broker.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial \
  -days 2 -extfile "$work/san.ext" -out "$work/broker.crt" 2>/dev/null
cat "$work/broker.key" "$work/broker.crt" "$work/ca.pem" > "$work/keystore.pem"
printf 'security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=%s\n' \
  "$work/ca.pem" > "$work/ssl-client.properties"

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
start_laminar() { # DATA LOG
  "$bin" serve --data-dir "$1" --metrics-listen none --config "$work/laminar.toml" > "$2" 2>&1 &
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
} > "$out/config.txt"
cat "$out/config.txt"

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
      bench/kafka/run-kafka.sh "$PORT" "$data" > "$out/raw/$tag-broker.log" 2>&1 &
    launcher_pid=$!
    wait_port
    broker_pid=$(pgrep -P "$launcher_pid" -x java)
  else
    start_laminar "$data" "$out/raw/$tag-broker.log"
  fi
  sleep 2
  for mode in plaintext tls; do
    addr=$bootstrap
    props=()
    if [[ $mode == tls ]]; then
      addr=$ssl_bootstrap
      props=(--command-config "$work/ssl-client.properties")
    fi
    create_topic "produce-$mode" 1 "$tag"
    run_load "$tag-$mode-produce" "${java_tool[@]}" org.apache.kafka.tools.ProducerPerformance \
      --bootstrap-server "$addr" --topic "produce-$mode" --num-records "$N" \
      --record-size "$RECORD_BYTES" --throughput -1 --command-property acks=1 "${props[@]}"
    run_load "$tag-$mode-consume" "${java_tool[@]}" org.apache.kafka.tools.ConsumerPerformance \
      --bootstrap-server "$addr" --topic "produce-$mode" --num-records "$N" \
      --group "tls-consumer-$tag-$mode" "${props[@]}"
  done
  stop_broker
  if [[ -f $data/server.log ]]; then cp "$data/server.log" "$out/raw/$tag-server.log"; fi
  rm -rf "$data"
}

run_rounds
python3 bench/tls_summary.py "$out" > "$out/summary.md"
cat "$out/summary.md"
