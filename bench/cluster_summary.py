#!/usr/bin/env python3
"""Summary of bench/cluster.sh: OUT/summary.md from the raw files (the run's raw directory
outside the repository, bench/bench_raw.py), and charts with `laminar perf plot`.

Usage: cluster_summary.py produce|s1f OUT   (env LAMINAR: the laminar binary for the charts)
"""
import glob
import json
import os
import re
import subprocess
import sys

from bench_raw import raw_dir

PRODUCER = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, ([\d.]+) ms 50th, ([\d.]+) ms 95th, ([\d.]+) ms 99th, "
    r"([\d.]+) ms 99.9th")
# Its steady-state line: count, max, p50, p99, p99.9.
STEADY = re.compile(
    r"(\d+) steady state records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
    r"([\d.]+) ms max latency, ([\d.]+) ms 50th, [\d.]+ ms 95th, ([\d.]+) ms 99th, ([\d.]+) ms 99.9th")
NAMES = {"laminar": "Laminar", "kafka": "Kafka"}


def text(path):
    try:
        return open(path).read()
    except OSError:
        return ""


def producer(path):
    # The last line with percentiles is ProducerPerformance's summary.
    ms = PRODUCER.findall(text(path))
    if not ms:
        return None
    keys = ["records", "records_s", "mb_s", "avg", "max", "p50", "p95", "p99", "p999"]
    return dict(zip(keys, map(float, ms[-1])))


def perf_latency(path):
    # `laminar-load latency --json`: one JSON object on one line, latencies in us.
    for line in text(path).splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            lat = r["latency_us"]
            return {"delivered": r["delivered"], "sent": r["sent"], "failed": r["failed"],
                    "records_s": r["records_per_s"], "mb_s": r["mb_per_s"],
                    "p50": lat["p50"] / 1000, "p99": lat["p99"] / 1000,
                    "p999": lat["p999"] / 1000, "max": lat["max"] / 1000}
    return None


def steady_state(path):
    # ProducerPerformance with --warmup-records: its steady-state line (whole milliseconds).
    m = STEADY.findall(text(path))
    if not m:
        return None
    n, mx, p50, p99, p999 = int(m[-1][0]), *map(float, m[-1][1:])
    return {"delivered": n, "sent": n, "failed": 0, "p50": p50, "p99": p99, "p999": p999,
            "max": mx}


def rounds_of(out):
    # order.txt: "round R: laminar kafka"
    rounds = []
    for line in text(f"{out}/order.txt").splitlines():
        m = re.match(r"round (\d+): (.*)", line)
        if m:
            rounds.append((int(m.group(1)), m.group(2).split()))
    return rounds


def fmt(x, digits=1):
    return "–" if x is None else f"{x:.{digits}f}"


def ratio(a, b):
    return "–" if a is None or b is None or b == 0 else f"{a / b:.2f}"


def plot(out, name, title, files):
    laminar = os.environ.get("LAMINAR")
    files = [f for f in files if os.path.exists(f)]
    if not laminar or not files:
        return []
    subprocess.run([laminar, "perf", "plot", "--title", title, "--out", f"{out}/{name}", *files],
                   check=False, stdout=subprocess.DEVNULL)
    return sorted(glob.glob(f"{out}/{name}-*.svg"))


def produce(out, rounds):
    raw = raw_dir(out)
    lines = ["## Producing at acks=all, replication factor 3", "",
             "Each cell: Laminar / Kafka in the same round (a ratio > 1 means Laminar is higher).", ""]
    loads = [("pp-p1", "ProducerPerformance, 1 partition", producer),
             ("pp-p6", "ProducerPerformance, 6 partitions", producer),
             ("max-p1", f"librdkafka as fast as it goes, 1 partition", perf_latency),
             ("latency-p1", f"librdkafka at a fixed rate, 1 partition", perf_latency)]
    for load, title, parse in loads:
        lines += [f"### {title} (`{load}`)", "",
                  "| round | broker | records/s | MB/s | p50 ms | p99 ms | p99.9 ms | max ms |",
                  "|---|---|---|---|---|---|---|---|"]
        notes = []
        for r, order in rounds:
            got = {}
            for b in order:
                x = parse(f"{raw}/r{r}-{b}-{load}.txt")
                got[b] = x
                if x is None:
                    lines.append(f"| {r} | {NAMES.get(b, b)} | no summary (see raw) | | | | | |")
                    continue
                lines.append(f"| {r} | {NAMES.get(b, b)} | {x['records_s']:.0f} | {x['mb_s']:.1f} | "
                             f"{fmt(x['p50'])} | {fmt(x['p99'])} | {fmt(x['p999'])} | {fmt(x['max'])} |")
            lam, kaf = got.get("laminar"), got.get("kafka")
            if lam and kaf:
                notes.append(f"- round {r}: Laminar/Kafka records/s {ratio(lam['records_s'], kaf['records_s'])}, "
                             f"p50 {ratio(lam['p50'], kaf['p50'])}, p99 {ratio(lam['p99'], kaf['p99'])}, "
                             f"p99.9 {ratio(lam['p999'], kaf['p999'])}")
        lines += [""] + notes + [""]
    charts = plot(out, "chart-latency-p1", "acks=all, RF 3, librdkafka at a fixed rate",
                  sorted(glob.glob(f"{raw}/series/*-latency-p1.json")))
    for c in charts:
        lines += [f"![{os.path.basename(c)[:-4]}]({os.path.basename(c)})", ""]
    return lines


def s1f(out, rounds):
    raw = raw_dir(out)
    lines = ["## S1 with a follower as the cold reader", "",
             "Produce latency to the `hot` topics (librdkafka, or Kafka's ProducerPerformance: "
             "see the configuration) with `big`'s follower down (alone) "
             "and while it catches up from the leader's cold, throttled disk (catch-up).", "",
             "| round | broker | phase | acks | delivered | p50 ms | p99 ms | p99.9 ms | max ms |",
             "|---|---|---|---|---|---|---|---|---|"]
    notes, caught = [], []
    for r, order in rounds:
        got = {}
        for b in order:
            for phase in ("alone", "catch-up"):
                for acks in ("1", "all"):
                    path = f"{raw}/r{r}-{b}-{phase}-acks{acks}.txt"
                    x = perf_latency(path) or steady_state(path)
                    got[(b, phase, acks)] = x
                    if x is None:
                        lines.append(f"| {r} | {NAMES.get(b, b)} | {phase} | {acks} | no summary | | | | |")
                        continue
                    lines.append(f"| {r} | {NAMES.get(b, b)} | {phase} | {acks} | "
                                 f"{x['delivered']}/{x['sent']} | {fmt(x['p50'])} | {fmt(x['p99'])} | "
                                 f"{fmt(x['p999'])} | {fmt(x['max'])} |")
            roles = text(f"{raw}/r{r}-{b}-roles.txt").strip().replace("\n", "; ")
            caught.append(f"- round {r}, {NAMES.get(b, b)}: {roles}")
        for acks in ("1", "all"):
            for b in order:
                a, c = got.get((b, "alone", acks)), got.get((b, "catch-up", acks))
                if a and c:
                    notes.append(f"- round {r}, {NAMES.get(b, b)}, acks={acks}: p99 catch-up/alone "
                                 f"{ratio(c['p99'], a['p99'])}, p99.9 {ratio(c['p999'], a['p999'])}")
            lam, kaf = got.get(("laminar", "catch-up", acks)), got.get(("kafka", "catch-up", acks))
            if lam and kaf:
                notes.append(f"- round {r}, acks={acks}, during the catch-up: Kafka/Laminar p99 "
                             f"{ratio(kaf['p99'], lam['p99'])}, p99.9 {ratio(kaf['p999'], lam['p999'])}, "
                             f"max {ratio(kaf['max'], lam['max'])}")
    lines += [""] + notes + ["", "The follower's progress:", ""] + caught + [""]
    for acks in ("1", "all"):
        charts = plot(out, f"chart-acks{acks}", f"S1 with a follower, acks={acks}",
                      sorted(glob.glob(f"{raw}/series/*-acks{acks}.json")))
        for c in charts:
            lines += [f"![{os.path.basename(c)[:-4]}]({os.path.basename(c)})", ""]
    return lines


def main():
    part, out = sys.argv[1], sys.argv[2]
    rounds = rounds_of(out)
    lines = [f"# Three-broker clusters: {part} ({out})", "", "```", text(f"{out}/config.txt").strip(),
             "```", "", "Order: " + "; ".join(f"round {r}: {' then '.join(o)}" for r, o in rounds), ""]
    lines += produce(out, rounds) if part == "produce" else s1f(out, rounds)
    open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
