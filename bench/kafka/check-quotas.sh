#!/usr/bin/env bash
# Kafka's own kafka-configs (kafka.admin.ConfigCommand, from the Maven jars that
# fetch-kafka.sh brings) setting, describing and deleting client quotas on Laminar, then
# `laminar quotas describe` reading them back. Starts `laminar serve` on 127.0.0.1:PORT in a
# temporary directory and stops it (by its PID) at the end.
#
#   check-quotas.sh [PORT]     (default 19092; env KAFKA_LIB, LAMINAR as in check-topics.sh)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
PORT="${1:-19092}"
KAFKA_LIB="${KAFKA_LIB:-/tmp/kafka-lib}"
LAMINAR="${LAMINAR:-$repo/target/release/laminar}"
"$here/fetch-kafka.sh" >/dev/null || exit 1
work="$(mktemp -d /tmp/laminar-quotas.XXXXXX)"
"$LAMINAR" serve --listen "127.0.0.1:$PORT" --metrics-listen none --data-dir "$work/data" >"$work/serve.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$work"' EXIT
until bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null; do sleep 0.2; done
K() {
  echo "\$ kafka-configs $*"
  timeout 60 java -cp "$KAFKA_LIB/*" kafka.admin.ConfigCommand --bootstrap-server "127.0.0.1:$PORT" "$@" 2>&1 |
    grep -v "SLF4J\|log4j\|StatusLogger"
  echo "exit ${PIPESTATUS[0]}"
}
K --alter --entity-type clients --entity-name reporting --add-config consumer_byte_rate=1048576,producer_byte_rate=2097152
K --alter --entity-type clients --entity-default --add-config consumer_byte_rate=5000000
K --describe --entity-type clients
K --describe --entity-type clients --entity-name reporting
K --alter --entity-type clients --entity-name reporting --delete-config producer_byte_rate
echo '$ laminar quotas describe'
"$LAMINAR" quotas describe --bootstrap "127.0.0.1:$PORT"
