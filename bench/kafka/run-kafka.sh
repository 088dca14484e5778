#!/usr/bin/env bash
# Run a single-node Apache Kafka 4.x broker (KRaft, broker+controller in one
# process, no ZooKeeper) on 127.0.0.1, from the jars fetch-kafka.sh put in
# $KAFKA_LIB.
#
#   run-kafka.sh [PORT] [DATA_DIR]
#     PORT      PLAINTEXT listener port on KAFKA_HOST (127.0.0.1) (default 19093)
#     DATA_DIR  where server.properties, the log dirs and server.log go
#               (default: a fresh mktemp dir, removed again when Kafka stops)
#
#   env: KAFKA_LIB (default /tmp/kafka-lib), CONTROLLER_PORT (default PORT+1), KAFKA_HOST
#        (the address both listeners bind, default 127.0.0.1),
#        KAFKA_HEAP_OPTS (default "-Xmx1g -Xms256m"), KAFKA_LOG_LEVEL for the
#        console (default WARN; server.log in DATA_DIR gets INFO).
#   A node of a cluster (every node broker and controller, as Laminar's combined mode):
#        KAFKA_NODE_ID (default 1), KAFKA_QUORUM_VOTERS ("1@127.0.0.1:PORT,..."; a static
#        quorum: each listed node's controller listens on its address, CONTROLLER_PORT must
#        be this node's), KAFKA_CLUSTER_ID (the same for every node; default a random one),
#        KAFKA_INTERNAL_RF (the internal topics' replication factor, default 1).
#
# Runs in the foreground. To use it from a script, background it and stop it by
# its PID with SIGTERM (kill PID): the script forwards the signal to the JVM,
# waits for a clean shutdown, and removes DATA_DIR if it created it.
set -euo pipefail

PORT="${1:-19093}"
DATA_DIR="${2:-}"
KAFKA_LIB="${KAFKA_LIB:-/tmp/kafka-lib}"
CONTROLLER_PORT="${CONTROLLER_PORT:-$((PORT + 1))}"
HOST="${KAFKA_HOST:-127.0.0.1}"
KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx1g -Xms256m}"
KAFKA_LOG_LEVEL="${KAFKA_LOG_LEVEL:-WARN}"

if ! ls "$KAFKA_LIB"/kafka_2.13-*.jar >/dev/null 2>&1; then
  echo "no Kafka jars in $KAFKA_LIB: run fetch-kafka.sh first" >&2
  exit 1
fi

created_dir=0
if [[ -z "$DATA_DIR" ]]; then
  DATA_DIR="$(mktemp -d /tmp/kafka-data.XXXXXX)"
  created_dir=1
fi
mkdir -p "$DATA_DIR"
DATA_DIR="$(cd "$DATA_DIR" && pwd)"
LOG_DIRS="$DATA_DIR/kraft-logs"
PROPS="$DATA_DIR/server.properties"
NODE_ID="${KAFKA_NODE_ID:-1}"
INTERNAL_RF="${KAFKA_INTERNAL_RF:-1}"
if [[ -n "${KAFKA_QUORUM_VOTERS:-}" ]]; then
  QUORUM="controller.quorum.voters=${KAFKA_QUORUM_VOTERS}"
else
  QUORUM="controller.quorum.bootstrap.servers=${HOST}:${CONTROLLER_PORT}"
fi
LOG4J="$DATA_DIR/log4j2.properties"

cat > "$PROPS" <<PROPS
process.roles=broker,controller
node.id=${NODE_ID}
${QUORUM}
listeners=PLAINTEXT://${HOST}:${PORT},CONTROLLER://${HOST}:${CONTROLLER_PORT}
advertised.listeners=PLAINTEXT://${HOST}:${PORT},CONTROLLER://${HOST}:${CONTROLLER_PORT}
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=${LOG_DIRS}
num.partitions=1
offsets.topic.replication.factor=${INTERNAL_RF}
share.coordinator.state.topic.replication.factor=${INTERNAL_RF}
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=${INTERNAL_RF}
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=${KAFKA_NETWORK_THREADS:-2}
num.io.threads=${KAFKA_IO_THREADS:-4}
${KAFKA_EXTRA_PROPS:-}
PROPS

cat > "$LOG4J" <<LOG4J
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
appender.console.filter.threshold.type = ThresholdFilter
appender.console.filter.threshold.level = ${KAFKA_LOG_LEVEL}
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${DATA_DIR}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
rootLogger.appenderRef.file.ref = FILE
LOG4J

JAVA_OPTS=(
  $KAFKA_HEAP_OPTS
  -XX:+UseG1GC -XX:MaxGCPauseMillis=20
  -Djava.awt.headless=true
  -Dlog4j2.configurationFile="$LOG4J"
  -Dkafka.logs.dir="$DATA_DIR"
  -cp "$KAFKA_LIB/*"
)

# Format the storage once (kafka-storage.sh format --standalone equivalent; with a static
# quorum, plain `format`, every node with the same cluster id).
if [[ ! -f "$LOG_DIRS/meta.properties" ]]; then
  CLUSTER_ID="${KAFKA_CLUSTER_ID:-}"
  if [[ -z "$CLUSTER_ID" ]]; then
    CLUSTER_ID="$(timeout 60 java -cp "$KAFKA_LIB/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n1)"
  fi
  FORMAT_ARGS=(--config "$PROPS" --cluster-id "$CLUSTER_ID")
  if [[ -z "${KAFKA_QUORUM_VOTERS:-}" ]]; then FORMAT_ARGS+=(--standalone); fi
  timeout 120 java "${JAVA_OPTS[@]}" kafka.tools.StorageTool format "${FORMAT_ARGS[@]}"
fi

echo "Starting Apache Kafka on ${HOST}:${PORT} (controller ${HOST}:${CONTROLLER_PORT}), data in ${DATA_DIR}"

java "${JAVA_OPTS[@]}" kafka.Kafka "$PROPS" &
kafka_pid=$!

stop() {
  trap - TERM INT
  if kill -0 "$kafka_pid" 2>/dev/null; then
    kill -TERM "$kafka_pid" 2>/dev/null || true
    # Give Kafka up to 60s to shut down cleanly, then force it.
    for _ in $(seq 1 60); do
      kill -0 "$kafka_pid" 2>/dev/null || break
      sleep 1
    done
    kill -KILL "$kafka_pid" 2>/dev/null || true
  fi
}
cleanup() {
  wait "$kafka_pid" 2>/dev/null || true
  if [[ "$created_dir" == 1 ]]; then rm -rf "$DATA_DIR"; fi
}
trap 'stop; cleanup; exit 143' TERM
trap 'stop; cleanup; exit 130' INT

set +e
wait "$kafka_pid"
rc=$?
set -e
cleanup
exit "$rc"
