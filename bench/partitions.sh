#!/usr/bin/env bash
# Network partitions of a leader (issue 12): three `laminar serve` processes, each in its own
# network namespace, joined by a bridge in a fourth namespace where the delivery verifier
# (librdkafka's idempotent producer at acks=all, `laminar-load verify`) runs. ROUNDS times,
# the leader of partition 0 is cut off (its veth on the bridge set down: its peers and the
# clients see nothing, no RST) for ISOLATED_S seconds, then healed for HEALED_S seconds.
#
# Checked at the end: the verifier's counts (0 acknowledged records lost), and, from the
# brokers' logs, that no leader epoch of a partition was led by two brokers ("leading T-P at
# epoch E" lines), and how often the controller fenced the isolated broker.
#
#   sudo bash bench/partitions.sh            # writes bench/results/<date>-vm-partitions/
#
# The brokers' logs go to the run's raw directory outside the repository (bench_raw_dir OUT,
# bench/machine.sh: by default /var/tmp/laminar-bench-raw/<OUT's name>).
#
# Needs root (ip netns, veth). Removes every namespace and process it made, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-20}
ISOLATED_S=${ISOLATED_S:-10}
HEALED_S=${HEALED_S:-8}
RATE=${RATE:-500}
SESSION_MS=${SESSION_MS:-3000}
bin=${BIN:-target/release/laminar}
load=${LOAD:-target/release/laminar-load}
out=${OUT:-bench/results/$(date +%F)-vm-partitions}
# shellcheck source=bench/machine.sh disable=SC1091
source bench/machine.sh
raw=$(bench_raw_dir "$out")
hub=lmhub
nets=(lmn1 lmn2 lmn3)
work=$(mktemp -d)
# The secret the brokers prove to each other on the controller port (docs/security.md).
secret="$work/controller.secret"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$secret"
chmod 600 "$secret"
pids=()
mkdir -p "$out" "$raw"

cleanup() {
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  for ns in "${nets[@]}" "$hub"; do
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[[ -x $bin && -x $load ]] || cargo build --release -p laminar -p laminar-load
voters="1@10.77.0.1:9093,2@10.77.0.2:9093,3@10.77.0.3:9093"
bootstrap="10.77.0.1:9092,10.77.0.2:9092,10.77.0.3:9092"

ip netns add "$hub"
ip -n "$hub" link set lo up
ip -n "$hub" link add lmbr type bridge
ip -n "$hub" addr add 10.77.0.100/24 dev lmbr
ip -n "$hub" link set lmbr up
for i in 1 2 3; do
  ns=${nets[$((i - 1))]}
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip link add "lmv$i" type veth peer name "lmh$i"
  ip link set "lmv$i" netns "$ns"
  ip link set "lmh$i" netns "$hub"
  ip -n "$hub" link set "lmh$i" master lmbr
  ip -n "$hub" link set "lmh$i" up
  ip -n "$ns" addr add "10.77.0.$i/24" dev "lmv$i"
  ip -n "$ns" link set "lmv$i" up
done

for i in 1 2 3; do
  ip netns exec "${nets[$((i - 1))]}" "$bin" serve --listen "10.77.0.$i:9092" --data-dir "$work/d$i" \
    --metrics-listen none --set "node.id=$i" --set "controller.quorum.voters=$voters" --set "controller.quorum.secret.file=$secret" \
    --set "broker.session.timeout.ms=$SESSION_MS" --set broker.heartbeat.interval.ms=500 \
    >"$raw/broker$i.log" 2>&1 &
  pids+=($!)
done
in_hub() { ip netns exec "$hub" "$@"; }
for _ in $(seq 1 60); do
  if in_hub "$bin" cluster describe --bootstrap 10.77.0.1:9092 2>/dev/null | grep -c '^  broker' | grep -q 3; then
    break
  fi
  sleep 1
done
in_hub "$bin" cluster describe --bootstrap 10.77.0.1:9092 | tee "$out/cluster-before.txt"
in_hub "$bin" topics create part --partitions 3 --replication-factor 3 --config min.insync.replicas=2 \
  --bootstrap "$bootstrap"
sleep 3

duration=$((ROUNDS * (ISOLATED_S + HEALED_S) + 10))
in_hub "$load" verify --bootstrap "$bootstrap" --topic part --partitions 3 --records-per-s "$RATE" \
  --duration-s "$duration" --message-timeout-ms 120000 --json >"$out/verify.json" 2>"$out/verify.log" &
verifier=$!
pids+=("$verifier")
sleep 5

leader_of_0() {
  in_hub "$bin" topics describe part --bootstrap "$bootstrap" 2>/dev/null |
    awk '$1 == "partition" && $2 == "0" {print $4}'
}
: >"$out/rounds.txt"
for r in $(seq 1 "$ROUNDS"); do
  leader=$(leader_of_0)
  if [[ ! $leader =~ ^[123]$ ]]; then
    echo "round $r: partition 0 has no leader ($leader); waiting" | tee -a "$out/rounds.txt"
    sleep "$HEALED_S"
    continue
  fi
  echo "round $r: isolating broker $leader at $(date +%T.%N)" | tee -a "$out/rounds.txt"
  ip -n "$hub" link set "lmh$leader" down
  sleep "$ISOLATED_S"
  after=$(leader_of_0)
  ip -n "$hub" link set "lmh$leader" up
  echo "round $r: healed broker $leader at $(date +%T.%N); partition 0 was led by $after while it was cut off" |
    tee -a "$out/rounds.txt"
  sleep "$HEALED_S"
done
wait "$verifier" || true
in_hub "$bin" cluster describe --bootstrap 10.77.0.1:9092 >"$out/cluster-after.txt" || true
in_hub "$bin" topics describe part --bootstrap "$bootstrap" >"$out/topic-after.txt" || true

{
  echo "rounds $ROUNDS, isolated $ISOLATED_S s, healed $HEALED_S s, verifier $RATE records/s, session $SESSION_MS ms"
  echo "laminar $("$bin" --version), kernel $(uname -r), $(date -Is)"
  echo "verifier: $(cat "$out/verify.json")"
  # Leader epochs: each (partition, epoch) must have exactly one broker that led it.
  grep -h -o 'leading part-[0-9]* at epoch [0-9]*' "$raw"/broker*.log /dev/null |
    sort | uniq -c | awk '{print "  " $0}' >"$work/epochs" || true
  for i in 1 2 3; do
    grep -o 'leading part-[0-9]* at epoch [0-9]*' "$raw/broker$i.log" | sed "s/$/ by broker $i/" || true
  done | sort -k2,2 -k5,5n >"$out/leaderships.txt"
  twice=$(awk '{print $2, $5}' "$out/leaderships.txt" | sort | uniq -d)
  echo "leaderships: $(wc -l <"$out/leaderships.txt"); an epoch led by two brokers: ${twice:-none}"
  echo "fenced by the controller (told after healing): $(grep -h -c 'is fenced' "$raw"/broker*.log | paste -sd+ | bc) times"
} | tee "$out/README.txt"
