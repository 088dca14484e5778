#!/usr/bin/env python3
"""Medians of `perf log` runs of build A (before) and build B (after) from bench/ab_log_perf.sh's
runs.jsonl, and the B/A ratios: MB/s (above 1: B faster), append p50/p99/p99.9 (below 1: B
lower). Usage: bench/ab_log_perf_summary.py RUNS.jsonl"""
import json
import statistics as st
import sys

rows = [json.loads(line) for line in open(sys.argv[1])]
for v in sorted({r["variant"] for r in rows}, key=lambda v: (v != "noflush", v)):
    med = {}
    for b in ["A", "B"]:
        rs = [r["run"]["append"] for r in rows if r["variant"] == v and r["build"] == b]
        if not rs:
            continue
        fig = {
            "MB/s": [x["mb_per_s"] for x in rs],
            "p50 us": [x["latency_us"]["p50"] for x in rs],
            "p99 us": [x["latency_us"]["p99"] for x in rs],
            "p99.9 us": [x["latency_us"]["p999"] for x in rs],
            "max us": [x["latency_us"]["max"] for x in rs],
        }
        med[b] = {k: st.median(xs) for k, xs in fig.items()}
        print(f"{v:9} {b}: " + ", ".join(f"{k} {[round(x) for x in xs]}" for k, xs in fig.items()))
    if "A" in med and "B" in med:
        print(f"{v:9} medians A -> B (B/A): " + ", ".join(
            f"{k} {med['A'][k]:.0f} -> {med['B'][k]:.0f} ({med['B'][k] / med['A'][k]:.3f})"
            for k in med["A"]))
