#!/bin/bash
# Bombs again with the 1 MiB inline bound, two rounds; then non-reading consumers with the kernel's TCP memory sampled.
cd /work/main
OUT=bench/results/2026-11-23-vm-hostile/inline-1mib
for r in 1 2; do
  d=$(mktemp -d /tmp/hb.XXXX)
  target/release/laminar serve --listen 127.0.0.1:19400 --metrics-listen 127.0.0.1:19401 --data-dir $d/data > $OUT/laminar-bombs-r$r.broker.log 2>&1 &
  BP=$!; sleep 2
  target/release/laminar perf hostile --bootstrap 127.0.0.1:19400 --broker-pid $BP --phase-s 30 --attacks bombs --json > $OUT/laminar-bombs-r$r.json 2>>$OUT/run.log
  curl -s 127.0.0.1:19401/metrics | grep -E "^laminar_produce_large" > $OUT/laminar-bombs-r$r.metrics.txt
  kill $BP; wait $BP; rm -rf $d
done
d=$(mktemp -d /tmp/hb.XXXX)
target/release/laminar serve --listen 127.0.0.1:19400 --metrics-listen 127.0.0.1:19401 --data-dir $d/data > $OUT/laminar-nonreading.broker.log 2>&1 &
BP=$!; sleep 2
(for i in $(seq 1 150); do echo "$(date +%s) $(grep TCP: /proc/net/sockstat)"; sleep 1; done) > $OUT/nonreading-sockstat.txt &
S=$!
target/release/laminar perf hostile --bootstrap 127.0.0.1:19400 --broker-pid $BP --phase-s 30 --long-phase-s 75 --attacks non-reading --json > $OUT/laminar-nonreading.json 2>>$OUT/run.log
kill $S; kill $BP; wait $BP; rm -rf $d
echo "tcp_mem: $(cat /proc/sys/net/ipv4/tcp_mem)" >> $OUT/nonreading-sockstat.txt
gzip -9f $OUT/*.broker.log
echo done >> $OUT/run.log
