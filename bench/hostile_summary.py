#!/usr/bin/env python3
"""Summarizes a bench/hostile.sh run: one table per broker and round (the well-behaved
producer's latency per phase, its p99 over the baselines around it, every occurrence of
each attack pooled, the broker's peak RSS,
whether it still answered) and what the hostile clients saw.

    bench/hostile_summary.py OUT_DIR > OUT_DIR/summary.md
"""
import glob
import json
import os
import sys


def ms(us):
    return f"{us / 1000:.2f}"


def main(out):
    for path in sorted(glob.glob(os.path.join(out, "*.json"))):
        name = os.path.basename(path)[: -len(".json")]
        r = json.load(open(path))
        print(f"## {name}\n")
        print("| phase | delivered | failed | p50 ms | p99 ms | p99.9 ms | max ms | p99 / baseline | RSS max MiB | answers after |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for p in r["phases"]:
            u = p["produce_us"]
            rss = p["broker_rss_max_mib"]
            print(
                f"| {p['phase']} | {p['delivered']} | {p['failed']} | {ms(u['p50'])} | {ms(u['p99'])} | "
                f"{ms(u['p999'])} | {ms(u['max'])} | {p['p99_vs_baseline']:.2f} | "
                f"{'-' if rss is None else f'{rss:.0f}'} | {'yes' if p['broker_answers_after'] else '**no**'} |"
            )
        print()
        print("p99 / baseline: over the baselines right before and after the phase, merged (a baseline: over the first one).\n")
        if r.get("pooled"):
            print("| pooled | times | p99 ms | p99.9 ms | baselines around: p99 ms | p99.9 ms | p99 / baseline | RSS max MiB |")
            print("|---|---|---|---|---|---|---|---|")
            for p in r["pooled"]:
                u, b, rss = p["produce_us"], p["baseline_us"], p["broker_rss_max_mib"]
                print(
                    f"| {p['phase']} | {p['occurrences']} | {ms(u['p99'])} | {ms(u['p999'])} | {ms(b['p99'])} | "
                    f"{ms(b['p999'])} | **{p['p99_vs_baseline']:.2f}** | {'-' if rss is None else f'{rss:.0f}'} |"
                )
            print()
        for p in r["phases"]:
            if p["outcomes"]:
                seen = "; ".join(f"{k}: {v}" for k, v in p["outcomes"].items())
                print(f"- {p['phase']}: {seen}")
        reasons = os.path.join(out, f"{name}.close-reasons.txt")
        if os.path.exists(reasons) and os.path.getsize(reasons) > 0:
            print(f"\nThe broker's reasons for closing connections (`{name}.close-reasons.txt`):\n")
            print("```")
            print(open(reasons).read().rstrip())
            print("```")
        print()


if __name__ == "__main__":
    main(sys.argv[1])
