#!/usr/bin/env bash
# Scenario S4 (seed 002): a disk that stalls one partition's writes, for Laminar and Kafka.
#
#   bench/s4.sh OUT_DIR
#
# Each broker keeps its data on a laminar-faultfs mount (passthrough, not lazy). `laminar perf
# partitions` runs one producer per partition of an 8-partition topic (RATE records/s in all,
# 512 B, acks=1, each producer on its own connection) and a consumer reading every partition
# from its end, for SECS seconds; it reports produce and end-to-end latency of the 7 healthy
# partitions together, and of partition 3. In the "stall" run, STALL_AFTER seconds in,
# faultfs delays every write(2) and fsync of partition 3's files by 2 s until the run ends.
# Two rounds, in alternating broker order; results and charts go to OUT_DIR, with each run's
# broker warnings (the first 500 WARN/ERROR lines of its log); the latency series the charts
# are drawn from (*.series.json) to the run's raw directory outside the repository
# (bench_raw_dir OUT_DIR, bench/machine.sh: by default
# /var/tmp/laminar-bench-raw/<OUT_DIR's name>).
#
# Env: RATE (4000), SECS (30), STALL_AFTER (5), ROUNDS (2), BROKERS ("laminar kafka"), LAMINAR_PORT (19292),
#      KAFKA_PORT (19293; +1 for its controller), KAFKA_LIB. Kafka runs with its own defaults
#      for threads (num.network.threads=3, num.io.threads=8). Needs root, /dev/fuse and
#      fusermount3. Stops everything it started, by PID, and unmounts.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
OUT="${1:?usage: s4.sh OUT_DIR}"
RATE="${RATE:-4000}"
SECS="${SECS:-30}"
STALL_AFTER="${STALL_AFTER:-5}"
ROUNDS="${ROUNDS:-2}"
BROKERS="${BROKERS:-laminar kafka}"
LAMINAR_PORT="${LAMINAR_PORT:-19292}"
KAFKA_PORT="${KAFKA_PORT:-19293}"
LAMINAR="$repo/target/release/laminar"
LOAD="$repo/target/release/laminar-load"
FAULTFS="$repo/target/release/laminar-faultfs"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

(cd "$repo" && cargo build --release -p laminar -p laminar-load -p laminar-faultfs) || exit 1
"$here/kafka/fetch-kafka.sh" >/dev/null || exit 1
# shellcheck source=machine.sh
source "$here/machine.sh"
RAW="$(bench_raw_dir "$OUT")"
mkdir -p "$RAW"
(cd "$repo" && machine_info /tmp && echo "kafka: $(cat "${KAFKA_LIB:-/tmp/kafka-lib}/.kafka-version")" &&
  echo "rate: $RATE records/s of 512 B over 8 partitions, acks=1; $SECS s per run; stall after $STALL_AFTER s") >"$OUT/machine.txt"

work="$(mktemp -d /tmp/laminar-s4.XXXXXX)"
fs_pid=""
broker_pid=""
cleanup() {
  if [[ -n "$broker_pid" ]]; then kill -TERM "$broker_pid" 2>/dev/null; wait "$broker_pid" 2>/dev/null; fi
  if [[ -n "$fs_pid" ]]; then kill -TERM "$fs_pid" 2>/dev/null; wait "$fs_pid" 2>/dev/null; fi
  broker_pid=""; fs_pid=""
  rm -rf "$work/disk" "$work/mnt"
}
trap 'cleanup; rm -rf "$work"' EXIT

run() {  # BROKER MODE ROUND
  local broker="$1" mode="$2" round="$3" port
  mkdir -p "$work/disk" "$work/mnt"
  "$FAULTFS" mount "$work/disk" "$work/mnt" --control "$work/ctl.sock" >"$work/faultfs.log" 2>&1 &
  fs_pid=$!
  for _ in $(seq 1 50); do [[ -S "$work/ctl.sock" ]] && break; sleep 0.1; done
  if [[ "$broker" == kafka ]]; then
    port="$KAFKA_PORT"
    KAFKA_NETWORK_THREADS=3 KAFKA_IO_THREADS=8 "$here/kafka/run-kafka.sh" "$port" "$work/mnt/kafka" >"$work/broker.log" 2>&1 &
  else
    port="$LAMINAR_PORT"
    "$LAMINAR" serve --listen "127.0.0.1:$port" --metrics-listen none --data-dir "$work/mnt/laminar" >"$work/broker.log" 2>&1 &
  fi
  broker_pid=$!
  for _ in $(seq 1 240); do
    timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null && break
    sleep 0.25
  done
  local name="$broker-$mode-r$round"
  local stall_pid=""
  if [[ "$mode" == stall ]]; then
    (sleep $((STALL_AFTER + 3))   # the perf run's warm-up (topic, connections) takes ~3 s
     "$FAULTFS" ctl "$work/ctl.sock" delay write '*s4-3/*' 2000 >/dev/null
     "$FAULTFS" ctl "$work/ctl.sock" delay fsync '*s4-3/*' 2000 >/dev/null) &
    stall_pid=$!
  fi
  "$LOAD" partitions --bootstrap "127.0.0.1:$port" --topic s4 --partitions 8 \
    --records-per-s "$RATE" --duration-s "$SECS" --watch-partition 3 --json \
    --series-out "$RAW/$name.series.json" --label "$broker ($mode)" >"$OUT/$name.json" 2>"$work/perf.err" ||
    { echo "perf failed: $(tail -3 "$work/perf.err")" >&2; }
  [[ -n "$stall_pid" ]] && wait "$stall_pid"
  "$FAULTFS" ctl "$work/ctl.sock" stats >"$OUT/$name.faultfs-stats.json" 2>/dev/null
  "$FAULTFS" ctl "$work/ctl.sock" clear >/dev/null 2>&1
  # The broker's warnings (Laminar: stuck reads, socket-thread stalls), for the README.
  grep -E 'WARN|ERROR' "$work/broker.log" | head -n 500 >"$OUT/$name.broker-warnings.txt" || true
  echo "$name: $(python3 -c "import json,sys; r=json.load(open('$OUT/$name.json')); print('others produce p99', r['others_produce_us']['p99']/1000, 'ms; e2e p99', r['others_end_to_end_us']['p99']/1000, 'ms; watched produce p99', (r['watched_produce_us'] or {}).get('p99', 0)/1000, 'ms')" 2>/dev/null)"
  cleanup
}

for round in $(seq 1 "$ROUNDS"); do
  # Alternate the order between rounds.
  if (( round % 2 == 1 )); then order="$BROKERS"; else order="$(echo "$BROKERS" | tr ' ' '\n' | tac | tr '\n' ' ')"; fi
  for b in $order; do
    run "$b" none "$round"
    run "$b" stall "$round"
  done
done

"$LAMINAR" perf plot --title "S4: produce latency of the 7 healthy partitions while partition 3's disk stalls" \
  --out "$OUT/chart-produce" "$RAW"/*-r1.series.json >/dev/null
python3 - "$OUT" "$ROUNDS" <<'PY' | tee "$OUT/summary.md"
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
ms = lambda us: f"{us / 1000:.2f}"
print("| broker | round | others produce p99 ms (no stall / stall) | ratio | others end-to-end p99 ms (no stall / stall) | ratio | partition 3 produce p99 ms (stall) | max others produce ms (stall) |")
print("|---|---|---|---|---|---|---|---|")
for b in ["laminar", "kafka"]:
    for r in range(1, rounds + 1):
        try:
            n = json.load(open(f"{out}/{b}-none-r{r}.json"))
            s = json.load(open(f"{out}/{b}-stall-r{r}.json"))
        except Exception as e:
            print(f"| {b} | {r} | missing ({e}) |||||| ")
            continue
        a, c = n["others_produce_us"]["p99"], s["others_produce_us"]["p99"]
        e1, e2 = n["others_end_to_end_us"]["p99"], s["others_end_to_end_us"]["p99"]
        w = (s.get("watched_produce_us") or {}).get("p99", 0)
        print(f"| {b} | {r} | {ms(a)} / {ms(c)} | {c / max(a, 1):.2f} | {ms(e1)} / {ms(e2)} | {e2 / max(e1, 1):.2f} | {ms(w)} | {ms(s['others_produce_us']['max'])} |")
PY
