#!/usr/bin/env bash
# The physical limits of the disk under the repository, measured with fio (Debian's `fio`),
# so that every log and broker figure can be stated as a share of them:
#   - sequential direct (O_DIRECT) write bandwidth, 1 MiB blocks, queue depth 1 and 8;
#   - buffered sequential write bandwidth, including the final fsync;
#   - fdatasync latency after an append of 4 KiB, 64 KiB and 1 MiB (a log's group commit);
#   - fdatasync latency after 16 KiB appends at 3,000/s (acks=all's group commit at a fixed
#     rate), alone and while a CPU-bound process (nice 19) keeps the other CPU busy: on a
#     virtual machine the device's completions can wait for the host to run its I/O thread.
# Usage: bench/disk_limits.sh [OUT] (default bench/results/<date>-<host>-disk-limits)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/machine.sh
command -v fio >/dev/null || { echo "needs fio (apt-get install fio)" >&2; exit 2; }
out=${1:-bench/results/$(date +%F)-$(hostname)-disk-limits}
SIZE=${SIZE:-4G}
mkdir -p "$out"
work=$(mktemp -d "$PWD/.bench-fio.XXXXXX")
spinner=""
trap 'rm -rf "$work"; [[ -z $spinner ]] || kill "$spinner" 2>/dev/null' EXIT
machine_info "$work" > "$out/machine.txt"
fio --version >> "$out/machine.txt"

run() { # name, fio args...
  local name=$1; shift
  fio --name="$name" --directory="$work" --output-format=json "$@" > "$out/$name.json"
  rm -f "$work"/*
}
run direct-write-qd1 --rw=write --bs=1M --size="$SIZE" --direct=1 --ioengine=psync
run direct-write-qd8 --rw=write --bs=1M --size="$SIZE" --direct=1 --ioengine=libaio --iodepth=8
run buffered-write --rw=write --bs=1M --size="$SIZE" --ioengine=psync --end_fsync=1
run fdatasync-4k --rw=write --bs=4k --size=128M --fdatasync=1 --ioengine=psync
run fdatasync-64k --rw=write --bs=64k --size=1G --fdatasync=1 --ioengine=psync
run fdatasync-1m --rw=write --bs=1M --size=2G --fdatasync=1 --ioengine=psync
run fdatasync-16k-3000-per-s --rw=write --bs=16k --size=1G --fdatasync=1 --ioengine=psync \
  --rate_iops=3000 --runtime=10 --time_based
# A busy loop at the lowest priority: it takes only CPU time nobody else wants.
nice -n 19 timeout 12 sh -c 'while :; do :; done' &
spinner=$!
run fdatasync-16k-3000-per-s-busy-cpu --rw=write --bs=16k --size=1G --fdatasync=1 \
  --ioengine=psync --rate_iops=3000 --runtime=10 --time_based
kill "$spinner" 2>/dev/null || true
wait "$spinner" 2>/dev/null || true

python3 - "$out" <<'EOF' | tee "$out/summary.md"
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
def job(name):
    return json.loads((out / f"{name}.json").read_text())["jobs"][0]
print("| measurement | MB/s | ops/s | sync p50 us | p99 us | p99.9 us | max us |")
print("|---|---|---|---|---|---|---|")
for name in ["direct-write-qd1", "direct-write-qd8", "buffered-write",
             "fdatasync-4k", "fdatasync-64k", "fdatasync-1m",
             "fdatasync-16k-3000-per-s", "fdatasync-16k-3000-per-s-busy-cpu"]:
    j = job(name)
    w = j["write"]
    mbs = w["bw_bytes"] / 1e6
    sync = j.get("sync", {}).get("lat_ns", {})
    pct = sync.get("percentile", {})
    us = lambda k: f"{pct[k] / 1000:.0f}" if k in pct else ""
    mx = f"{sync['max'] / 1000:.0f}" if sync.get("max") else ""
    print(f"| {name} | {mbs:.0f} | {w['iops']:.0f} | {us('50.000000')} | {us('99.000000')} | {us('99.900000')} | {mx} |")
EOF
