#!/usr/bin/env python3
"""Summarises bench/idle_consumers.sh: per build and load, the median over the rounds of
ProducerPerformance's figures alone and beside the idle consumers, and their ratio (idle /
alone: 1.00 means the idle consumers cost the producer nothing). The raw output is read from
the run's raw directory outside the repository (bench/bench_raw.py).

Usage: idle_consumers_summary.py OUT
"""
import re
import statistics
import sys
from pathlib import Path

from bench_raw import raw_dir

# ProducerPerformance's last line (see ab_produce_summary.py).
FINAL = re.compile(
    r"records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th"
)
FIELDS = ["records/s", "MB/s", "avg ms", "max ms", "p50 ms", "p95 ms", "p99 ms", "p99.9 ms"]


def main():
    out = Path(sys.argv[1])
    raw = Path(raw_dir(out))
    runs = {}  # (build, mode, load) -> [figures per round]
    for f in sorted(raw.glob("r*-*-*-*.txt")):
        m = re.fullmatch(r"r(\d+)-([AB])-(alone|idle)-(max|rate)\.txt", f.name)
        if not m:
            continue
        text = f.read_text(errors="replace")
        found = FINAL.findall(text)
        cpu = re.search(r"broker cpu s: ([\d.]+)", text)
        if not found or not cpu:
            print(f"no final line in {f.name}: left out", file=sys.stderr)
            continue
        figures = dict(zip(FIELDS, (float(x) for x in found[-1])))
        figures["broker CPU s"] = float(cpu[1])
        # MB/s * seconds = MB sent; CPU-seconds per GB of record values sent.
        # The final line's count (the progress lines before it count a window each).
        sent = re.findall(r"(\d+) records sent", text)
        gb = int(sent[-1]) * 1024 / 1e9 if sent else float("nan")
        figures["broker CPU s/GB"] = figures["broker CPU s"] / gb
        runs.setdefault((m[2], m[3], m[4]), []).append(figures)
    print((out / "config.txt").read_text().rstrip())
    print()
    for f in sorted(raw.glob("r*-idle-fetchers.txt")):
        print(f"fetchers {f.name}: {f.read_text(errors='replace').strip().splitlines()[-1]}")
    print()
    names = FIELDS + ["broker CPU s", "broker CPU s/GB"]
    for load in ("max", "rate"):
        for build in ("A", "B"):
            alone, idle = runs.get((build, "alone", load)), runs.get((build, "idle", load))
            if not alone or not idle:
                continue
            print(f"## {load}, build {build}: medians over {len(alone)} runs alone and {len(idle)} beside the idle consumers")
            print()
            print("| figure | alone | idle | idle/alone |")
            print("|---|---|---|---|")
            for name in names:
                a = statistics.median(r[name] for r in alone)
                b = statistics.median(r[name] for r in idle)
                ratio = b / a if a else float("nan")
                print(f"| {name} | {a:,.2f} | {b:,.2f} | {ratio:.3f} |")
            print()


if __name__ == "__main__":
    main()
