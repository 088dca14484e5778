#!/usr/bin/env bash
# `laminar perf log` of two builds side by side: A (the build before a change) and B (after),
# in alternating order each round (A first in odd rounds, B first in even ones), each without
# flushing and with --flush-interval-ms 100, `sync; sleep 1` between runs. One JSON line per
# run goes to OUT/runs.jsonl ({"build": "A"|"B", "variant", "round", "run": perf log's JSON});
# bench/ab_log_perf_summary.py prints the medians and the B/A ratios into OUT/summary.txt.
#
# Usage: BIN_A=path BIN_B=path bench/ab_log_perf.sh OUT
# Env:   ROUNDS (2), MESSAGES (2000000), WORK (a directory on the disk to measure; default a
#        fresh one under the current directory), A_LABEL, B_LABEL (written to OUT/config.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/machine.sh disable=SC1091
source bench/machine.sh
out=${1:?usage: BIN_A=... BIN_B=... bench/ab_log_perf.sh OUT}
: "${BIN_A:?}" "${BIN_B:?}"
rounds=${ROUNDS:-2}
messages=${MESSAGES:-2000000}
work=${WORK:-$(mktemp -d "$PWD/.bench-ab-log-perf.XXXXXX")}
mkdir -p "$out" "$work"
trap 'rm -rf "$work"/laminar-perf-log-* ; [[ -n ${WORK:-} ]] || rm -rf "$work"' EXIT
if [[ -s $out/runs.jsonl ]]; then
  echo "$out/runs.jsonl already holds results; give another OUT" >&2
  exit 1
fi

{
  machine_info "$work"
  echo "A: $BIN_A ($("$BIN_A" --version)) ${A_LABEL:-}"
  echo "B: $BIN_B ($("$BIN_B" --version)) ${B_LABEL:-}"
  echo "rounds: $rounds, messages: $messages"
  echo "command: laminar perf log --dir WORK/... --partitions 4 --message-size 1024 --set-size 100 --messages $messages --readers 1 --json [--flush-interval-ms 100]"
} > "$out/config.txt"
cat "$out/config.txt"

common=(--partitions 4 --message-size 1024 --set-size 100 --messages "$messages" --readers 1 --json)
for round in $(seq 1 "$rounds"); do
  if ((round % 2)); then order="A B"; else order="B A"; fi
  for variant in noflush flush100; do
    extra=()
    [[ $variant == flush100 ]] && extra=(--flush-interval-ms 100)
    for build in $order; do
      if [[ $build == A ]]; then bin=$BIN_A; else bin=$BIN_B; fi
      sync
      sleep 1
      result=$("$bin" perf log --dir "$work/laminar-perf-log-$build-$round-$variant" "${common[@]}" "${extra[@]}")
      printf '{"build":"%s","variant":"%s","round":%d,"run":%s}\n' "$build" "$variant" "$round" "$result" >> "$out/runs.jsonl"
      echo "round $round $variant $build: $(python3 -c 'import json,sys; a=json.loads(sys.argv[1])["append"]; print(round(a["mb_per_s"]), "MB/s, p99.9", a["latency_us"]["p999"], "us")' "$result")"
    done
  done
done
python3 bench/ab_log_perf_summary.py "$out/runs.jsonl" | tee "$out/summary.txt"
