#!/usr/bin/env bash
# Scenarios S1 and S2 of shared/BRIEF.md, Laminar and Apache Kafka side by side, with the
# same client load from `laminar perf` (librdkafka):
#
#   s1, cold catch-up (seed 000, KAFKA-7504): the consumer reads data that has left the page
#       cache, from a disk throttled like a hard disk; the producer runs at a fixed rate.
#   s2, lagging consumer (seed 003): the data is in the page cache, the consumer fetches 1 MB
#       responses, and the producer runs as fast as it can (RATE=0).
#   s3, flush interference (seed 001): no consumer; the producer runs at a fixed rate against
#       a broker without background flushes, then against a fresh one that flushes every
#       FLUSH_MS (Laminar and Kafka: log.flush.interval.ms).
#   s4, stalled disk writes (seed 002): each broker on a laminar-faultfs mount that delays
#       every write and fsync of one partition's files by 2 s; runs bench/s4.sh (see there).
#
# For each broker (s2 skips steps 3 and 4; s3 runs steps 1, 5a and 6 once per flush setting):
#   1. start it on 127.0.0.1 with NETWORK_THREADS socket threads, data on this disk;
#   2. fill topic `big` with FILL_BYTES of 1 KiB records;
#   3. sync, and evict `big`'s files from the page cache (posix_fadvise DONTNEED), so that
#      topic is cold while everything else (the broker's own code, `hot`) stays warm;
#   4. put the broker's process in a blkio cgroup that throttles its disk reads to
#      READ_BPS bytes/s and READ_IOPS reads/s (a hard disk);
#   5. warm up: produce to `hot` for WARMUP_S (not recorded; a JVM needs it);
#      (a) produce RATE records/s of 512 B to `hot`, acks=1, for DURATION_S, alone;
#      (b) the same while a consumer reads `big` from its start;
#   6. take the broker out of the cgroup, remove the cgroup, stop the broker.
# Raw JSON lines and a summary go to OUT (default bench/results/<date>-<host>-SCENARIO); each
# measured phase's produce latency series (perf latency --series-out, labelled "<Laminar|Kafka>
# <phase>") to RAW/series/BROKER-PHASE.json, RAW being the run's raw directory outside the
# repository (bench_raw_dir OUT, bench/machine.sh: by default
# /var/tmp/laminar-bench-raw/<OUT's name>), and all of them (both brokers, every phase) on
# one pair of charts (`laminar perf plot`): OUT/chart-SCENARIO-over-time.svg and
# OUT/chart-SCENARIO-percentiles.svg.
# s1 needs root (a blkio cgroup). Kafka comes from bench/kafka (Maven jars).
# LAMINAR_TOML adds lines to Laminar's config file (an A/B of one setting), for example
# LAMINAR_TOML='"socket.send.buffer.bytes" = 102400'.
# The brokers listen on 127.0.0.1:PORT (default 19092; Kafka's controller takes PORT+1).
#
# Usage: bench/scenarios.sh s1|s2|s3|s4 [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/machine.sh disable=SC1091
source bench/machine.sh
scenario=${1:?usage: bench/scenarios.sh s1|s2|s3|s4 [OUT]}
case $scenario in
  s4) exec bench/s4.sh "${2:-bench/results/$(date +%F)-$(hostname)-s4}" ;;
  s1) default_rate=5000 title="S1 cold catch-up" ;;
  s2) default_rate=0 title="S2 lagging consumer" ;;
  s3) default_rate=50000 title="S3 flush interference" ;;
  *) echo "unknown scenario $scenario: s1, s2, s3 or s4" >&2; exit 2 ;;
esac
FLUSH_MS=${FLUSH_MS:-100}
out=${2:-bench/results/$(date +%F)-$(hostname)-$scenario}
raw=$(bench_raw_dir "$out")
FILL_BYTES=${FILL_BYTES:-3000000000}
READ_BPS=${READ_BPS:-52428800}
READ_IOPS=${READ_IOPS:-400}
RATE=${RATE:-$default_rate}
DURATION_S=${DURATION_S:-30}
WARMUP_S=${WARMUP_S:-10}
NETWORK_THREADS=${NETWORK_THREADS:-1}
BROKERS=${BROKERS:-"laminar kafka"}
PORT=${PORT:-19092}
DEVICE=$(cat /sys/block/vda/dev)
# A listener already on PORT would make wait_port succeed against the wrong broker.
if bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null; then
  echo "something already listens on 127.0.0.1:$PORT; set PORT" >&2
  exit 1
fi
mkdir -p "$out" "$raw/series"
cargo build --release --quiet -p laminar -p laminar-load
# The client tools (perf fill, latency, plot) are always this tree's; LAMINAR_BIN runs another
# build as the broker (an older commit, for an A/B run).
bin=$PWD/target/release/laminar
load=$PWD/target/release/laminar-load
broker_bin=${LAMINAR_BIN:-$bin}
work=$(mktemp -d "$PWD/.bench-s1.XXXXXX")
cgroup=/sys/fs/cgroup/blkio/laminar-s1-$$
broker_pid=""
launcher_pid=""

cleanup() {
  remove_blkio_cgroup "$cgroup"
  if [[ -n $launcher_pid ]] && kill -0 "$launcher_pid" 2>/dev/null; then
    kill -TERM "$launcher_pid" 2>/dev/null || true
    wait "$launcher_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

wait_port() {
  for _ in $(seq 1 120); do
    bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null && return 0
    sleep 1
  done
  echo "broker did not start" >&2
  return 1
}

{
  machine_info "$work"
  if [[ -n ${LAMINAR_BIN:-} ]]; then echo "laminar broker (LAMINAR_BIN): $broker_bin, $("$broker_bin" --version)"; fi
  echo "kafka: ${KAFKA_VERSION:-4.3.1} ($(java -version 2>&1 | head -1))"
  echo "client: librdkafka through laminar perf"
  echo "scenario: $scenario"
  if [[ $scenario == s1 ]]; then
    echo "fill: $FILL_BYTES bytes of 1 KiB records, evicted; disk reads of the broker throttled to $READ_BPS B/s, $READ_IOPS IOPS ($DEVICE)"
  elif [[ $scenario == s3 ]]; then
    echo "no fill, no consumer; a fresh broker per phase: no background flush, then log.flush.interval.ms=$FLUSH_MS"
  else
    echo "fill: $FILL_BYTES bytes of 1 KiB records, left in the page cache; the consumer fetches 1 MiB responses"
  fi
  echo "producer: $RATE records/s (0: as fast as it can) of 512 B, acks=1, linger.ms=0, $DURATION_S s per phase, after a $WARMUP_S s warm-up"
  echo "network threads: $NETWORK_THREADS (Laminar num.network.threads, Kafka num.network.threads)"
} > "$out/machine.txt"
: > "$out/runs.jsonl"
series_files=() # every measured phase's series, in the order they ran

# start_broker BROKER DATA_DIR [FLUSH_MS]: starts it in the background, waits for its port,
# sets launcher_pid (what to stop) and broker_pid (the process that does the I/O).
start_broker() {
  local broker=$1 data=$2 flush_ms=${3:-}
  case $broker in
    laminar)
      printf '"num.network.threads" = %s\n' "$NETWORK_THREADS" > "$work/laminar.toml"
      [[ -n $flush_ms ]] && printf '"log.flush.interval.ms" = %s\n' "$flush_ms" >> "$work/laminar.toml"
      [[ -n ${LAMINAR_TOML:-} ]] && printf '%s\n' "$LAMINAR_TOML" >> "$work/laminar.toml"
      "$broker_bin" serve --listen "127.0.0.1:$PORT" --metrics-listen none --data-dir "$data" \
        --config "$work/laminar.toml" > "$work/laminar.log" 2>&1 &
      launcher_pid=$!
      broker_pid=$launcher_pid
      ;;
    kafka)
      local extra=""
      # Kafka checks log.flush.interval.ms only every log.flush.scheduler.interval.ms.
      [[ -n $flush_ms ]] && extra=$(printf 'log.flush.interval.ms=%s\nlog.flush.scheduler.interval.ms=%s' "$flush_ms" "$flush_ms")
      KAFKA_NETWORK_THREADS=$NETWORK_THREADS KAFKA_EXTRA_PROPS=$extra \
        bench/kafka/run-kafka.sh "$PORT" "$data" > "$work/kafka.log" 2>&1 &
      launcher_pid=$!
      ;;
  esac
  wait_port
  if [[ $broker == kafka ]]; then broker_pid=$(pgrep -P "$launcher_pid" java); fi
}

stop_broker() {
  kill -TERM "$launcher_pid"
  wait "$launcher_pid" || true
  launcher_pid=""
}

measure() { # BROKER PHASE [perf latency options...]
  local broker=$1 phase=$2
  shift 2
  local r name series=$raw/series/$broker-$phase.json
  case $broker in laminar) name=Laminar ;; kafka) name=Kafka ;; *) name=$broker ;; esac
  r=$("$load" latency --bootstrap "127.0.0.1:$PORT" --topic hot --records-per-s "$RATE" \
    --record-bytes 512 --duration-s "$DURATION_S" "$@" --json \
    --series-out "$series" --label "$name $phase")
  series_files+=("$series")
  echo "{\"broker\":\"$broker\",\"phase\":\"$phase\",\"result\":$r}" >> "$out/runs.jsonl"
}

warm_up() {
  "$load" latency --bootstrap "127.0.0.1:$PORT" --topic hot --records-per-s "$RATE" \
    --record-bytes 512 --duration-s "$WARMUP_S" > /dev/null
}

for broker in $BROKERS; do
  if [[ $scenario == s3 ]]; then
    for phase in no-flush flush; do
      flush_ms=""
      [[ $phase == flush ]] && flush_ms=$FLUSH_MS
      start_broker "$broker" "$work/$broker-$phase" "$flush_ms"
      warm_up
      measure "$broker" "$phase"
      stop_broker
    done
    continue
  fi
  data="$work/$broker"
  start_broker "$broker" "$data"
  fill=$("$load" fill --bootstrap "127.0.0.1:$PORT" --topic big --bytes "$FILL_BYTES" --json)
  echo "{\"broker\":\"$broker\",\"phase\":\"fill\",\"result\":$fill}" >> "$out/runs.jsonl"
  warm_up
  sync
  if [[ $scenario == s1 ]]; then
    evict_big "$data"
    # What is left of `big` in the page cache (RES column): the proof it is cold.
    find "$data" -path '*big-*' -type f -exec fincore --bytes {} + > "$out/fincore-$broker.txt" || true
    mkdir "$cgroup"
    echo "$DEVICE $READ_BPS" > "$cgroup/blkio.throttle.read_bps_device"
    echo "$DEVICE $READ_IOPS" > "$cgroup/blkio.throttle.read_iops_device"
    echo "$broker_pid" > "$cgroup/cgroup.procs"
  fi
  measure "$broker" alone
  measure "$broker" catch-up --catch-up-topic big
  if [[ -d $cgroup ]]; then
    echo "$broker_pid" > /sys/fs/cgroup/blkio/cgroup.procs
    rmdir "$cgroup"
  fi
  stop_broker
done

if ((${#series_files[@]} > 0)); then
  "$bin" perf plot --title "$title" --out "$out/chart-$scenario" "${series_files[@]}" > /dev/null
fi

python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
runs = [json.loads(l) for l in open(f"{out}/runs.jsonl")]
lines = [f"# Scenario ({out})", "", open(f"{out}/machine.txt").read(), "",
         "| broker | phase | produce p50 ms | p99 ms | p99.9 ms | max ms | delivered | produce MB/s | consumer MB/s |",
         "|---|---|---|---|---|---|---|---|---|"]
by = {}
for r in runs:
    if r["phase"] == "fill":
        lines_fill = f"| {r['broker']} | fill | | | | | {r['result']['records']} | {r['result']['mb_per_s']:.0f} | |"
        lines.append(lines_fill)
        continue
    x = r["result"]; l = x["latency_us"]
    by[(r["broker"], r["phase"])] = l
    c = x.get("consumer")
    consumer = f"{c['mb_per_s']:.1f}" if c else ""
    lines.append(f"| {r['broker']} | {r['phase']} | {l['p50']/1000:.1f} | {l['p99']/1000:.1f} | {l['p999']/1000:.1f} | {l['max']/1000:.1f} | "
                 f"{x['delivered']}/{x['sent']} | {x.get('mb_per_s', 0):.1f} | {consumer} |")
lines.append("")
for b in sorted({k[0] for k in by}):
    a, c = by.get((b, "alone")), by.get((b, "catch-up"))
    if a and c:
        lines.append(f"- {b}: produce p99 with the consumer / alone = {c['p99']/max(a['p99'],1):.2f}, p99.9 {c['p999']/max(a['p999'],1):.2f}")
    a, c = by.get((b, "no-flush")), by.get((b, "flush"))
    if a and c:
        lines.append(f"- {b}: produce p99 with background flushes / without = {c['p99']/max(a['p99'],1):.2f}, p99.9 {c['p999']/max(a['p999'],1):.2f}")
if ("laminar", "catch-up") in by and ("kafka", "catch-up") in by:
    k, m = by[("kafka", "catch-up")], by[("laminar", "catch-up")]
    lines.append(f"- with the consumer, Kafka's produce p99 / Laminar's = {k['p99']/max(m['p99'],1):.1f}, p99.9 {k['p999']/max(m['p999'],1):.1f}")
tput = {(r["broker"], r["phase"]): r["result"].get("mb_per_s") for r in runs if r["phase"] != "fill"}
for b in sorted({k[0] for k in tput}):
    a, c = tput.get((b, "alone")), tput.get((b, "catch-up"))
    if a and c:
        lines.append(f"- {b}: produce MB/s with the consumer / alone = {c/a:.2f}")
charts = sorted(glob.glob(f"{out}/chart-*.svg"))
if charts:
    lines += ["", "Produce latency of every phase (over time: max per 100 ms by send time; by percentile):"]
    for c in charts:
        lines += ["", f"![{os.path.basename(c)[:-4]}]({os.path.basename(c)})"]
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
