#!/usr/bin/env bash
# The fault loop (issue 10): real faults under the delivery verifier, for Laminar and for
# Apache Kafka with its default settings, each keeping its data on a lazy laminar-faultfs
# mount (the directory underneath plays the disk).
#
#   bench/faults.sh OUT_DIR [laminar|kafka|both]
#
# For each broker: KILL_CYCLES cycles of SIGKILL, then CUT_CYCLES cycles of SIGKILL followed
# by a faultfs power cut (unsynced writes dropped), restarting the broker each time; then
# ERR_CYCLES cycles each of ENOSPC and of EIO: every write(2) to partition 1 of the cycle's
# topic fails for ERR_SECS seconds, then the fault is lifted; whether the broker is still up
# is recorded, and it is restarted if it is not. In each
# cycle `laminar-load verify` produces RATE records/s for SECS seconds at acks=all with the
# idempotent producer into a fresh topic of PARTITIONS partitions; the fault strikes at a
# random moment inside the run; the verifier rides out the restart, reads everything back and
# prints its counts, one JSON line per cycle, into OUT_DIR/<broker>.jsonl. A summary goes to
# OUT_DIR/summary.md.
#
# Env: KILL_CYCLES (50), CUT_CYCLES (50), ERR_CYCLES (10), ERR_SECS (1), RATE (1000), SECS (4),
#      PARTITIONS (4), FAULTS (the phases to run, default "kill powercut enospc eio"), APPEND=1
#      (add to OUT_DIR/<broker>.jsonl instead of starting it again),
#      LAMINAR_PORT (19192), KAFKA_PORT (19193; its controller uses +1), KAFKA_LIB.
# Needs root, /dev/fuse and fusermount3. Stops everything it started, by PID, and unmounts.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
OUT="${1:?usage: faults.sh OUT_DIR [laminar|kafka|both]}"
WHICH="${2:-both}"
KILL_CYCLES="${KILL_CYCLES:-50}"
CUT_CYCLES="${CUT_CYCLES:-50}"
ERR_CYCLES="${ERR_CYCLES:-10}"
ERR_SECS="${ERR_SECS:-1}"
FAULTS="${FAULTS:-kill powercut enospc eio}"
RATE="${RATE:-1000}"
SECS="${SECS:-4}"
PARTITIONS="${PARTITIONS:-4}"
LAMINAR_PORT="${LAMINAR_PORT:-19192}"
KAFKA_PORT="${KAFKA_PORT:-19193}"
LAMINAR="$repo/target/release/laminar"
LOAD="$repo/target/release/laminar-load"
FAULTFS="$repo/target/release/laminar-faultfs"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

(cd "$repo" && cargo build --release -p laminar -p laminar-load -p laminar-faultfs) || exit 1
[[ "$WHICH" == laminar ]] || "$here/kafka/fetch-kafka.sh" >/dev/null || exit 1

work="$(mktemp -d /tmp/laminar-faults.XXXXXX)"
fs_pid=""
broker_pid=""   # laminar serve, or run-kafka.sh
cleanup() {
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
  if [[ "$1" == KILL ]]; then
    local p; p="$(data_pid)"
    [[ -n "$p" ]] && kill -KILL "$p" 2>/dev/null
  fi
  kill -"$1" "$broker_pid" 2>/dev/null
  for _ in $(seq 1 90); do kill -0 "$broker_pid" 2>/dev/null || break; sleep 1; done
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
      >>"$work/broker.log" 2>&1 &
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

run_broker() {
  broker="$1"
  local port; [[ "$broker" == kafka ]] && port="$KAFKA_PORT" || port="$LAMINAR_PORT"
  local disk="$work/$broker-disk"; mnt="$work/$broker-mnt"
  mkdir -p "$disk" "$mnt"
  "$FAULTFS" mount "$disk" "$mnt" --lazy --control "$work/$broker.sock" >"$work/faultfs.log" 2>&1 &
  fs_pid=$!
  for _ in $(seq 1 50); do [[ -S "$work/$broker.sock" ]] && break; sleep 0.1; done
  : >"$work/broker.log"
  start_broker || return 1
  # What the broker wrote while starting (Kafka's formatted storage) is on the disk, as on a
  # machine that has been up a while.
  "$FAULTFS" ctl "$work/$broker.sock" sync >/dev/null
  local jsonl="$OUT/$broker.jsonl"
  [[ "${APPEND:-0}" == 1 ]] || : >"$jsonl"
  local cycle=0 fault n
  for fault in $FAULTS; do
    case "$fault" in
      kill) n="$KILL_CYCLES" ;;
      powercut) n="$CUT_CYCLES" ;;
      *) n="$ERR_CYCLES" ;;
    esac
    for i in $(seq 1 "$n"); do
      cycle=$((cycle + 1))
      local topic="faults-$fault-$i"
      "$LOAD" verify --bootstrap "127.0.0.1:$port" --topic "$topic" --partitions "$PARTITIONS" \
        --records-per-s "$RATE" --duration-s "$SECS" --json >"$work/verify.json" 2>"$work/verify.err" &
      local vpid=$!
      # Strike somewhere in the middle of the run (after the topic exists and records flow).
      sleep "$(awk -v s="$SECS" 'BEGIN { srand(); printf "%.2f", 1 + rand() * (s - 1.5) }')"
      local cut="{}" survived=true
      case "$fault" in
        kill|powercut)
          stop_broker KILL
          [[ "$fault" == powercut ]] && cut="$("$FAULTFS" ctl "$work/$broker.sock" powercut)"
          start_broker || { kill "$vpid" 2>/dev/null; return 1; }
          ;;
        enospc|eio)
          local errno; errno="$(echo "$fault" | tr a-z A-Z)"
          "$FAULTFS" ctl "$work/$broker.sock" fail write "*$topic-1/*" "$errno" >/dev/null
          sleep "$ERR_SECS"
          "$FAULTFS" ctl "$work/$broker.sock" clear >/dev/null
          sleep 2
          local p; p="$(data_pid)"
          if [[ -z "$p" ]] || ! kill -0 "$p" 2>/dev/null; then
            survived=false
            stop_broker KILL
            start_broker || { kill "$vpid" 2>/dev/null; return 1; }
          fi
          ;;
      esac
      if wait "$vpid"; then
        python3 - "$broker" "$fault" "$i" "$cut" "$survived" "$work/verify.json" >>"$jsonl" <<'PY'
import json, sys
broker, fault, i, cut, survived, path = sys.argv[1:]
r = json.load(open(path))
r.update(broker=broker, fault=fault, cycle=int(i), power_cut=json.loads(cut), broker_survived=survived == "true")
print(json.dumps(r))
PY
      else
        echo "{\"broker\":\"$broker\",\"fault\":\"$fault\",\"cycle\":$i,\"error\":$(tail -3 "$work/verify.err" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')}" >>"$jsonl"
      fi
      echo "$broker $fault $i: $(tail -1 "$jsonl")"
    done
  done
  stop_broker TERM
  cp "$work/broker.log" "$OUT/$broker-broker.log"
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
keys = ["acked", "lost", "duplicated", "reordered", "corrupted", "moved", "not_acked", "producer_restarts"]
print("| broker | fault | cycles | cycles with a verifier error | " + " | ".join(keys) + " | cycles losing acked records | cycles the broker did not survive |")
print("|---|---|---|---|" + "---|" * (len(keys) + 2))
for broker in ["laminar", "kafka"]:
    path = os.path.join(out, broker + ".jsonl")
    if not os.path.exists(path):
        continue
    rows = [json.loads(l) for l in open(path) if l.strip()]
    for fault in ["kill", "powercut", "enospc", "eio"]:
        rs = [r for r in rows if r["fault"] == fault]
        if not rs:
            continue
        ok = [r for r in rs if "error" not in r]
        sums = [sum(r[k] for r in ok) for k in keys]
        losing = sum(1 for r in ok if r["lost"] > 0)
        died = sum(1 for r in ok if not r.get("broker_survived", True)) if fault in ("enospc", "eio") else "-"
        print(f"| {broker} | {fault} | {len(rs)} | {len(rs) - len(ok)} | " + " | ".join(str(s) for s in sums) + f" | {losing} | {died} |")
PY
