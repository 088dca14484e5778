#!/usr/bin/env bash
# Write-path options at line rate, measured outside the broker (bench/write_path_options.py):
# buffered appends into files preallocated whole or in 32 MiB steps, and O_DIRECT appends of
# aligned blocks, each without and with a flusher that fdatasyncs every file every 100 ms.
# It answers: which of them keeps an append's latency (counted from when it was due) flat
# while flushes run at MB_PER_S?
# Usage: bench/write_path_options.sh [OUT] (default bench/results/<date>-<host>-write-path-options)
# Environment: ROUNDS (3), SECONDS_PER_RUN (8), MB_PER_S (330), PARTITIONS (4).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/machine.sh disable=SC1091
source bench/machine.sh
out=${1:-bench/results/$(date +%F)-$(hostname)-write-path-options}
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-8}
MB_PER_S=${MB_PER_S:-330}
PARTITIONS=${PARTITIONS:-4}
SET_BYTES=103400 # 100 records of 1 KiB with their batch overhead, as `perf log --set-size 100`
mkdir -p "$out"
work=$(mktemp -d "$PWD/.bench-write-path.XXXXXX")
trap 'rm -rf "$work"' EXIT
machine_info "$work" > "$out/machine.txt"
python3 --version >> "$out/machine.txt"

# mode step_mib flush_ms
configs=("buffered 0 0" "buffered 0 100" "buffered 32 0" "buffered 32 100" "direct 0 0" "direct 0 100")
: > "$out/runs.jsonl"
for round in $(seq 1 "$ROUNDS"); do
  order=("${configs[@]}")
  if ((round % 2 == 0)); then # alternate the order
    order=()
    for ((i = ${#configs[@]} - 1; i >= 0; i--)); do order+=("${configs[i]}"); done
  fi
  for c in "${order[@]}"; do
    read -r mode step flush <<< "$c"
    echo "$(date +%T) round $round: $mode step=$step flush=$flush"
    python3 bench/write_path_options.py "$work" "$mode" "$flush" "$SECONDS_PER_RUN" "$MB_PER_S" \
      "$PARTITIONS" "$SET_BYTES" "$step" |
      python3 -c "import json,sys; j=json.load(sys.stdin); j['round']=$round; print(json.dumps(j))" \
        >> "$out/runs.jsonl"
    rm -f "$work"/*.log
  done
done

python3 - "$out" <<'EOF' | tee "$out/summary.md"
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
runs = [json.loads(l) for l in (out / "runs.jsonl").read_text().splitlines()]
print("| round | mode | preallocation | flush | MB/s | append p50 us | p99 | p99.9 | max | fsync p50 ms | p99.9 ratio flush/none |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
def prealloc(r):
    return "whole file" if r["prealloc_step_mib"] == 0 else f"{r['prealloc_step_mib']} MiB steps"
for r in sorted(runs, key=lambda r: (r["round"], r["mode"], r["prealloc_step_mib"], r["flush_ms"])):
    a = r["append_us"]
    ratio = ""
    if r["flush_ms"]:
        base = [b for b in runs if b["round"] == r["round"] and b["mode"] == r["mode"]
                and b["prealloc_step_mib"] == r["prealloc_step_mib"] and b["flush_ms"] == 0]
        if base:
            ratio = f"{a['p99.9'] / base[0]['append_us']['p99.9']:.2f}"
    flush = f"{r['flush_ms']} ms" if r["flush_ms"] else "off"
    fs = f"{r['fsync_us']['p50'] / 1000:.1f}" if r["fsyncs"] else ""
    print(f"| {r['round']} | {r['mode']} | {prealloc(r)} | {flush} | {r['achieved_mb_per_s']} | "
          f"{a['p50']:.0f} | {a['p99']:.0f} | {a['p99.9']:.0f} | {a['max']:.0f} | {fs} | {ratio} |")
EOF
