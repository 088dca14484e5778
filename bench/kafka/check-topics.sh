#!/usr/bin/env bash
# Start Apache Kafka (run-kafka.sh) on 127.0.0.1, run the `laminar topics`
# commands against it, print each command's output and exit code, then stop
# Kafka (by the PID this script started) and remove its temp data dir.
#
#   check-topics.sh [PORT]        (default 19093)
#   env: KAFKA_LIB (default /tmp/kafka-lib), LAMINAR (default
#        <repo>/target/release/laminar), SKIP_BUILD=1 to skip cargo build.
set -uo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
PORT="${1:-19093}"
BOOT="127.0.0.1:${PORT}"
LAMINAR="${LAMINAR:-$repo/target/release/laminar}"

"$here/fetch-kafka.sh" || exit 1
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  (cd "$repo" && timeout 900 cargo build --release) || exit 1
fi

kafka_out="$(mktemp /tmp/kafka-check-out.XXXXXX)"
"$here/run-kafka.sh" "$PORT" >"$kafka_out" 2>&1 &
kafka_pid=$!
stop_kafka() {
  if kill -0 "$kafka_pid" 2>/dev/null; then
    kill -TERM "$kafka_pid" 2>/dev/null
    for _ in $(seq 1 90); do kill -0 "$kafka_pid" 2>/dev/null || break; sleep 1; done
  fi
  rm -f "$kafka_out"
}
trap stop_kafka EXIT

up=0
for _ in $(seq 1 120); do
  if timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/${PORT}" 2>/dev/null; then up=1; break; fi
  kill -0 "$kafka_pid" 2>/dev/null || break
  sleep 1
done
if [[ "$up" != 1 ]]; then
  echo "Kafka did not come up on $BOOT; its output:" >&2
  cat "$kafka_out" >&2
  exit 1
fi
sleep 2   # listener open; give the broker a moment to finish registering
echo "Apache Kafka $(cat "${KAFKA_LIB:-/tmp/kafka-lib}/.kafka-version") up on $BOOT (pid $kafka_pid)"
echo

failures=0
run() {
  echo "\$ $*"
  timeout 60 "$@" 2>&1
  local rc=$?
  echo "[exit $rc]"
  echo
  [[ $rc == 0 ]] || failures=$((failures + 1))
}

run "$LAMINAR" topics create check-topic --partitions 3 --config retention.ms=86400000 --bootstrap "$BOOT"
run "$LAMINAR" topics list --bootstrap "$BOOT"
run "$LAMINAR" topics describe check-topic --bootstrap "$BOOT"
run "$LAMINAR" topics delete check-topic --bootstrap "$BOOT"
run "$LAMINAR" topics list --bootstrap "$BOOT"
if command -v kcat >/dev/null; then
  run kcat -b "$BOOT" -L
fi

echo "$failures command(s) failed"
[[ $failures == 0 ]]
