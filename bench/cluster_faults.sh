#!/usr/bin/env bash
# Cluster fault rounds (issue 29): three `laminar serve` processes, each in its own network
# namespace (joined by a bridge in a fourth, where the clients run) and each keeping its data
# on its own lazy laminar-faultfs mount (a power cut drops unsynced writes, size changes and
# names no fsync covered), each under libfaketime (its wall clock can jump; its monotonic clock
# cannot). ROUNDS rounds; in each, `laminar-load history` runs plain idempotent producers
# (acks=all), a transactional producer and two consumers in a group (read_committed) into a
# fresh topic (3 partitions, 3 replicas, min.insync.replicas=2) for SECS seconds, and one fault
# of the rotation strikes 3 s in:
#
#   cut-one         the leader of partition 0 frozen (SIGSTOP), its mount's power cut, killed,
#                   restarted
#   cut-all         all three frozen, all three mounts cut, all killed, all restarted
#   kill-leader     SIGKILL of partition 0's leader, restarted 2 s later
#   pause           partition 0's leader SIGSTOPped for FAULT_S seconds
#   part-leader     partition 0's leader cut off from everyone (its veth down) for FAULT_S
#   part-follower   a follower of partition 0 cut off for FAULT_S
#   part-controller the active controller cut off for FAULT_S
#   one-way         partition 0's leader hears nothing (every frame to it dropped at the
#                   bridge) but is heard, for FAULT_S
#   eio-follower    every fsync of the topic on a follower of partition 0 fails (EIO) for 3 s;
#                   that broker is restarted after (its logs stay offline until it is)
#   eio-leader      the same on partition 0's leader
#   clock-kill      partition 0's leader's wall clock jumps 10 minutes ahead, a follower's
#                   5 minutes back, and the controller is killed and restarted; clocks back
#                   after FAULT_S
#   part-kill       a follower cut off while the leader is killed and restarted
#
# After each round the round's history is checked, and the previous round's topic and REREAD
# older ones are read again and checked against their histories; at the end every topic is.
# Leader epochs are checked from the logs: no (partition, epoch) led by two brokers.
# Results: OUT/rounds.jsonl (one line per round), OUT/rereads.jsonl, OUT/summary.md; in the
# run's raw directory outside the repository (RAW: bench_raw_dir OUT, bench/machine.sh, by
# default /var/tmp/laminar-bench-raw/<OUT's name>) the histories of rounds with an anomaly
# (RAW/histories/), the brokers' logs (RAW/broker*.log), and RAW/kept/: for a re-read that
# found an anomaly or failed, the topic's partition directories on each broker as durable
# and as seen, with its history.
#
#   sudo bash bench/cluster_faults.sh [OUT]   (default bench/results/<date>-vm-cluster-faults-BROKER)
#
# BROKER=kafka runs the same rounds against Apache Kafka 4.3.1 (bench/kafka: three nodes, each
# broker and controller, a static quorum), configured the same way: replication factor 3,
# min.insync.replicas=2 (the transaction log's too), a 3 s broker session.
#
# Env: BROKER (laminar or kafka), CLOCKS (1: under libfaketime; 0: without, and no clock-kill),
#      ROUNDS (30), SECS (14), FAULT_S (6), RATE (records/s of each plain producer, 200),
#      REREAD (2), FAULTS (the rotation, default all of the above in that order).
# Needs root (ip netns, veth, bridge), /dev/fuse, fusermount3 and libfaketime (apt-get install
# faketime; installed here when missing). Removes every namespace, mount and process it made.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
BROKER="${BROKER:-laminar}"
CLOCKS="${CLOCKS:-1}"
[[ $BROKER == laminar || $BROKER == kafka ]] || { echo "BROKER: laminar or kafka" >&2; exit 2; }
OUT="${1:-$repo/bench/results/$(date +%F)-vm-cluster-faults-$BROKER}"
ROUNDS="${ROUNDS:-30}"
SECS="${SECS:-14}"
FAULT_S="${FAULT_S:-6}"
RATE="${RATE:-200}"
REREAD="${REREAD:-2}"
FAULTS="${FAULTS:-cut-one cut-all kill-leader pause part-leader part-follower part-controller one-way eio-follower eio-leader clock-kill part-kill}"
[[ $CLOCKS == 1 ]] || FAULTS="${FAULTS//clock-kill/}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
# shellcheck source=machine.sh
source "$here/machine.sh"
RAW="$(bench_raw_dir "$OUT")"
mkdir -p "$RAW"
# Errors recorded as their message, not a backtrace.
export RUST_BACKTRACE=0 RUST_LIB_BACKTRACE=0

faketime_lib=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
if [[ ! -e $faketime_lib ]]; then
  apt-get install -y faketime >/dev/null || { echo "libfaketime is needed (apt-get install faketime)" >&2; exit 1; }
fi
(cd "$repo" && cargo build --release -p laminar -p laminar-load -p laminar-faultfs) || exit 1
if [[ $BROKER == kafka ]]; then
  "$here/kafka/fetch-kafka.sh" >/dev/null || exit 1
  export KAFKA_LIB="${KAFKA_LIB:-/tmp/kafka-lib}"
  kafka_cluster_id="$(timeout 60 java -cp "$KAFKA_LIB/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n1)"
fi

work="$(mktemp -d /tmp/laminar-cluster-faults.XXXXXX)"
# The secret the brokers prove to each other on the controller port (docs/security.md).
secret="$work/controller.secret"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$secret"
chmod 600 "$secret"
mkdir -p "$work/bin" "$work/histories"
cp "$repo/target/release/laminar" "$repo/target/release/laminar-load" "$repo/target/release/laminar-faultfs" "$work/bin/"
LAMINAR="$work/bin/laminar"
LOAD="$work/bin/laminar-load"
FAULTFS="$work/bin/laminar-faultfs"
# Names of their own per broker, so that a Laminar and a Kafka run can share the machine.
if [[ $BROKER == kafka ]]; then pfx=kcf; net=10.79.0; else pfx=lcf; net=10.78.0; fi
hub=${pfx}hub
nets=("${pfx}n1" "${pfx}n2" "${pfx}n3")
voters="1@$net.1:9093,2@$net.2:9093,3@$net.3:9093"
bootstrap="$net.1:9092,$net.2:9092,$net.3:9092"
declare -A broker_pid fs_pid
load_pid=""

cleanup() {
  [[ -n $load_pid ]] && kill "$load_pid" 2>/dev/null
  for i in 1 2 3; do
    if [[ -n ${broker_pid[$i]:-} ]]; then
      local p; p=$(data_pid "$i")
      [[ -n $p ]] && kill -CONT "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null
      kill -KILL "${broker_pid[$i]}" 2>/dev/null
      wait "${broker_pid[$i]}" 2>/dev/null
    fi
  done
  for i in 1 2 3; do
    # Detached first: a mount namespace `ip netns exec` made may still see the mount.
    fusermount3 -uz "$work/mnt$i" 2>/dev/null
    if [[ -n ${fs_pid[$i]:-} ]]; then kill -TERM "${fs_pid[$i]}" 2>/dev/null; wait "${fs_pid[$i]}" 2>/dev/null; fi
  done
  for ns in "${nets[@]}" "$hub"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# What an earlier run that died may have left.
for ns in "${nets[@]}" "$hub"; do ip netns del "$ns" 2>/dev/null; done
ip netns add "$hub" || { echo "cannot make network namespaces" >&2; exit 1; }
ip -n "$hub" link set lo up
ip -n "$hub" link add "${pfx}br" type bridge
ip -n "$hub" addr add "$net.100/24" dev "${pfx}br"
ip -n "$hub" link set "${pfx}br" up
for i in 1 2 3; do
  ns=${nets[$((i - 1))]}
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip link add "${pfx}v$i" type veth peer name "${pfx}h$i"
  ip link set "${pfx}v$i" netns "$ns"
  ip link set "${pfx}h$i" netns "$hub"
  ip -n "$hub" link set "${pfx}h$i" master "${pfx}br"
  ip -n "$hub" link set "${pfx}h$i" up
  ip -n "$ns" addr add "$net.$i/24" dev "${pfx}v$i"
  ip -n "$ns" link set "${pfx}v$i" up
done
in_hub() { ip netns exec "$hub" "$@"; }
mac_of() { ip -n "$1" link show "$2" | awk '/link\/ether/ {print $2}'; }
# Neighbours are permanent: a one-way partition drops every frame to a broker, ARP replies
# included, and must not cut the other way too by starving its ARP cache.
hub_mac=$(mac_of "$hub" "${pfx}br")
for i in 1 2 3; do
  ip -n "$hub" neigh replace "$net.$i" lladdr "$(mac_of "${nets[$((i - 1))]}" "${pfx}v$i")" dev "${pfx}br" nud permanent
  ip -n "${nets[$((i - 1))]}" neigh replace "$net.100" lladdr "$hub_mac" dev "${pfx}v$i" nud permanent
  for j in 1 2 3; do
    [[ $i == "$j" ]] && continue
    ip -n "${nets[$((i - 1))]}" neigh replace "$net.$j" lladdr "$(mac_of "${nets[$((j - 1))]}" "${pfx}v$j")" \
      dev "${pfx}v$i" nud permanent
  done
done

for i in 1 2 3; do
  mkdir -p "$work/disk$i" "$work/mnt$i"
  "$FAULTFS" mount "$work/disk$i" "$work/mnt$i" --lazy --control "$work/fs$i.sock" >"$work/faultfs$i.log" 2>&1 &
  fs_pid[$i]=$!
  echo "+0" >"$work/clock$i"
done
for i in 1 2 3; do
  for _ in $(seq 1 50); do [[ -S "$work/fs$i.sock" ]] && break; sleep 0.1; done
done
fs() { "$FAULTFS" ctl "$work/fs$1.sock" "${@:2}"; }

start() {  # broker i
  local i=$1
  local clock=(env)
  # The monotonic clock is left alone, and so are timed waits on it: with libfaketime 0.9.10
  # and Java 17, FAKETIME_DONT_FAKE_MONOTONIC=1 alone makes every timed wait return at once
  # (the JVMs spin, and form no quorum); FAKETIME_FORCE_MONOTONIC_FIX=0 stops that.
  [[ $CLOCKS == 1 ]] && clock=(env LD_PRELOAD="$faketime_lib" FAKETIME_TIMESTAMP_FILE="$work/clock$i"
    FAKETIME_CACHE_DURATION=1 FAKETIME_DONT_FAKE_MONOTONIC=1 FAKETIME_FORCE_MONOTONIC_FIX=0)
  if [[ $BROKER == kafka ]]; then
    ip netns exec "${nets[$((i - 1))]}" "${clock[@]}" KAFKA_HOST="$net.$i" KAFKA_NODE_ID="$i" \
      KAFKA_QUORUM_VOTERS="$voters" KAFKA_CLUSTER_ID="$kafka_cluster_id" KAFKA_INTERNAL_RF=3 \
      KAFKA_HEAP_OPTS="-Xmx512m -Xms128m" \
      KAFKA_EXTRA_PROPS="$(printf '%s\n' min.insync.replicas=2 transaction.state.log.min.isr=2 \
        broker.session.timeout.ms=3000 broker.heartbeat.interval.ms=500)" \
      "$here/kafka/run-kafka.sh" 9092 "$work/mnt$i/kafka" >>"$RAW/broker$i.log" 2>&1 &
  else
    ip netns exec "${nets[$((i - 1))]}" "${clock[@]}" \
      "$LAMINAR" serve --listen "$net.$i:9092" --data-dir "$work/mnt$i/data" \
      --metrics-listen none --set "node.id=$i" --set "controller.quorum.voters=$voters" --set "controller.quorum.secret.file=$secret" \
      --set broker.session.timeout.ms=3000 --set broker.heartbeat.interval.ms=500 \
      --set min.insync.replicas=2 --set group.initial.rebalance.delay.ms=0 \
      >>"$RAW/broker$i.log" 2>&1 &
  fi
  broker_pid[$i]=$!
}
# The process that holds the data: Laminar itself, or the JVM under run-kafka.sh.
data_pid() {
  local i=$1
  [[ -n ${broker_pid[$i]:-} ]] || return 0
  if [[ $BROKER == kafka ]]; then pgrep -P "${broker_pid[$i]}" java; else echo "${broker_pid[$i]}"; fi
}
freeze() { local p; p=$(data_pid "$1"); [[ -n $p ]] && kill -STOP "$p"; }
thaw() { local p; p=$(data_pid "$1"); [[ -n $p ]] && kill -CONT "$p"; }
kill9() {  # broker i
  local i=$1
  [[ -n ${broker_pid[$i]:-} ]] || return 0
  local p; p=$(data_pid "$i")
  [[ -n $p ]] && kill -KILL "$p" 2>/dev/null
  kill -KILL "${broker_pid[$i]}" 2>/dev/null
  # A process in a FUSE call dies when the call returns.
  for _ in $(seq 1 100); do kill -0 "${broker_pid[$i]}" 2>/dev/null || break; sleep 0.1; done
  wait "${broker_pid[$i]}" 2>/dev/null
  broker_pid[$i]=""
}
: >"$RAW/broker1.log"; : >"$RAW/broker2.log"; : >"$RAW/broker3.log"
for i in 1 2 3; do start "$i"; done
for _ in $(seq 1 120); do
  in_hub "$LAMINAR" cluster describe --bootstrap "$net.1:9092" 2>/dev/null | grep -c '^  broker' | grep -q 3 && break
  sleep 1
done
if ! in_hub "$LAMINAR" cluster describe --bootstrap "$net.1:9092" | tee "$OUT/cluster-before.txt" | grep -q '^  broker 3'; then
  echo "the cluster did not come up; broker 1's log:" >&2; tail -20 "$RAW/broker1.log" >&2; exit 1
fi
# What the brokers wrote while starting is on their disks, as on machines up a while.
for i in 1 2 3; do fs "$i" sync >/dev/null; done

leader_of_0() {  # of topic $1
  in_hub "$LAMINAR" topics describe "$1" --bootstrap "$bootstrap" 2>/dev/null |
    awk '$1 == "partition" && $2 == "0" {print $4}'
}
controller() {
  in_hub "$LAMINAR" cluster describe --bootstrap "$bootstrap" 2>/dev/null | awk '$3 == "controller" {print $4}'
}
other_than() {  # a broker not in the arguments
  local b
  for b in 1 2 3; do [[ " $* " == *" $b "* ]] || { echo "$b"; return; }; done
}
valid() { [[ $1 =~ ^[123]$ ]]; }

# A topic's partitions as each broker holds them, to debug an anomaly found by a re-read:
# the durable files (the fault file system's backing directory) and what the broker sees
# (the mount), and the history, under RAW/kept/TOPIC-after-ROUND/.
keep() {
  local topic="$1" when="$2" to i
  to="$RAW/kept/$topic-after-$when"
  mkdir -p "$to"
  cp "$work/histories/$topic.jsonl" "$to/" 2>/dev/null
  for i in 1 2 3; do
    mkdir -p "$to/broker$i/disk" "$to/broker$i/live"
    cp -r "$work/disk$i"/*/"$topic"-* "$to/broker$i/disk/" 2>/dev/null
    cp -r "$work/mnt$i"/*/"$topic"-* "$to/broker$i/live/" 2>/dev/null
  done
}

reread() {
  local file="$1" when="$2" topic r
  topic="$(basename "$file" .jsonl)"
  if r="$(in_hub "$LOAD" reread "$file" --bootstrap "$bootstrap" --json 2>"$work/reread.err")"; then
    echo "$r" | python3 -c 'import json,sys; r=json.load(sys.stdin); r.update(topic=sys.argv[1], after_round=int(sys.argv[2])); print(json.dumps(r))' "$topic" "$when" >>"$OUT/rereads.jsonl"
    if echo "$r" | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin).get("total_anomalies") else 1)'; then
      keep "$topic" "$when"
    fi
  else
    echo "{\"topic\":\"$topic\",\"after_round\":$when,\"error\":$(tail -3 "$work/reread.err" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')}" >>"$OUT/rereads.jsonl"
    keep "$topic" "$when"
  fi
}

: >"$OUT/rounds.jsonl"; : >"$OUT/rereads.jsonl"
read -r -a rotation <<<"$FAULTS"
histories=()
for r in $(seq 1 "$ROUNDS"); do
  fault=${rotation[$(((r - 1) % ${#rotation[@]}))]}
  topic="cf-$r"
  hist="$work/histories/$topic.jsonl"
  in_hub "$LOAD" history --bootstrap "$bootstrap" --topic "$topic" --partitions 3 --replication-factor 3 \
    --records-per-s "$RATE" --duration-s "$SECS" --message-timeout-ms 120000 --out "$hist" --json \
    >"$work/history.json" 2>"$work/history.err" &
  load_pid=$!
  sleep 3
  leader=$(leader_of_0 "$topic")
  valid "$leader" || leader=$(((RANDOM % 3) + 1))
  follower=$(other_than "$leader")
  what=""
  case "$fault" in
    cut-one)
      freeze "$leader"
      what="$(fs "$leader" powercut)"
      kill9 "$leader"; start "$leader"
      ;;
    cut-all)
      for i in 1 2 3; do freeze "$i"; done
      what="$(for i in 1 2 3; do fs "$i" powercut; done | paste -sd' ')"
      for i in 1 2 3; do kill9 "$i"; done
      for i in 1 2 3; do start "$i"; done
      ;;
    kill-leader)
      kill9 "$leader"; sleep 2; start "$leader"
      ;;
    pause)
      freeze "$leader"; sleep "$FAULT_S"; thaw "$leader"
      ;;
    part-leader|part-follower|part-controller)
      victim=$leader
      [[ $fault == part-follower ]] && victim=$follower
      if [[ $fault == part-controller ]]; then victim=$(controller); valid "$victim" || victim=$leader; fi
      what="broker $victim"
      ip -n "$hub" link set "${pfx}h$victim" down; sleep "$FAULT_S"; ip -n "$hub" link set "${pfx}h$victim" up
      ;;
    one-way)
      # Nothing reaches the leader, what it sends still arrives: its bridge port neither
      # learns nor floods, and forgets its address, so frames to it go nowhere.
      ip -n "$hub" link set "${pfx}h$leader" type bridge_slave learning off flood off mcast_flood off bcast_flood off
      bridge -n "$hub" fdb del "$(mac_of "${nets[$((leader - 1))]}" "${pfx}v$leader")" dev "${pfx}h$leader" master
      sleep "$FAULT_S"
      ip -n "$hub" link set "${pfx}h$leader" type bridge_slave learning on flood on mcast_flood on bcast_flood on
      ;;
    eio-follower|eio-leader)
      victim=$leader
      [[ $fault == eio-follower ]] && victim=$follower
      what="broker $victim"
      fs "$victim" fail fsync "*$topic-*/*" EIO >/dev/null
      sleep 3
      fs "$victim" clear >/dev/null
      sleep 2
      kill9 "$victim"; start "$victim"
      ;;
    clock-kill)
      ctl=$(controller); valid "$ctl" || ctl=$follower
      echo "+600s" >"$work/clock$leader"
      echo "-300s" >"$work/clock$follower"
      kill9 "$ctl"; sleep 1; start "$ctl"
      sleep "$FAULT_S"
      for i in 1 2 3; do echo "+0" >"$work/clock$i"; done
      what="leader $leader +600s, follower $follower -300s, controller $ctl killed"
      ;;
    part-kill)
      ip -n "$hub" link set "${pfx}h$follower" down
      kill9 "$leader"; sleep 2; start "$leader"
      sleep "$FAULT_S"
      ip -n "$hub" link set "${pfx}h$follower" up
      what="follower $follower cut off, leader $leader killed"
      ;;
    *) echo "unknown fault $fault" >&2; exit 2 ;;
  esac
  if wait "$load_pid"; then
    python3 - "$r" "$fault" "$leader" "$what" "$work/history.json" >>"$OUT/rounds.jsonl" <<'PY'
import json, sys
r, fault, leader, what, path = sys.argv[1:]
rep = json.load(open(path))
rep.update(round=int(r), fault=fault, leader_of_0=leader, detail=what)
print(json.dumps(rep))
PY
    if python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["total_anomalies"] else 1)' "$work/history.json"; then
      mkdir -p "$RAW/histories"; cp "$hist" "$RAW/histories/"
    fi
    histories+=("$hist")
  else
    echo "{\"round\":$r,\"fault\":\"$fault\",\"error\":$(tail -3 "$work/history.err" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')}" >>"$OUT/rounds.jsonl"
  fi
  load_pid=""
  echo "round $r $fault: $(tail -1 "$OUT/rounds.jsonl" | cut -c1-300)"
  k=${#histories[@]}
  if (( k > 1 )); then
    reread "${histories[$((k - 2))]}" "$r"
    for _ in $(seq 1 "$REREAD"); do
      (( k > 2 )) || break
      reread "${histories[$((RANDOM % (k - 2)))]}" "$r"
    done
  fi
done
for h in "${histories[@]}"; do reread "$h" "$ROUNDS"; done
in_hub "$LAMINAR" cluster describe --bootstrap "$bootstrap" >"$OUT/cluster-after.txt" 2>&1

version="$("$LAMINAR" --version)"
if [[ $BROKER == kafka ]]; then
  jars=("$KAFKA_LIB"/kafka_2.13-*.jar)
  version="Apache Kafka $(basename "${jars[0]}" .jar)"
fi
python3 - "$OUT" "$version" "$(uname -r)" "$RAW" <<'PY' | tee "$OUT/summary.md"
import json, os, re, sys, collections
out, version, kernel, raw = sys.argv[1:]
kinds = ["lost", "duplicated", "inconsistent_offsets", "reordered", "nonmonotonic_polls", "skipped_polls",
         "aborted_reads", "torn_txns", "corrupted"]
rows = [json.loads(l) for l in open(os.path.join(out, "rounds.jsonl")) if l.strip()]
print(f"{version}, kernel {kernel}; three brokers, replication factor 3, min.insync.replicas=2")
print()
print("| fault | rounds | with a checker error | acked | txns committed/aborted/unknown | polled | " + " | ".join(kinds) + " |")
print("|---|---|---|---|---|---|" + "---|" * len(kinds))
for fault in dict.fromkeys(r["fault"] for r in rows):
    rs = [r for r in rows if r["fault"] == fault]
    ok = [r for r in rs if "error" not in r]
    txns = "/".join(str(sum(r[k] for r in ok)) for k in ["txns_committed", "txns_aborted", "txns_unknown"])
    print(f"| {fault} | {len(rs)} | {len(rs) - len(ok)} | {sum(r['acked'] for r in ok)} | {txns} | {sum(r['polled'] for r in ok)} | "
          + " | ".join(str(sum(r[k] for r in ok)) for k in kinds) + " |")
rr = [json.loads(l) for l in open(os.path.join(out, "rereads.jsonl")) if l.strip()]
ok = [r for r in rr if "error" not in r]
print()
print(f"Re-reads of earlier topics after later rounds: {len(rr)}, {len(rr) - len(ok)} with an error, "
      f"{sum(1 for r in ok if any(r[k] for k in kinds))} with an anomaly ("
      + ", ".join(f"{k} {sum(r[k] for r in ok)}" for k in kinds) + ")")
led = collections.defaultdict(set)
for i in (1, 2, 3):
    for line in open(os.path.join(raw, f"broker{i}.log"), errors="replace"):
        m = re.search(r"leading (\S+) at epoch (\d+)", line)
        if m:
            led[(m.group(1), int(m.group(2)))].add(i)
twice = {k: v for k, v in led.items() if len(v) > 1}
if led:
    print(f"Leaderships: {len(led)}; a (partition, epoch) led by two brokers: {sorted(twice.items()) or 'none'}")
PY
