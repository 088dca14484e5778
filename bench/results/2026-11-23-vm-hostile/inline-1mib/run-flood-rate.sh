#!/bin/bash
# The connection flood with max.connection.creation.rate = 1000.
cd /work/main
OUT=bench/results/2026-11-23-vm-hostile/inline-1mib
d=$(mktemp -d /tmp/hb.XXXX)
printf '"max.connection.creation.rate" = 1000\n' > $d/laminar.toml
target/release/laminar serve --config $d/laminar.toml --listen 127.0.0.1:19400 --metrics-listen 127.0.0.1:19401 --data-dir $d/data > $OUT/laminar-flood-rate.broker.log 2>&1 &
BP=$!; sleep 2
target/release/laminar perf hostile --bootstrap 127.0.0.1:19400 --broker-pid $BP --phase-s 30 --attacks flood --json > $OUT/laminar-flood-rate.json 2>>$OUT/run.log
curl -s 127.0.0.1:19401/metrics | grep -E "^laminar_connection" > $OUT/laminar-flood-rate.metrics.txt
kill $BP; wait $BP; rm -rf $d
gzip -9f $OUT/laminar-flood-rate.broker.log
echo done-flood-rate >> $OUT/run.log
