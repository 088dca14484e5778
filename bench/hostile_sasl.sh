#!/usr/bin/env bash
# Unauthenticated clients against a SASL listener (issue 41's acceptance): while an
# authenticated librdkafka producer (SASL/PLAIN) sends RATE records/s of 512 B (acks=1),
# UNFINISHED connections each send all but the end of a frame just under the 512 KiB bound
# for clients not yet authenticated and stop, and a flood opens FLOOD_PER_S connections a
# second from the same address (half ask ApiVersions, half close at once). Phases: a
# baseline, the attack, a baseline, CYCLES times; `laminar-load hostile` compares the
# producer's p99 in each attack with the baselines around it, and counts what it sent,
# what was delivered and what failed.
#
#   bench/hostile_sasl.sh OUT_DIR
#
# Env: RATE (1000), PHASE_S (30), LONG_PHASE_S (60: the attack phases), CYCLES (2),
#      UNFINISHED (600), FLOOD_PER_S (2000), PORT (19494), LAMINAR (the binary), LAMINAR_CONFIG
#      (more TOML lines for the broker). Laminar runs on its defaults otherwise (no
#      max.connections.per.ip, queued.max.unauthenticated.request.bytes 32 MiB). Stops what
#      it started, by PID. The broker's log goes, gzipped, to the run's raw directory outside
#      the repository (bench_raw_dir OUT_DIR, bench/machine.sh: by default
#      /var/tmp/laminar-bench-raw/<OUT_DIR's name>); OUT_DIR gets its reasons for closing
#      connections.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
OUT="${1:?usage: hostile_sasl.sh OUT_DIR}"
RATE="${RATE:-1000}"
PHASE_S="${PHASE_S:-30}"
LONG_PHASE_S="${LONG_PHASE_S:-60}"
CYCLES="${CYCLES:-2}"
UNFINISHED="${UNFINISHED:-600}"
FLOOD_PER_S="${FLOOD_PER_S:-2000}"
PORT="${PORT:-19494}"
LAMINAR="${LAMINAR:-$repo/target/release/laminar}"
LOAD="$repo/target/release/laminar-load"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

(cd "$repo" && cargo build --release -p laminar -p laminar-load) || exit 1
# shellcheck source=machine.sh
source "$here/machine.sh"
RAW="$(bench_raw_dir "$OUT")"
mkdir -p "$RAW"
(cd "$repo" && machine_info /tmp && echo "open files (soft/hard): $(ulimit -Sn)/$(ulimit -Hn)" &&
  echo "laminar binary: $LAMINAR ($("$LAMINAR" --version 2>/dev/null))" &&
  echo "producer: $RATE records/s of 512 B, acks=1, SASL_PLAINTEXT PLAIN; baselines $PHASE_S s, attacks $LONG_PHASE_S s, $CYCLES cycles" &&
  echo "attack: $UNFINISHED unfinished frames (522,240 B announced, 521,000 B sent), a flood of $FLOOD_PER_S connections/s") \
  >"$OUT/machine.txt"
ulimit -n "$(ulimit -Hn)"

data="$(mktemp -d /tmp/hostile-sasl.XXXXXX)"
cat >"$data/laminar.toml" <<TOML
"listeners" = "SASL_PLAINTEXT://127.0.0.1:$PORT"
"sasl.enabled.mechanisms" = "PLAIN"
"sasl.mechanism.inter.broker.protocol" = "PLAIN"
"listener.name.sasl_plaintext.plain.sasl.jaas.config" = "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"broker\" password=\"broker-secret\" user_broker=\"broker-secret\" user_alice=\"alice-secret\";"
${LAMINAR_CONFIG:-}
TOML
"$LAMINAR" serve --metrics-listen 127.0.0.1:0 --data-dir "$data/data" --config "$data/laminar.toml" \
  >"$RAW/broker.log" 2>&1 &
broker_pid=$!
stop() {
  kill "$broker_pid" 2>/dev/null
  for _ in $(seq 1 300); do kill -0 "$broker_pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$broker_pid" 2>/dev/null
  wait "$broker_pid" 2>/dev/null
  rm -rf "$data"
}
trap stop EXIT
deadline=$((SECONDS + 60))
until (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do
  ((SECONDS < deadline)) || { echo "laminar did not listen on $PORT" >&2; exit 1; }
  sleep 0.5
done

"$LOAD" hostile --bootstrap "127.0.0.1:$PORT" --broker-pid "$broker_pid" \
  --client-config security.protocol=SASL_PLAINTEXT --client-config sasl.mechanism=PLAIN \
  --client-config sasl.username=alice --client-config sasl.password=alice-secret \
  --records-per-s "$RATE" --phase-s "$PHASE_S" --long-phase-s "$LONG_PHASE_S" --cycles "$CYCLES" \
  --attacks unauthenticated --unfinished-frames "$UNFINISHED" --unfinished-frame-bytes 522240 \
  --unfinished-frame-sent-bytes 521000 --flood-per-s "$FLOOD_PER_S" \
  --json >"$OUT/hostile.json" 2>"$OUT/run.log"
echo "exit $?" >>"$OUT/run.log"
grep -hoE "closing connection from [^ ]+: .*|(Closing|closing) .*connection.*" "$RAW/broker.log" 2>/dev/null |
  sed -E 's/from [0-9.:]+:? ?/from ADDR /; s/[0-9]+/N/g' | sort | uniq -c | sort -rn >"$OUT/close-reasons.txt"
gzip -9f "$RAW/broker.log"
echo "done: $OUT (hostile.json)"
