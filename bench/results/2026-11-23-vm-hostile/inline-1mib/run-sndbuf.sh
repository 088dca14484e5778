#!/bin/bash
# Non-reading consumers again, with socket.send.buffer.bytes = 102400 (Kafka's default).
cd /work/main
OUT=bench/results/2026-11-23-vm-hostile/inline-1mib
d=$(mktemp -d /tmp/hb.XXXX)
printf '"socket.send.buffer.bytes" = 102400\n' > $d/laminar.toml
target/release/laminar serve --config $d/laminar.toml --listen 127.0.0.1:19400 --metrics-listen 127.0.0.1:19401 --data-dir $d/data > $OUT/laminar-nonreading-sndbuf.broker.log 2>&1 &
BP=$!; sleep 2
(for i in $(seq 1 150); do echo "$(date +%s) $(grep TCP: /proc/net/sockstat)"; sleep 1; done) > $OUT/nonreading-sndbuf-sockstat.txt &
S=$!
target/release/laminar perf hostile --bootstrap 127.0.0.1:19400 --broker-pid $BP --phase-s 30 --long-phase-s 75 --attacks non-reading --json > $OUT/laminar-nonreading-sndbuf.json 2>>$OUT/run.log
kill $S; kill $BP; wait $BP; rm -rf $d
gzip -9f $OUT/laminar-nonreading-sndbuf.broker.log
echo done-sndbuf >> $OUT/run.log
