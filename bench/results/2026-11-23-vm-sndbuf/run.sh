#!/bin/bash
# Consume throughput on Laminar with socket.send.buffer.bytes at -1 (the kernel's autotuning,
# Laminar's default so far) and at 102400 (Kafka's default), alternating, to choose the default.
# Per round and setting: a fresh broker (1 network thread, as S2), `perf fill` of FILL bytes of
# 1 KiB records (in the page cache), Kafka's ConsumerPerformance (Java client defaults) over
# all of it twice (two groups), then S2's load: `perf latency` producing as fast as it can for
# 20 s while a librdkafka consumer fetching 1 MiB responses reads `big` from its start.
set -euo pipefail
cd /work/main
OUT=bench/results/2026-11-23-vm-sndbuf
FILL=${FILL:-2000000000}
PORT=19492
bin=$PWD/target/release/laminar
java_tool=(java -Xmx512M -XX:+UseG1GC -cp "/tmp/kafka-lib/*")

source bench/machine.sh
machine_info /tmp > "$OUT/machine.txt"
for round in 1 2 3; do
  if (( round % 2 )); then order="auto 102400"; else order="102400 auto"; fi
  for setting in $order; do
    d=$(mktemp -d /tmp/sndbuf.XXXX)
    printf '"num.network.threads" = 1\n' > "$d/laminar.toml"
    [[ $setting == auto ]] || printf '"socket.send.buffer.bytes" = %s\n' "$setting" >> "$d/laminar.toml"
    "$bin" serve --config "$d/laminar.toml" --listen 127.0.0.1:$PORT --metrics-listen none \
      --data-dir "$d/data" > "$d/broker.log" 2>&1 &
    bp=$!
    for _ in $(seq 100); do bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null && break; sleep 0.1; done
    tag="$setting-r$round"
    "$bin" perf fill --bootstrap 127.0.0.1:$PORT --topic big --bytes "$FILL" --json > "$OUT/$tag.fill.json"
    records=$(python3 -c "import json;print(json.load(open('$OUT/$tag.fill.json'))['records'])")
    for g in 1 2; do
      "${java_tool[@]}" org.apache.kafka.tools.ConsumerPerformance --bootstrap-server 127.0.0.1:$PORT \
        --topic big --num-records "$records" --group "g$g-$tag" --timeout 120000 > "$OUT/$tag.consumer-perf-$g.txt" 2>&1
    done
    "$bin" perf latency --bootstrap 127.0.0.1:$PORT --topic hot --records-per-s 0 --record-bytes 512 \
      --duration-s 20 --catch-up-topic big --fetch-max-bytes 1048576 --json > "$OUT/$tag.s2.json"
    kill "$bp"; wait "$bp" || true
    rm -rf "$d"
    echo "done $tag $(date +%T)" >> "$OUT/run.log"
  done
done
echo all-done >> "$OUT/run.log"
