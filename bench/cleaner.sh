#!/usr/bin/env bash
# Does the log cleaner slow producers? (Issue 11.) A compacted topic, `table`, takes keyed
# records (`laminar-load latency --keys`, librdkafka, 512 B) while its segments roll every
# SEGMENT_BYTES and the cleaner, with a low dirty ratio and a 1 s backoff, cleans it again
# and again. The measured producer sends RATE records/s at acks=ACKS:
#   TARGET=other (default): to its own topic, `plain`, while a second producer writes
#     BG_RATE records/s (acks=1) into `table`: the cleaner running on another topic;
#   TARGET=same: the measured producer itself writes the keyed records into `table`.
# The same run with `log.cleaner.enable = false` is the baseline. ROUNDS rounds, the order
# alternating. Each run's report (JSON, with percentiles), the cleaner's counters after it
# (cleaner-metrics-*.txt), and the broker threads' CPU time and run delay over the measured
# run (sched-*.txt), go to OUT_DIR; summary.txt has the tables and the p99 ratios. The broker's
# log (broker-*.log), the whole metrics endpoint after the run (metrics-*.txt) and the measured
# producer's latency series (series-*.json) go to the run's raw directory outside the
# repository (bench_raw_dir OUT_DIR, bench/machine.sh: by default
# /var/tmp/laminar-bench-raw/<OUT_DIR's name>).
#
# With INTERLEAVE_S=W, each round is instead one run of one broker (cleaner enabled) in which
# `table`'s cleanup.policy switches between compact and delete at every W-second boundary of
# the wall clock (`laminar topics alter`), and the measured producer reports latency apart
# for even and odd windows (`perf latency --window-s W --window-skip-s SKIP_S`, the first
# SKIP_S seconds of each window left out while a pass in flight ends). Both sides then share
# the machine's drift over minutes, which separate runs do not. Odd rounds compact in even
# windows, even rounds in odd ones. Use a longer SECS (300: 15 windows a side of W=10).
#
#   bench/cleaner.sh OUT_DIR
#
# Env: TARGET (other), RATE (20000 records/s), BG_RATE (20000), SECS (60), KEYS (20000),
#      ACKS (all), SEGMENT_BYTES (1048576), ROUNDS (3), PORT (19392), METRICS_PORT (19393),
#      CLEANER_RATE (none: no limit, the default), DIRTY_RATIO (0.1; Kafka's default is 0.5),
#      BACKOFF_MS (1000; Kafka's default is 15000), INTERLEAVE_S (0: separate runs), SKIP_S (2).
# Stops the processes it started, by PID.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
OUT="${1:?usage: cleaner.sh OUT_DIR}"
TARGET="${TARGET:-other}"
RATE="${RATE:-20000}"
BG_RATE="${BG_RATE:-20000}"
SECS="${SECS:-60}"
KEYS="${KEYS:-20000}"
ACKS="${ACKS:-all}"
SEGMENT_BYTES="${SEGMENT_BYTES:-1048576}"
ROUNDS="${ROUNDS:-3}"
PORT="${PORT:-19392}"
METRICS_PORT="${METRICS_PORT:-19393}"
CLEANER_RATE="${CLEANER_RATE:-none}"
DIRTY_RATIO="${DIRTY_RATIO:-0.1}"
BACKOFF_MS="${BACKOFF_MS:-1000}"
INTERLEAVE_S="${INTERLEAVE_S:-0}"
SKIP_S="${SKIP_S:-2}"
LAMINAR="$repo/target/release/laminar"
LOAD="$repo/target/release/laminar-load"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

(cd "$repo" && cargo build --release -p laminar -p laminar-load) || exit 1
# shellcheck source=machine.sh
source "$here/machine.sh"
RAW="$(bench_raw_dir "$OUT")"
mkdir -p "$RAW"
(cd "$repo" && machine_info /tmp &&
  echo "target: $TARGET; rate: $RATE records/s of 512 B, acks=$ACKS, $SECS s per run; keyed writer into the compacted topic: $([ "$TARGET" = other ] && echo "$BG_RATE records/s, acks=1" || echo "the measured one"), $KEYS keys; segment.bytes=$SEGMENT_BYTES, min.cleanable.dirty.ratio=$DIRTY_RATIO, log.cleaner.backoff.ms=$BACKOFF_MS, log.cleaner.io.max.bytes.per.second=$CLEANER_RATE$([ "$INTERLEAVE_S" -gt 0 ] && echo "; interleaved: cleanup.policy switched every $INTERLEAVE_S s, the first $SKIP_S s of each window left out")") >"$OUT/machine.txt"

pid=""
bg=""
toggler=""
data=""
cleanup() {
  if [ -n "$toggler" ]; then kill "$toggler" 2>/dev/null; wait "$toggler" 2>/dev/null; fi
  if [ -n "$bg" ]; then kill "$bg" 2>/dev/null; wait "$bg" 2>/dev/null; fi
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
  if [ -n "$data" ]; then rm -rf "$data"; fi
}
trap cleanup EXIT

# The broker's threads as /proc tells them: name, time on a CPU and time waiting for one
# (run delay), in ns (`schedstat`: the kernel's per-task scheduler statistics).
schedstat() {
  local t
  for t in /proc/"$1"/task/*; do
    printf '%s %s\n' "$(tr ' ' '_' <"$t/comm")" "$(cut -d' ' -f1,2 "$t/schedstat")"
  done 2>/dev/null
}
# Per thread name (numbers dropped), over the run: ms on a CPU, ms waiting for one.
sched_delta() {
  python3 - "$1" "$2" <<'PY'
import re, sys
def load(path):
    out = {}
    for i, line in enumerate(open(path)):
        name, cpu, wait = line.split()
        out[(name, i)] = (int(cpu), int(wait))
    return out
def by_name(rows):
    acc = {}
    for (name, _), (cpu, wait) in rows.items():
        key = re.sub(r"[-_]?\d+$", "", name)
        c, w = acc.get(key, (0, 0))
        acc[key] = (c + cpu, w + wait)
    return acc
before, after = by_name(load(sys.argv[1])), by_name(load(sys.argv[2]))
print(f"{'threads':<24} {'cpu ms':>9} {'run delay ms':>13}")
for k in sorted(after):
    c0, w0 = before.get(k, (0, 0))
    c1, w1 = after[k]
    print(f"{k:<24} {(c1 - c0) / 1e6:>9.1f} {(w1 - w0) / 1e6:>13.1f}")
PY
}

# The policy `table` should have in the window starting at UNIX time $1: compact when the
# window's parity is $2.
policy_at() {
  if [ $(($1 / INTERLEAVE_S % 2)) -eq "$2" ]; then echo compact; else echo delete; fi
}

# Keeps `table`'s cleanup.policy that of the current INTERLEAVE_S window until killed: sets
# it for the window it starts in, then at every boundary, each time from the clock as read
# then (so a boundary passed while starting or altering is caught at once); logs each switch
# (UNIX time, window start, policy) to $2.
toggle() { # toggle ON_PARITY LOG
  local on_parity="$1" log="$2" now window policy
  while :; do
    now=$(date +%s%N)
    window=$((now / 1000000000 / INTERLEAVE_S * INTERLEAVE_S))
    policy=$(policy_at "$window" "$on_parity")
    "$LAMINAR" topics alter table --add-config cleanup.policy="$policy" \
      --bootstrap "127.0.0.1:$PORT" >/dev/null
    echo "$(date +%s.%N) $window $policy" >>"$log"
    sleep "$(python3 -c "print(max(0, $window + $INTERLEAVE_S - $(date +%s%N) / 1e9))")"
  done
}

run() { # run MODE ROUND: MODE is "on", "off" or "ab" (interleaved)
  local mode="$1" round="$2" enable windows=()
  enable=$([ "$mode" = off ] && echo false || echo true)
  data="$(mktemp -d /tmp/laminar-cleaner-bench.XXXXXX)"
  {
    echo "\"log.cleaner.enable\" = $enable"
    echo "\"log.cleaner.backoff.ms\" = $BACKOFF_MS"
    [ "$CLEANER_RATE" != none ] && echo "\"log.cleaner.io.max.bytes.per.second\" = $CLEANER_RATE"
  } >"$data/laminar.toml"
  "$LAMINAR" serve --listen "127.0.0.1:$PORT" --metrics-listen "127.0.0.1:$METRICS_PORT" \
    --data-dir "$data/data" --config "$data/laminar.toml" 2>"$RAW/broker-$mode-r$round.log" &
  pid=$!
  for _ in $(seq 100); do
    grep -q "laminar listening" "$RAW/broker-$mode-r$round.log" && break
    sleep 0.1
  done
  "$LAMINAR" topics create table --partitions 1 --bootstrap "127.0.0.1:$PORT" \
    --config cleanup.policy=compact --config segment.bytes="$SEGMENT_BYTES" \
    --config min.cleanable.dirty.ratio="$DIRTY_RATIO" >/dev/null
  local measured=(--topic table --keys "$KEYS")
  if [ "$TARGET" = other ]; then
    "$LAMINAR" topics create plain --partitions 1 --bootstrap "127.0.0.1:$PORT" >/dev/null
    measured=(--topic plain)
    "$LOAD" latency --bootstrap "127.0.0.1:$PORT" --topic table --keys "$KEYS" \
      --records-per-s "$BG_RATE" --record-bytes 512 --duration-s $((SECS + 10)) --acks 1 \
      --json >"$OUT/keyed-writer-$mode-r$round.json" &
    bg=$!
    sleep 5
  fi
  if [ "$mode" = ab ]; then
    local on_parity=$(((round + 1) % 2))
    "$LAMINAR" topics alter table --add-config cleanup.policy="$(policy_at "$(date +%s)" "$on_parity")" \
      --bootstrap "127.0.0.1:$PORT" >/dev/null
    toggle "$on_parity" "$OUT/switches-r$round.txt" &
    toggler=$!
    windows=(--window-s "$INTERLEAVE_S" --window-skip-s "$SKIP_S")
  fi
  schedstat "$pid" >"$data/sched-before.txt"
  "$LOAD" latency --bootstrap "127.0.0.1:$PORT" "${measured[@]}" \
    --records-per-s "$RATE" --record-bytes 512 --duration-s "$SECS" --acks "$ACKS" \
    --label "cleaner $mode" --series-out "$RAW/series-$mode-r$round.json" --json "${windows[@]}" \
    >"$OUT/latency-$mode-r$round.json"
  if [ -n "$toggler" ]; then kill "$toggler"; wait "$toggler" 2>/dev/null; toggler=""; fi
  schedstat "$pid" >"$data/sched-after.txt"
  sched_delta "$data/sched-before.txt" "$data/sched-after.txt" >"$OUT/sched-$mode-r$round.txt"
  curl -s "http://127.0.0.1:$METRICS_PORT/metrics" >"$RAW/metrics-$mode-r$round.txt"
  grep -E '^laminar_log_cleaner' "$RAW/metrics-$mode-r$round.txt" >"$OUT/cleaner-metrics-$mode-r$round.txt"
  du -sb "$data/data/table-0" | cut -f1 >"$OUT/table-bytes-$mode-r$round.txt"
  if [ -n "$bg" ]; then wait "$bg"; bg=""; fi
  kill "$pid"; wait "$pid" 2>/dev/null; pid=""
  rm -rf "$data"; data=""
}

for round in $(seq "$ROUNDS"); do
  if [ "$INTERLEAVE_S" -gt 0 ]; then
    order="ab"
  elif [ $((round % 2)) -eq 1 ]; then order="on off"; else order="off on"; fi
  for mode in $order; do
    echo "round $round: cleaner $mode" >&2
    run "$mode" "$round"
  done
done
if [ "$INTERLEAVE_S" -gt 0 ]; then
  python3 - "$OUT" "$ROUNDS" <<'EOF' | tee "$OUT/summary.txt"
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
print(f"{'round':>5} {'windows':>8} {'records':>8} {'p50 ms':>8} {'p99 ms':>8} {'p99.9 ms':>9} {'max ms':>8}")
ratios = []
for r in range(1, rounds + 1):
    w = json.load(open(f"{out}/latency-ab-r{r}.json"))["windows"]
    # Odd rounds compact in even windows, even rounds in odd ones.
    on, off = ("even", "odd") if r % 2 == 1 else ("odd", "even")
    p99 = {}
    for label, side in (("compact", on), ("delete", off)):
        lat = w[f"{side}_latency_us"]
        p99[label] = lat["p99"]
        print(f"{r:>5} {label:>8} {w[side + '_records']:>8} {lat['p50']/1e3:>8.2f} {lat['p99']/1e3:>8.2f} {lat['p999']/1e3:>9.2f} {lat['max']/1e3:>8.2f}")
    ratios.append(p99["compact"] / p99["delete"])
print("p99 in the cleaner's windows / in the others, per round: " + ", ".join(f"{x:.2f}x" for x in ratios))
print(f"windows of {w['window_s']} s, the first {w['skip_s']} s of each left out; switches-r*.txt: when each switch was made")
EOF
  exit 0
fi
python3 - "$OUT" "$ROUNDS" <<'EOF' | tee "$OUT/summary.txt"
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
print(f"{'round':>5} {'cleaner':>7} {'p50 ms':>8} {'p99 ms':>8} {'p99.9 ms':>9} {'max ms':>8} {'passes':>6} {'MB read':>8} {'MB/s':>6} {'table MB':>8}")
ratios = []
for r in range(1, rounds + 1):
    p99 = {}
    for mode in ("on", "off"):
        rep = json.load(open(f"{out}/latency-{mode}-r{r}.json"))
        lat = rep["latency_us"] if "latency_us" in rep else rep["latency"]
        m = dict(l.rsplit(" ", 1) for l in open(f"{out}/cleaner-metrics-{mode}-r{r}.txt") if not l.startswith("#") and " " in l)
        passes = float(m.get("laminar_log_cleaner_passes_total", 0))
        read = float(m.get('laminar_log_cleaner_bytes_total{direction="read"}', 0))
        written = float(m.get('laminar_log_cleaner_bytes_total{direction="written"}', 0))
        busy = float(m.get("laminar_log_cleaner_pass_seconds_sum", 0))
        mb_s = (read + written) / busy / 1e6 if busy else 0.0
        table = int(open(f"{out}/table-bytes-{mode}-r{r}.txt").read()) / 1e6
        p99[mode] = lat["p99"]
        print(f"{r:>5} {mode:>7} {lat['p50']/1e3:>8.2f} {lat['p99']/1e3:>8.2f} {lat['p999']/1e3:>9.2f} {lat['max']/1e3:>8.2f} {passes:>6.0f} {read/1e6:>8.1f} {mb_s:>6.0f} {table:>8.1f}")
    ratios.append(p99["on"] / p99["off"])
print("p99 with the cleaner / without, per round: " + ", ".join(f"{x:.2f}x" for x in ratios))
print("MB/s: what the cleaner read and wrote over the time its passes took (its own speed, not a share of the run)")
print()
print("Over the measured run (sched-*.txt, from /proc/PID/task/*/schedstat): CPU time and run delay (waiting for a CPU), ms")
print(f"{'round':>5} {'cleaner':>7} {'net cpu':>8} {'net wait':>9} {'storage cpu':>12} {'storage wait':>13} {'cleaner cpu':>12} {'cleaner wait':>13}")
for r in range(1, rounds + 1):
    for mode in ("on", "off"):
        try:
            rows = {l.split()[0]: (float(l.split()[1]), float(l.split()[2])) for l in list(open(f"{out}/sched-{mode}-r{r}.txt"))[1:]}
        except FileNotFoundError:
            continue
        g = lambda k: rows.get(k, (0.0, 0.0))
        print(f"{r:>5} {mode:>7} {g('laminar-net')[0]:>8.0f} {g('laminar-net')[1]:>9.0f} {g('laminar-storage')[0]:>12.0f} {g('laminar-storage')[1]:>13.0f} {g('laminar-cleaner')[0]:>12.0f} {g('laminar-cleaner')[1]:>13.0f}")
EOF
