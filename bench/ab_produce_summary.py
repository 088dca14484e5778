#!/usr/bin/env python3
"""Summarises bench/ab_produce.sh: per load, each build's median over the rounds of
ProducerPerformance's records/s and latency percentiles, the B/A ratio of the medians, and
the per-round B/A ratios of records/s (each round's two runs ran back to back). The raw output
is read from the run's raw directory outside the repository (bench/bench_raw.py).

Usage: ab_produce_summary.py OUT
"""
import re
import statistics
import sys
from pathlib import Path

from bench_raw import raw_dir

# ProducerPerformance's last line, e.g. "1000000 records sent, 159974.4 records/sec (156.22
# MB/sec), 179.10 ms avg latency, 425.00 ms max latency, 170 ms 50th, 294 ms 95th, 405 ms
# 99th, 423 ms 99.9th."
FINAL = re.compile(
    r"records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th"
)
FIELDS = ["records/s", "MB/s", "avg ms", "max ms", "p50 ms", "p95 ms", "p99 ms", "p99.9 ms",
          "broker CPU s", "broker CPU s per GB produced"]
SENT = re.compile(r"(\d+) records sent, [\d.]+ records/sec \(")
RECORD_BYTES = 1024


def main():
    out = Path(sys.argv[1])
    runs = {}  # (load, build) -> {round: [figures]}
    for f in sorted(Path(raw_dir(out)).glob("r*-*-*.txt")):
        m = re.fullmatch(r"r(\d+)-([AB])-(p\d+-acks\w+)\.txt", f.name)
        if not m:
            continue
        found = FINAL.findall(f.read_text(errors="replace"))
        if not found:
            print(f"no final line in {f.name}: left out", file=sys.stderr)
            continue
        text = f.read_text(errors="replace")
        figures = [float(x) for x in found[-1]]
        cpu = re.search(r"broker cpu s: ([\d.]+)", text)
        figures.append(float(cpu[1]) if cpu else float("nan"))
        sent = int(SENT.findall(text)[-1])
        figures.append(figures[-1] / (sent * RECORD_BYTES / 1e9))
        runs.setdefault((m[3], m[2]), {})[int(m[1])] = figures
    print((out / "config.txt").read_text().rstrip())
    print()
    for load in sorted({load for load, _ in runs}):
        a, b = runs.get((load, "A"), {}), runs.get((load, "B"), {})
        if not a or not b:
            continue
        print(f"## {load}: medians over {len(a)} (A) and {len(b)} (B) runs")
        print()
        print("| figure | A | B | B/A |")
        print("|---|---|---|---|")
        for i, name in enumerate(FIELDS):
            ma = statistics.median(r[i] for r in a.values())
            mb = statistics.median(r[i] for r in b.values())
            print(f"| {name} | {ma:,.1f} | {mb:,.1f} | {mb / ma:.3f} |")
        rounds = sorted(set(a) & set(b))
        ratios = [b[r][0] / a[r][0] for r in rounds]
        cpu_ratios = [b[r][-1] / a[r][-1] for r in rounds]
        print()
        print("broker CPU per GB B/A per round: " + ", ".join(f"{x:.2f}" for x in cpu_ratios))
        print("records/s B/A per round: " + ", ".join(f"{x:.2f}" for x in ratios))
        print(
            f"median {statistics.median(ratios):.3f}, geometric mean "
            f"{statistics.geometric_mean(ratios):.3f}, B above A in {sum(x > 1 for x in ratios)} of {len(ratios)}"
        )
        print()


if __name__ == "__main__":
    main()
