#!/bin/sh
# The kernel TLS test's program in the VM: a connection to port 9101 drops the page cache
# (the next fetches read cold data), and Laminar serves with its data on /data (an ext4 disk).
(
  while true; do
    nc -l -p 9101 </dev/null >/dev/null 2>&1
    sync
    echo 3 >/proc/sys/vm/drop_caches
    echo "KTLSVM: page cache dropped"
  done
) &
exec /usr/local/bin/laminar serve --data-dir /data/laminar --config /etc/laminar/laminar.toml \
  --metrics-listen 0.0.0.0:9100
