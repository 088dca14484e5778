#!/usr/bin/env bash
# Hostile clients (issue 10, item 5) against Laminar and Kafka, one broker at a time.
#
#   bench/hostile.sh OUT_DIR [laminar|kafka|both]
#
# `laminar-load hostile` runs a well-behaved producer (librdkafka, RATE records/s of 512 B,
# acks=1) through phases: a baseline, then one hostile kind per phase (10,000 idle
# connections, 1,000 consumers that never read their fetch responses, a connection flood,
# decompression bombs, requests with huge counts, 100 frames announcing 100 MB that never
# come), each attack followed by a baseline again, CYCLES times. Per phase it reports the
# producer's latency and its p99 over the baselines around it (and each kind pooled over
# the cycles), the broker's RSS (sampled every 100 ms), and what the hostile
# clients saw. The broker's log is kept, gzipped, in the run's raw directory outside the
# repository (bench_raw_dir OUT_DIR, bench/machine.sh: by default
# /var/tmp/laminar-bench-raw/<OUT_DIR's name>); OUT_DIR gets a count of its reasons for closing
# connections.
#
# The frames announcing 100 MB come last: they leave Kafka (1 GiB heap) out of memory, which
# would spoil every phase after them.
#
# Env: RATE (1000), PHASE_S (30), LONG_PHASE_S (75), CYCLES (1), ROUNDS (1), FIRST (laminar: who goes
#      first in odd rounds), ATTACKS (the order above), LAMINAR_ARGS (extra
#      `laminar serve` arguments), LAMINAR_PORT (19492), KAFKA_PORT (19493; +1 controller),
#      KAFKA_LIB, LAMINAR (the `laminar` binary: another build to compare), HOSTILE_ARGS (more
#      `laminar-load hostile` flags, e.g. `--unfinished-frames 3 --unfinished-frame-bytes
#      89478485`: three frames that announce the whole 256 MiB request budget). Both brokers
#      run on their defaults. Stops what it started, by PID.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
OUT="${1:?usage: hostile.sh OUT_DIR [laminar|kafka|both]}"
WHICH="${2:-both}"
RATE="${RATE:-1000}"
PHASE_S="${PHASE_S:-30}"
LONG_PHASE_S="${LONG_PHASE_S:-75}"
CYCLES="${CYCLES:-1}"
ROUNDS="${ROUNDS:-1}"
FIRST="${FIRST:-laminar}"
ATTACKS="${ATTACKS:-idle,non-reading,flood,bombs,huge-counts,unfinished-frames}"
LAMINAR_PORT="${LAMINAR_PORT:-19492}"
KAFKA_PORT="${KAFKA_PORT:-19493}"
LAMINAR="${LAMINAR:-$repo/target/release/laminar}"
LOAD="$repo/target/release/laminar-load"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

(cd "$repo" && cargo build --release -p laminar -p laminar-load) || exit 1
[[ "$WHICH" == laminar ]] || "$here/kafka/fetch-kafka.sh" >/dev/null || exit 1
# shellcheck source=machine.sh
source "$here/machine.sh"
RAW="$(bench_raw_dir "$OUT")"
mkdir -p "$RAW"
(cd "$repo" && machine_info /tmp && echo "open files (soft/hard): $(ulimit -Sn)/$(ulimit -Hn)" &&
  { [[ "$WHICH" == laminar ]] || echo "kafka: $(cat "${KAFKA_LIB:-/tmp/kafka-lib}/.kafka-version")"; } &&
  echo "laminar binary: $LAMINAR ($("$LAMINAR" --version 2>/dev/null))" &&
  echo "hostile args: ${HOSTILE_ARGS:-(none)}" &&
  echo "well-behaved: $RATE records/s of 512 B, acks=1; phases $PHASE_S s, long phases $LONG_PHASE_S s, $CYCLES cycles") \
  >"$OUT/machine.txt"

ulimit -n "$(ulimit -Hn)"
broker_pid=""   # what we stop
rss_pid=""      # whose memory is sampled: Laminar itself, or Kafka's JVM
data=""

wait_port() {
  local deadline=$((SECONDS + 120))
  until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

start_broker() {  # laminar|kafka LOG
  data="$(mktemp -d /tmp/hostile-data.XXXXXX)"
  if [[ "$1" == laminar ]]; then
    # shellcheck disable=SC2086
    "$LAMINAR" serve --listen "127.0.0.1:$LAMINAR_PORT" --metrics-listen 127.0.0.1:0 \
      --data-dir "$data/laminar" ${LAMINAR_ARGS:-} >"$2" 2>&1 &
    broker_pid=$!
    rss_pid=$broker_pid
    port=$LAMINAR_PORT
  else
    KAFKA_LOG_LEVEL=INFO "$here/kafka/run-kafka.sh" "$KAFKA_PORT" "$data/kafka" >"$2" 2>&1 &
    broker_pid=$!
    port=$KAFKA_PORT
  fi
  wait_port "$port" || { echo "$1 did not listen on $port" >&2; return 1; }
  if [[ "$1" == kafka ]]; then
    rss_pid="$(pgrep -P "$broker_pid" java | head -1)"
  fi
}

stop_broker() {
  if [[ -n "$broker_pid" ]]; then
    kill "$broker_pid" 2>/dev/null
    for _ in $(seq 1 600); do kill -0 "$broker_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$broker_pid" 2>/dev/null
    wait "$broker_pid" 2>/dev/null
  fi
  broker_pid=""
  [[ -n "$data" ]] && rm -rf "$data"
  data=""
}
trap stop_broker EXIT

run_one() {  # laminar|kafka ROUND
  local name="$1-r$2" port
  echo "== $name $(date -Is)" | tee -a "$OUT/run.log"
  start_broker "$1" "$RAW/$name.broker.log" || return 1
  local extra=()
  read -ra extra <<<"${HOSTILE_ARGS:-}"
  "$LOAD" hostile --bootstrap "127.0.0.1:$port" --broker-pid "$rss_pid" \
    --records-per-s "$RATE" --phase-s "$PHASE_S" --long-phase-s "$LONG_PHASE_S" \
    --attacks "$ATTACKS" --cycles "$CYCLES" "${extra[@]}" --json >"$OUT/$name.json" 2>>"$OUT/run.log"
  echo "exit $?" >>"$OUT/run.log"
  stop_broker
  # Why the broker closed connections, by reason (addresses and numbers folded).
  grep -hoE "closing connection from [^ ]+: .*|(Closing|closing) .*connection.*|Unexpected error from .*" \
    "$RAW/$name.broker.log" 2>/dev/null |
    sed -E 's/from [0-9.:]+:? ?/from ADDR /; s/[0-9]+/N/g' | sort | uniq -c | sort -rn \
    >"$OUT/$name.close-reasons.txt"
  gzip -9f "$RAW/$name.broker.log"
}

for round in $(seq 1 "$ROUNDS"); do
  case "$WHICH" in
    laminar) order="laminar" ;;
    kafka) order="kafka" ;;
    *)
      second=$([[ "$FIRST" == laminar ]] && echo kafka || echo laminar)
      if ((round % 2)); then order="$FIRST $second"; else order="$second $FIRST"; fi
      ;;
  esac
  for b in $order; do run_one "$b" "$round"; done
done
python3 "$here/hostile_summary.py" "$OUT" >"$OUT/summary.md"
echo "done: $OUT (summary.md)" | tee -a "$OUT/run.log"
