#!/usr/bin/env bash
# The storage benchmark of issue 2 (shared/BRIEF.md scenario S3), run side by side:
#   - dd's buffered write rate on the same disk, as the ceiling for appends;
#   - `laminar perf log` without flushing, with --flush-interval-ms 100, and without
#     preallocation, each REPEAT times, interleaved so that drift hits all alike;
#   - the same with and without flushing at a fixed rate below what the disk absorbs
#     (RATE records/s, default 1,000,000: about 1.03 GB/s of 1 KiB records).
# Raw JSON lines and a summary of medians and ratios go to OUT (default
# bench/results/<date>-<host>-log-perf); each run's append latency series (perf log
# --series-out) to RAW/series/VARIANT-rRUN.json, RAW being the run's raw directory outside the
# repository (bench_raw_dir OUT, bench/machine.sh: by default
# /var/tmp/laminar-bench-raw/<OUT's name>), and one chart per comparison (`laminar perf
# plot`, every run of both variants) to OUT/chart-*.svg:
#   chart-max-flush-*        no-flush vs flush-100ms, as fast as possible;
#   chart-rate-flush-*       rate-no-flush vs rate-flush-100ms, at RATE records/s;
#   chart-max-prealloc-*     no-flush vs no-prealloc, as fast as possible.
#
# Usage: bench/log_perf.sh [OUT]    (REPEAT=3 MESSAGES=2000000 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/machine.sh disable=SC1091
source bench/machine.sh
repeat=${REPEAT:-3}
rate=${RATE:-1000000}
messages=${MESSAGES:-2000000}
out=${1:-bench/results/$(date +%F)-$(hostname)-log-perf}
raw=$(bench_raw_dir "$out")
mkdir -p "$out" "$raw/series"
cargo build --release --quiet
bin=target/release/laminar
work=$(mktemp -d "$PWD/.bench-log-perf.XXXXXX")
trap 'rm -rf "$work"' EXIT

{
  machine_info "$work"
} > "$out/machine.txt"

common=(--partitions 4 --message-size 1024 --set-size 100 --messages "$messages" --readers 1 --json)
: > "$out/runs.jsonl"
for i in $(seq 1 "$repeat"); do
  sync
  dd_rate=$(dd if=/dev/zero of="$work/dd.test" bs=1M count=2048 2>&1 | awk '/copied/ {print $(NF-1), $NF}')
  rm -f "$work/dd.test"
  echo "{\"variant\":\"dd\",\"run\":$i,\"dd\":\"$dd_rate\"}" >> "$out/runs.jsonl"
  for variant in no-flush flush-100ms no-prealloc rate-no-flush rate-flush-100ms; do
    case $variant in
      no-flush) extra=() ;;
      flush-100ms) extra=(--flush-interval-ms 100) ;;
      no-prealloc) extra=(--preallocate-bytes 0) ;;
      rate-no-flush) extra=(--records-per-s "$rate") ;;
      rate-flush-100ms) extra=(--records-per-s "$rate" --flush-interval-ms 100) ;;
    esac
    sync
    result=$("$bin" perf log --dir "$work/logs" "${common[@]}" "${extra[@]}" \
      --series-out "$raw/series/$variant-r$i.json" --label "$variant r$i")
    echo "{\"variant\":\"$variant\",\"run\":$i,\"result\":$result}" >> "$out/runs.jsonl"
  done
done

# chart NAME TITLE VARIANT...: every run of the variants on one pair of charts.
chart() {
  local name=$1 title=$2 files=() variant
  shift 2
  for variant in "$@"; do
    for i in $(seq 1 "$repeat"); do files+=("$raw/series/$variant-r$i.json"); done
  done
  "$bin" perf plot --title "$title" --out "$out/chart-$name" "${files[@]}" > /dev/null
}
chart max-flush "perf log, as fast as possible: no flush vs flush every 100 ms" no-flush flush-100ms
chart rate-flush "perf log, $rate records/s: no flush vs flush every 100 ms" rate-no-flush rate-flush-100ms
chart max-prealloc "perf log, as fast as possible: 32 MiB preallocation vs none" no-flush no-prealloc

python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
runs = [json.loads(l) for l in open(f"{out}/runs.jsonl")]
def dd_mb_s(s):
    value, unit = s.split()
    return float(value) * {"GB/s": 1000, "MB/s": 1, "kB/s": 0.001}[unit]
dd = [dd_mb_s(r["dd"]) for r in runs if r["variant"] == "dd"]
by = {}
for r in runs:
    if r["variant"] != "dd":
        by.setdefault(r["variant"], []).append(r["result"])
med = statistics.median
lines = [f"# perf log benchmark ({out})", "", open(f"{out}/machine.txt").read(), "",
         f"Medians of {len(dd)} interleaved runs.", "",
         "| variant | append MB/s | append p50 us | p99 us | p99.9 us | max us | read MB/s | flushes | fsync p99 us |",
         "|---|---|---|---|---|---|---|---|---|"]
lines.append(f"| dd bs=1M count=2048 | {med(dd):.0f} | | | | | | | |")
for v, rs in by.items():
    a = lambda k: med([r["append"]["latency_us"][k] for r in rs])
    lines.append(f"| {v} | {med([r['append']['mb_per_s'] for r in rs]):.0f} | {a('p50'):.0f} | {a('p99'):.0f} | {a('p999'):.0f} | {a('max'):.0f} | "
                 f"{med([r['read']['mb_per_s'] for r in rs]):.0f} | {med([r['flush']['count'] for r in rs]):.0f} | {med([r['flush']['latency_us']['p99'] for r in rs]):.0f} |")
nf, fl = by["no-flush"], by["flush-100ms"]
ratio_rate = [r["append"]["mb_per_s"] / d for r, d in zip(nf, dd)]
ratio_p999 = [f["append"]["latency_us"]["p999"] / n["append"]["latency_us"]["p999"] for f, n in zip(fl, nf)]
np_ = by["no-prealloc"]
ratio_prealloc = [n["append"]["mb_per_s"] / p["append"]["mb_per_s"] for n, p in zip(nf, np_)]
lines += ["",
          f"- append rate / dd rate, per run: {', '.join(f'{x:.2f}' for x in ratio_rate)} (median {med(ratio_rate):.2f}; target >= 0.60)",
          f"- append p99.9 with --flush-interval-ms 100 / without, per run: {', '.join(f'{x:.2f}' for x in ratio_p999)} (median {med(ratio_p999):.2f}; target <= 1.5)",
          f"- append rate with 32 MiB preallocation / without, per run: {', '.join(f'{x:.2f}' for x in ratio_prealloc)} (median {med(ratio_prealloc):.2f})"]
if "rate-flush-100ms" in by:
    rn, rf = by["rate-no-flush"], by["rate-flush-100ms"]
    ratio_rate_p999 = [f["append"]["latency_us"]["p999"] / n["append"]["latency_us"]["p999"] for f, n in zip(rf, rn)]
    lines.append(f"- at a fixed {rn[0]['config']['records_per_s']} records/s, append p99.9 with --flush-interval-ms 100 / without, per run: "
                 f"{', '.join(f'{x:.2f}' for x in ratio_rate_p999)} (median {med(ratio_rate_p999):.2f})")
charts = sorted(glob.glob(f"{out}/chart-*.svg"))
if charts:
    lines += ["", "Append latency of every run (over time: max per 100 ms; by percentile):"]
    for c in charts:
        lines += ["", f"![{os.path.basename(c)[:-4]}]({os.path.basename(c)})"]
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
