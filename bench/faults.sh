#!/usr/bin/env bash
# The fault loop (issues 10 and 29): real faults under the history checker, for Laminar and
# for Apache Kafka with its default settings, each keeping its data on a lazy laminar-faultfs
# mount (the directory underneath plays the disk; a power cut drops unsynced writes, size
# changes, and creations, removals and renames no fsync covered, as LazyFS does).
#
#   bench/faults.sh OUT_DIR [laminar|kafka|both]
#
# For each broker, cycles of each phase in FAULTS: `kill` (SIGKILL), `powercut` (SIGKILL, then
# a faultfs power cut), `torn` (the same with `powercut torn`: each file keeps a random prefix
# of its unsynced pages, ending at any byte), `enospc` and `eio` (every write(2) to partition 1
# of the cycle's topic fails for ERR_SECS seconds; whether the broker is still up is recorded,
# and it is restarted if it is not), restarting the broker each time. In each cycle
# `laminar-load history` runs plain idempotent producers (acks=all), a transactional producer
# and two consumers in a group (read_committed) into a fresh topic of PARTITIONS partitions for
# SECS seconds, and the fault strikes at a random moment inside the run. Half the power cuts
# come after every fsync was held back for 0.3-1.3 s (the broker frozen by SIGSTOP at the cut). Beside it, a churn
# load (acks=1) writes to a topic with a small retention.bytes and to a compacted topic, so
# that the cuts land during segment rolls, retention and cleaning; Laminar also runs with
# 64 KiB segments and a recovery-point checkpoint renamed every 200 ms. After each cycle the
# previous cycle's topic and REREAD older ones are read again and checked against their
# histories (what an earlier read found must still be there, at the same offsets); at the end,
# every topic is. One JSON line per cycle goes to OUT_DIR/<broker>.jsonl, one per re-read to
# OUT_DIR/<broker>-rereads.jsonl, and a summary to OUT_DIR/summary.md; the histories of cycles
# with an anomaly (<broker>-histories/) and the broker's log (<broker>-broker.log) to the run's
# raw directory outside the repository (bench_raw_dir OUT_DIR, bench/machine.sh: by default
# /var/tmp/laminar-bench-raw/<OUT_DIR's name>).
#
# Env: KILL_CYCLES (20), CUT_CYCLES (50), TORN_CYCLES (50), ERR_CYCLES (10), ERR_SECS (1),
#      SECS (6), RATE (records/s of each of the two plain producers, 300), PARTITIONS (4),
#      REREAD (3), FAULTS (the phases to run, default "kill powercut torn enospc eio"),
#      APPEND=1 (add to OUT_DIR/<broker>.jsonl instead of starting it again),
#      LAMINAR_PORT (19192), KAFKA_PORT (19193; its controller uses +1), KAFKA_LIB.
# Needs root, /dev/fuse and fusermount3. Stops everything it started, by PID, and unmounts.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
OUT="${1:?usage: faults.sh OUT_DIR [laminar|kafka|both]}"
WHICH="${2:-both}"
KILL_CYCLES="${KILL_CYCLES:-20}"
CUT_CYCLES="${CUT_CYCLES:-50}"
TORN_CYCLES="${TORN_CYCLES:-50}"
ERR_CYCLES="${ERR_CYCLES:-10}"
ERR_SECS="${ERR_SECS:-1}"
FAULTS="${FAULTS:-kill powercut torn enospc eio}"
RATE="${RATE:-300}"
SECS="${SECS:-6}"
PARTITIONS="${PARTITIONS:-4}"
REREAD="${REREAD:-3}"
LAMINAR_PORT="${LAMINAR_PORT:-19192}"
KAFKA_PORT="${KAFKA_PORT:-19193}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
# shellcheck source=machine.sh
source "$here/machine.sh"
RAW="$(bench_raw_dir "$OUT")"
mkdir -p "$RAW"
# Errors recorded as their message, not a backtrace.
export RUST_BACKTRACE=0 RUST_LIB_BACKTRACE=0

(cd "$repo" && cargo build --release -p laminar -p laminar-load -p laminar-faultfs) || exit 1
[[ "$WHICH" == laminar ]] || "$here/kafka/fetch-kafka.sh" >/dev/null || exit 1

work="$(mktemp -d /tmp/laminar-faults.XXXXXX)"
# Copies: a build during the run must not change the binaries under test.
mkdir -p "$work/bin"
cp "$repo/target/release/laminar" "$repo/target/release/laminar-load" "$repo/target/release/laminar-faultfs" "$work/bin/"
LAMINAR="$work/bin/laminar"
LOAD="$work/bin/laminar-load"
FAULTFS="$work/bin/laminar-faultfs"
churn_pids=()
cat >"$work/laminar.toml" <<'TOML'
"log.segment.bytes" = 65536
"log.flush.offset.checkpoint.interval.ms" = 200
"log.retention.check.interval.ms" = 500
"log.cleaner.backoff.ms" = 500
"log.cleaner.min.cleanable.ratio" = 0.01
# As bench/kafka runs Kafka: a group's first rebalance does not wait 3 s for more members.
"group.initial.rebalance.delay.ms" = 0
TOML
fs_pid=""
broker_pid=""   # laminar serve, or run-kafka.sh
cleanup() {
  stop_churn
  stop_broker TERM
  if [[ -n "$fs_pid" ]]; then kill -TERM "$fs_pid" 2>/dev/null; wait "$fs_pid" 2>/dev/null; fi
  fs_pid=""
  rm -rf "$work"
}
trap cleanup EXIT

# The process that holds the data: Laminar itself, or the JVM under run-kafka.sh.
data_pid() {
  if [[ "$broker" == kafka ]]; then pgrep -P "$broker_pid" java; else echo "$broker_pid"; fi
}

stop_broker() {  # SIG: TERM (clean) or KILL (crash)
  [[ -n "$broker_pid" ]] || return 0
  # A broker frozen for a power cut must be able to act on a TERM.
  local frozen; frozen="$(data_pid)"
  [[ -n "$frozen" ]] && kill -CONT "$frozen" 2>/dev/null
  if [[ "$1" == KILL ]]; then
    local p; p="$(data_pid)"
    [[ -n "$p" ]] && kill -KILL "$p" 2>/dev/null
  fi
  kill -"$1" "$broker_pid" 2>/dev/null
  for _ in $(seq 1 90); do kill -0 "$broker_pid" 2>/dev/null || break; sleep 1; done
  kill -0 "$broker_pid" 2>/dev/null && { kill -KILL "$(data_pid)" "$broker_pid" 2>/dev/null; sleep 1; }
  wait "$broker_pid" 2>/dev/null
  broker_pid=""
}

start_broker() {
  local port
  if [[ "$broker" == kafka ]]; then
    port="$KAFKA_PORT"
    "$here/kafka/run-kafka.sh" "$port" "$mnt/kafka" >>"$work/broker.log" 2>&1 &
  else
    port="$LAMINAR_PORT"
    "$LAMINAR" serve --listen "127.0.0.1:$port" --metrics-listen none --data-dir "$mnt/laminar" \
      --config "$work/laminar.toml" >>"$work/broker.log" 2>&1 &
  fi
  broker_pid=$!
  # Up to 2 minutes: Kafka recovering a few hundred partitions after a power cut is slow.
  for _ in $(seq 1 480); do
    timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null && return 0
    kill -0 "$broker_pid" 2>/dev/null || break
    sleep 0.25
  done
  echo "$broker did not come up; its log:" >&2
  tail -30 "$work/broker.log" >&2
  return 1
}

stop_churn() {
  local p
  for p in "${churn_pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  churn_pids=()
}

# Writes at acks=1 to the churn topics for $1 seconds, in the background: segments roll,
# retention deletes the oldest, the cleaner compacts.
start_churn() {
  "$LOAD" latency --bootstrap "127.0.0.1:$port" --topic churn-retention --records-per-s 500 \
    --record-bytes 200 --duration-s "$1" --acks 1 >/dev/null 2>&1 &
  churn_pids+=($!)
  "$LOAD" latency --bootstrap "127.0.0.1:$port" --topic churn-compact --keys 200 --records-per-s 500 \
    --record-bytes 200 --duration-s "$1" --acks 1 >/dev/null 2>&1 &
  churn_pids+=($!)
}

create_churn_topics() {
  local seg=65536 keep=262144
  # Kafka 4 refuses segments under 1 MiB.
  [[ "$broker" == kafka ]] && { seg=1048576; keep=2097152; }
  "$LAMINAR" topics create churn-retention --partitions 1 --bootstrap "127.0.0.1:$port" \
    --config "segment.bytes=$seg" --config "retention.bytes=$keep" >/dev/null || return 1
  "$LAMINAR" topics create churn-compact --partitions 1 --bootstrap "127.0.0.1:$port" \
    --config cleanup.policy=compact --config "segment.bytes=$seg" \
    --config min.cleanable.dirty.ratio=0.01 >/dev/null || return 1
}

# Re-reads the history in $1 (a topic of an earlier cycle) and records the check.
reread() {
  local file="$1" when="$2" topic
  topic="$(basename "$file" .jsonl)"
  local r
  if r="$("$LOAD" reread "$file" --bootstrap "127.0.0.1:$port" --json 2>"$work/reread.err")"; then
    echo "$r" | python3 -c 'import json,sys; r=json.load(sys.stdin); r.update(topic=sys.argv[1], after_cycle=int(sys.argv[2])); print(json.dumps(r))' "$topic" "$when" >>"$OUT/$broker-rereads.jsonl"
  else
    echo "{\"topic\":\"$topic\",\"after_cycle\":$when,\"error\":$(tail -3 "$work/reread.err" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')}" >>"$OUT/$broker-rereads.jsonl"
  fi
}

run_broker() {
  broker="$1"
  [[ "$broker" == kafka ]] && port="$KAFKA_PORT" || port="$LAMINAR_PORT"
  local disk="$work/$broker-disk"; mnt="$work/$broker-mnt"
  mkdir -p "$disk" "$mnt" "$work/$broker-histories"
  "$FAULTFS" mount "$disk" "$mnt" --lazy --control "$work/$broker.sock" >"$work/faultfs.log" 2>&1 &
  fs_pid=$!
  for _ in $(seq 1 50); do [[ -S "$work/$broker.sock" ]] && break; sleep 0.1; done
  : >"$work/broker.log"
  start_broker || return 1
  create_churn_topics || { echo "could not create the churn topics" >&2; return 1; }
  # What the broker wrote while starting (Kafka's formatted storage) is on the disk, as on a
  # machine that has been up a while.
  "$FAULTFS" ctl "$work/$broker.sock" sync >/dev/null
  local jsonl="$OUT/$broker.jsonl"
  [[ "${APPEND:-0}" == 1 ]] || { : >"$jsonl"; : >"$OUT/$broker-rereads.jsonl"; }
  local cycle=0 fault n histories=()
  for fault in $FAULTS; do
    case "$fault" in
      kill) n="$KILL_CYCLES" ;;
      powercut) n="$CUT_CYCLES" ;;
      torn) n="$TORN_CYCLES" ;;
      *) n="$ERR_CYCLES" ;;
    esac
    for i in $(seq 1 "$n"); do
      cycle=$((cycle + 1))
      local topic="faults-$fault-$i"
      local hist="$work/$broker-histories/$topic.jsonl"
      start_churn $((SECS + 4))
      "$LOAD" history --bootstrap "127.0.0.1:$port" --topic "$topic" --partitions "$PARTITIONS" \
        --records-per-s "$RATE" --duration-s "$SECS" --out "$hist" --json \
        >"$work/history.json" 2>"$work/history.err" &
      local hpid=$!
      # Strike somewhere in the middle of the run (after the topic exists and records flow).
      sleep "$(awk -v s="$SECS" 'BEGIN { srand(); printf "%.2f", 1 + rand() * (s - 1.5) }')"
      local cut="{}" survived=true held=false
      case "$fault" in
        kill)
          stop_broker KILL
          start_broker || { kill "$hpid" 2>/dev/null; return 1; }
          ;;
        powercut|torn)
          local how=powercut; [[ "$fault" == torn ]] && how="powercut torn"
          if (( RANDOM % 2 )); then
            # Every fsync held back for a moment first (a slow disk): writes, rolls,
            # checkpoint renames, retention and cleaning pile up unsynced; the broker is frozen
            # (SIGSTOP) so that it issues nothing more, the power goes, then it is killed
            # (the fsyncs it was waiting in return after the cut and, issued before it, do
            # nothing: laminar-faultfs drops a delayed call that a cut overtook).
            held=true
            "$FAULTFS" ctl "$work/$broker.sock" delay fsync '*' 2000 >/dev/null
            sleep "$(awk 'BEGIN { srand(); printf "%.2f", 0.3 + rand() }')"
            kill -STOP "$(data_pid)" 2>/dev/null
            # shellcheck disable=SC2086 # `powercut torn` is two words
            cut="$("$FAULTFS" ctl "$work/$broker.sock" $how)"
            stop_broker KILL
            "$FAULTFS" ctl "$work/$broker.sock" clear >/dev/null
          else
            stop_broker KILL
            # shellcheck disable=SC2086
            cut="$("$FAULTFS" ctl "$work/$broker.sock" $how)"
          fi
          start_broker || { kill "$hpid" 2>/dev/null; return 1; }
          ;;
        enospc|eio)
          local errno; errno="$(echo "$fault" | tr '[:lower:]' '[:upper:]')"
          "$FAULTFS" ctl "$work/$broker.sock" fail write "*$topic-1/*" "$errno" >/dev/null
          sleep "$ERR_SECS"
          "$FAULTFS" ctl "$work/$broker.sock" clear >/dev/null
          sleep 2
          local p; p="$(data_pid)"
          if [[ -z "$p" ]] || ! kill -0 "$p" 2>/dev/null; then
            survived=false
            stop_broker KILL
            start_broker || { kill "$hpid" 2>/dev/null; return 1; }
          fi
          ;;
      esac
      if wait "$hpid"; then
        python3 - "$broker" "$fault" "$i" "$cut" "$survived" "$held" "$work/history.json" >>"$jsonl" <<'PY'
import json, sys
broker, fault, i, cut, survived, held, path = sys.argv[1:]
r = json.load(open(path))
r.update(broker=broker, fault=fault, cycle=int(i), power_cut=json.loads(cut), broker_survived=survived == "true",
         fsyncs_held=held == "true")
print(json.dumps(r))
PY
        if python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["total_anomalies"] else 1)' "$work/history.json"; then
          mkdir -p "$RAW/$broker-histories"; cp "$hist" "$RAW/$broker-histories/"
        fi
        histories+=("$hist")
      else
        echo "{\"broker\":\"$broker\",\"fault\":\"$fault\",\"cycle\":$i,\"error\":$(tail -3 "$work/history.err" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')}" >>"$jsonl"
      fi
      stop_churn
      echo "$broker $fault $i: $(tail -1 "$jsonl" | cut -c1-400)"
      # Older topics again, after this cycle's fault: the one before, and a few at random.
      local k=${#histories[@]}
      if (( k > 1 )); then
        reread "${histories[$((k - 2))]}" "$cycle"
        local j
        for _ in $(seq 1 "$REREAD"); do
          (( k > 2 )) || break
          j=$((RANDOM % (k - 2)))
          reread "${histories[$j]}" "$cycle"
        done
      fi
    done
  done
  # Every topic once more, at the end.
  local h
  for h in "${histories[@]}"; do reread "$h" "$cycle"; done
  stop_broker TERM
  cp "$work/broker.log" "$RAW/$broker-broker.log"
  kill -TERM "$fs_pid"; wait "$fs_pid" 2>/dev/null; fs_pid=""
}

case "$WHICH" in
  laminar|kafka) run_broker "$WHICH" ;;
  both) run_broker laminar && run_broker kafka ;;
  *) echo "laminar, kafka or both" >&2; exit 2 ;;
esac

python3 - "$OUT" <<'PY' | tee "$OUT/summary.md"
import json, os, sys
out = sys.argv[1]
kinds = ["lost", "duplicated", "inconsistent_offsets", "reordered", "nonmonotonic_polls", "skipped_polls",
         "aborted_reads", "torn_txns", "corrupted"]
print("| broker | fault | cycles | cycles with a checker error | acked | txns committed/aborted/unknown | polled | "
      + " | ".join(kinds) + " | cycles with an anomaly | cycles the broker did not survive |")
print("|---|---|---|---|---|---|---|" + "---|" * (len(kinds) + 2))
for broker in ["laminar", "kafka"]:
    path = os.path.join(out, broker + ".jsonl")
    if not os.path.exists(path):
        continue
    rows = [json.loads(l) for l in open(path) if l.strip()]
    for fault in ["kill", "powercut", "torn", "enospc", "eio"]:
        rs = [r for r in rows if r["fault"] == fault]
        if not rs:
            continue
        ok = [r for r in rs if "error" not in r]
        sums = [sum(r[k] for r in ok) for k in kinds]
        bad = sum(1 for r in ok if any(r[k] for k in kinds))
        died = sum(1 for r in ok if not r.get("broker_survived", True)) if fault in ("enospc", "eio") else "-"
        txns = "/".join(str(sum(r[k] for r in ok)) for k in ["txns_committed", "txns_aborted", "txns_unknown"])
        print(f"| {broker} | {fault} | {len(rs)} | {len(rs) - len(ok)} | {sum(r['acked'] for r in ok)} | {txns} | "
              f"{sum(r['polled'] for r in ok)} | " + " | ".join(str(x) for x in sums) + f" | {bad} | {died} |")
print()
print("Re-reads of earlier topics after later faults (each checked against its history):")
print()
print("| broker | re-reads | with an error | with an anomaly | " + " | ".join(kinds) + " |")
print("|---|---|---|---|" + "---|" * len(kinds))
for broker in ["laminar", "kafka"]:
    path = os.path.join(out, broker + "-rereads.jsonl")
    if not os.path.exists(path):
        continue
    rows = [json.loads(l) for l in open(path) if l.strip()]
    ok = [r for r in rows if "error" not in r]
    bad = sum(1 for r in ok if any(r[k] for k in kinds))
    print(f"| {broker} | {len(rows)} | {len(rows) - len(ok)} | {bad} | " + " | ".join(str(sum(r[k] for r in ok)) for k in kinds) + " |")
PY
