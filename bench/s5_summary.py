#!/usr/bin/env python3
"""Summarises a bench/s5.sh run: reads OUT/config.txt, OUT/order.txt and the tools' raw output
in RAW (the run's raw directory outside the repository, bench/bench_raw.py), writes
OUT/summary.md and prints it.  Standard library only.

It also draws charts with `laminar perf plot` (the binary in $LAMINAR, default
target/release/laminar of this repository), linked from summary.md: per ProducerPerformance
load, the percentiles it prints (p50, p95, p99, p99.9, max), which it first saves as series in
RAW/series/r<round>-<broker>-produce-p<P>-acks<A>.json; per acks, the `laminar-load latency`
series that s5.sh saved in RAW/series/. Every chart has both brokers and every round. Without
the binary the summary is written without charts.

Usage: [LAMINAR=path/to/laminar] bench/s5_summary.py OUT
"""
import json
import os
import re
import subprocess
import sys

from bench_raw import raw_dir

OUT = sys.argv[1]
RAW = raw_dir(OUT)
SERIES = os.path.join(RAW, "series")
NAMES = {"laminar": "Laminar", "kafka": "Kafka", "base": "Laminar base"}
# Ratios printed under each round: (numerator, denominator, label); a pair prints when both ran.
PAIRS = [("laminar", "kafka", "Laminar/Kafka"), ("laminar", "base", "Laminar/base")]
LAMINAR = os.environ.get("LAMINAR") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "target", "release", "laminar")


def raw(tag, load):
    """The text of RAW/<tag>-<load>.txt, or None."""
    path = os.path.join(RAW, f"{tag}-{load}.txt")
    if not os.path.exists(path):
        return None
    with open(path, errors="replace") as f:
        return f.read()


def exit_code(text):
    m = re.search(r"^\[exit (\d+)\]$", text or "", re.M)
    return int(m.group(1)) if m else None


# --- parsers: each returns a dict of figures, or None when the tool printed no summary ---

PRODUCER = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, ([\d.]+) ms 50th, ([\d.]+) ms 95th, ([\d.]+) ms 99th, "
    r"([\d.]+) ms 99.9th")


def producer(text):
    # The progress lines have no percentiles; the last line that has them is the summary
    # (with --warmup-records the steady-state summary comes after the whole-run one).
    ms = PRODUCER.findall(text or "")
    if not ms:
        return None
    keys = ["records", "records_s", "mb_s", "avg", "max", "p50", "p95", "p99", "p999"]
    return dict(zip(keys, map(float, ms[-1])))


def consumer(text):
    # A header line "start.time, end.time, data.consumed.in.MB, ..." then one line of values.
    lines = (text or "").splitlines()
    for i, line in enumerate(lines):
        if line.startswith("start.time,"):
            names = [x.strip() for x in line.split(",")]
            for values in lines[i + 1:]:
                vals = [x.strip() for x in values.split(",")]
                if len(vals) == len(names):
                    d = dict(zip(names, vals))
                    return {k: float(d[k]) for k in names[2:]}
    return None


def e2e(text):
    # "Avg latency: 4.2216 ms" and "Percentiles: 50th = 3, 99th = 12, 99.9th = 78" (ms).
    a = re.search(r"Avg latency: ([\d.]+) ms", text or "")
    p = re.search(r"Percentiles: 50th = ([\d.]+), 99th = ([\d.]+), 99.9th = ([\d.]+)", text or "")
    if not (a and p):
        return None
    return {"avg": float(a.group(1)), "p50": float(p.group(1)), "p99": float(p.group(2)),
            "p999": float(p.group(3))}


def perf_latency(text):
    # `laminar-load latency --json` prints one JSON object on one line; latencies in us.
    for line in (text or "").splitlines():
        if line.startswith("{"):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            l = r["latency_us"]
            return {"delivered": r["delivered"], "sent": r["sent"], "failed": r["failed"],
                    "records_s": r["records_per_s"], "mb_s": r["mb_per_s"],
                    "p50": l["p50"] / 1000, "p99": l["p99"] / 1000, "p999": l["p999"] / 1000,
                    "max": l["max"] / 1000}
    return None


def rss(tag):
    path = os.path.join(RAW, f"{tag}-rss.txt")
    if not os.path.exists(path):
        return None
    d = {}
    for line in open(path):
        k, _, v = line.rpartition(":")
        if v.strip().isdigit():
            d[k.strip()] = int(v)
    return d


def config_dump(text, kind):
    """The "<kind> values:" dump the Java client logs: {name: value}."""
    d, inside = {}, False
    for line in (text or "").splitlines():
        if f"{kind} values:" in line:
            inside = True
            continue
        if inside:
            m = re.match(r"^\t(\S+) = (.*)$", line)
            if not m:
                break
            d[m.group(1)] = m.group(2)
    return d


# --- formatting ---

def num(x, digits=None):
    if x is None:
        return "–"
    if digits is None:
        digits = 0 if abs(x) >= 100 else (1 if abs(x) >= 10 else 2)
    return f"{x:,.{digits}f}"


def ratio(a, b):
    if a is None or b is None:
        return "–"
    if b == 0:
        return "n/a" if a == 0 else "∞"
    r = a / b
    # Two decimals, but enough digits that a small ratio does not print as 0.00.
    return f"{r:.0f}" if r >= 100 else f"{r:.2f}" if r >= 0.1 else f"{r:.2g}"


# --- the run ---

rounds = []  # [(round, [broker, ...])]
for line in open(os.path.join(OUT, "order.txt")):
    m = re.match(r"round (\d+): (.*)", line.strip())
    if m:
        rounds.append((int(m.group(1)), m.group(2).split()))
config_lines = open(os.path.join(OUT, "config.txt")).read().rstrip("\n").splitlines()
config = dict(l.split(": ", 1) for l in config_lines if ": " in l)
all_brokers = sorted({b for _, bs in rounds for b in bs}, key=lambda b: list(NAMES).index(b))

out = [f"# Scenario S5: Laminar and Apache Kafka with Kafka's own perf tools ({OUT})", ""]
out += ["## Machine and versions", "", "```"] + config_lines + ["```", ""]

# What the clients actually ran with, from their own config dumps.
first = rounds[0][1][0] if rounds else None
tag0 = f"r{rounds[0][0]}-{first}" if first else ""
pconf = config_dump(raw(tag0, "produce-p1-acksall"), "ProducerConfig")
pconf1 = raw(tag0, "produce-p1-acks1") or ""
cconf = config_dump(raw(tag0, "consume-p1"), "ConsumerConfig")
keys_p = ["linger.ms", "batch.size", "max.in.flight.requests.per.connection",
          "enable.idempotence", "compression.type", "buffer.memory", "max.request.size"]
keys_c = ["group.protocol", "partition.assignment.strategy", "fetch.min.bytes",
          "fetch.max.bytes", "max.partition.fetch.bytes", "fetch.max.wait.ms", "max.poll.records",
          "receive.buffer.bytes"]
N = config.get("N", "?")
out += [
    "## Configuration", "",
    f"- Rounds: {len(rounds)}, in alternating order: "
    + "; ".join(f"round {r}: {', '.join(NAMES[b] for b in bs)}" for r, bs in rounds)
    + ". Each broker in each round: a fresh data directory and a fresh process.",
    "- Laminar: `laminar serve --metrics-listen none --config laminar.toml` with "
    f"`num.network.threads` = {config.get('network threads')}, `num.io.threads` = "
    f"{config.get('io threads')} (its cold-read I/O pool), `group.initial.rebalance.delay.ms` = "
    f"{config.get('group.initial.rebalance.delay.ms')}; defaults otherwise (no background flush; "
    "acks=all is answered after the fsync that covers it, acks=1 after the write).",
    "- Kafka: `bench/kafka/run-kafka.sh` (KRaft, broker+controller in one JVM, -Xmx1g, G1) with "
    f"`num.network.threads` = {config.get('network threads')}, `num.io.threads` = "
    f"{config.get('io threads')} (request handler threads), `group.initial.rebalance.delay.ms` = "
    f"{config.get('group.initial.rebalance.delay.ms')}; default flush settings, i.e. no fsync "
    "except at segment roll and shutdown, so on one node acks=all is answered after the write "
    "to the page cache, as acks=1 is.",
    f"- ProducerPerformance: {N} records of {config.get('record bytes', '').split()[0]} B, "
    "`--throughput -1`, `--command-property acks=1|all`, to four fresh topics (1 and 8 "
    "partitions × acks=1 and all). Java client defaults otherwise, as the client logged them: "
    + (", ".join(f"`{k}` = {pconf[k]}" for k in keys_p if k in pconf) or "(no config dump found)")
    + (" (acks=1: the client disables idempotence, and says so)"
       if "Idempotence will be disabled" in pconf1 else "") + ".",
    f"- ConsumerPerformance: the {N} records of the 1-partition acks=1 topic, in a fresh group; "
    "consumer defaults: "
    + (", ".join(f"`{k}` = {cconf[k]}" for k in keys_c if k in cconf) or "(no config dump found)")
    + ".",
    f"- EndToEndLatency: {config.get('e2e records')} records of 512 B, one at a time (send, "
    "then poll until the consumer has it), acks=all and acks=1, fresh 1-partition topics. It "
    "prints whole milliseconds for the percentiles and no max.",
    f"- `laminar-load latency` (librdkafka {config.get('librdkafka (laminar-load latency)', '')}, "
    f"linger.ms=0): {config.get('perf latency')}, 512 B, acks=all and acks=1, fresh "
    "1-partition topics; latency from the send call to the delivery report (produce latency, "
    "not end to end).",
    "- Ratios are Laminar / Kafka in the same round: above 1 is more throughput or more "
    "latency for Laminar.",
    "- Charts (`laminar perf plot`, latency on a log scale, both brokers and every round): "
    "ProducerPerformance's five printed percentiles (p50, p95, p99, p99.9, max) per load; "
    "`laminar-load latency`'s whole distribution, and its max per 100 ms over time, per acks.",
    "",
]


def table(title, note, load, parse, cols):
    """cols: [(header, key, digits)]; one row per broker per round, then Laminar/Kafka."""
    lines = [f"### {title}", ""]
    if note:
        lines += [note, ""]
    lines += ["| round | broker | " + " | ".join(h for h, _, _ in cols) + " |",
              "|---|---|" + "---|" * len(cols)]
    for r, bs in rounds:
        figs = {}
        for b in bs:
            text = raw(f"r{r}-{b}", load)
            figs[b] = parse(text)
            if figs[b] is None:
                why = "not run" if text is None else f"no result (exit {exit_code(text)}), see r{r}-{b}-{load}.txt in the raw directory"
                lines.append(f"| {r} | {NAMES[b]} | {why} |" + " |" * (len(cols) - 1))
            else:
                lines.append(f"| {r} | {NAMES[b]} | "
                             + " | ".join(num(figs[b].get(k), d) for _, k, d in cols) + " |")
        for a, b, label in PAIRS:
            if figs.get(a) and figs.get(b):
                lines.append(f"| {r} | **{label}** | "
                             + " | ".join(ratio(figs[a].get(k), figs[b].get(k)) for _, k, _ in cols) + " |")
    return lines + [""]


# --- charts ---

def readable_series(path):
    """Whether `laminar perf plot` can read it: a run that failed half-way leaves it empty."""
    try:
        with open(path) as f:
            json.load(f)
        return True
    except (OSError, ValueError):
        return False


def producer_series(r, b, load):
    """ProducerPerformance's printed percentiles as a series file (no time series): its path."""
    figs = producer(raw(f"r{r}-{b}", load))
    if figs is None:
        return None
    os.makedirs(SERIES, exist_ok=True)
    path = os.path.join(SERIES, f"r{r}-{b}-{load}.json")
    series = {
        "label": f"{NAMES[b]} r{r}",
        "over_time": [],
        "percentiles": [[50.0, figs["p50"]], [95.0, figs["p95"]], [99.0, figs["p99"]],
                        [99.9, figs["p999"]], [100.0, figs["max"]]],
        "unit_note": f"ProducerPerformance (Java client): {N} records of "
                     f"{config.get('record bytes', '').split(' ')[0]} B, --throughput -1; send to "
                     "completion callback, only the percentiles it prints (p50, p95, p99, p99.9, max)",
    }
    with open(path, "w") as f:
        json.dump(series, f)
        f.write("\n")
    return path


def draw(name, title, files):
    """`laminar perf plot` of the readable files into OUT/chart-NAME-*.svg: the charts' paths
    relative to OUT (none if there is nothing to draw or no binary)."""
    files = [f for f in files if f and readable_series(f)]
    if not files:
        return []
    try:
        done = subprocess.run([LAMINAR, "perf", "plot", "--title", title,
                               "--out", os.path.join(OUT, f"chart-{name}"), *files],
                              capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"warning: no chart {name}: {getattr(e, 'stderr', None) or e}", file=sys.stderr)
        return []
    return [os.path.relpath(p, OUT) for p in done.stdout.splitlines() if p.strip()]


def images(paths):
    return [line for p in paths for line in (f"![{os.path.basename(p)[:-4]}]({p})", "")]


# Broker first, then round: each broker's rounds next to each other in the legends.
runs_by_broker = [(r, b) for b in all_brokers for r, bs in rounds if b in bs]
charts = {}
for p in (1, 8):
    for acks in ("1", "all"):
        load = f"produce-p{p}-acks{acks}"
        charts[load] = draw(
            load, f"S5 ProducerPerformance, {p} partition{'s' if p > 1 else ''}, acks={acks}",
            [producer_series(r, b, load) for r, b in runs_by_broker])
for acks in ("all", "1"):
    load = f"latency-acks{acks}"
    charts[load] = draw(
        load, f"S5 laminar-load latency, acks={acks}",
        [os.path.join(SERIES, f"r{r}-{b}-{load}.json") for r, b in runs_by_broker])

PCOLS = [("records/s", "records_s", 0), ("MB/s", "mb_s", 1), ("avg ms", "avg", 1),
         ("p50 ms", "p50", 0), ("p95 ms", "p95", 0), ("p99 ms", "p99", 0),
         ("p99.9 ms", "p999", 0), ("max ms", "max", 0)]
out += ["## Results", ""]
for p in (1, 8):
    for acks in ("1", "all"):
        out += table(f"Produce: {p} partition{'s' if p > 1 else ''}, acks={acks} (ProducerPerformance)",
                     None, f"produce-p{p}-acks{acks}", producer, PCOLS)
        out += images(charts[f"produce-p{p}-acks{acks}"])
out += table(
    "Consume: 1 partition (ConsumerPerformance)",
    "MB/s over the whole run including the group join; fetch MB/s without it "
    "(rebalance.time.ms: from subscribe to the assignment).",
    "consume-p1", consumer,
    [("MB/s", "MB.sec", 1), ("records/s", "nMsg.sec", 0), ("fetch MB/s", "fetch.MB.sec", 1),
     ("fetch records/s", "fetch.nMsg.sec", 0), ("rebalance ms", "rebalance.time.ms", 0),
     ("fetch ms", "fetch.time.ms", 0), ("MB read", "data.consumed.in.MB", 1)])
ECOLS = [("avg ms", "avg", 2), ("p50 ms", "p50", 0), ("p99 ms", "p99", 0), ("p99.9 ms", "p999", 0)]
for acks in ("all", "1"):
    out += table(f"End to end, acks={acks} (EndToEndLatency)", None, f"e2e-acks{acks}", e2e, ECOLS)
LCOLS = [("delivered", "delivered", 0), ("records/s", "records_s", 0), ("p50 ms", "p50", 3),
         ("p99 ms", "p99", 3), ("p99.9 ms", "p999", 3), ("max ms", "max", 3)]
for acks in ("all", "1"):
    out += table(f"Produce latency at a fixed rate, acks={acks} (laminar-load latency, librdkafka)",
                 None, f"latency-acks{acks}", perf_latency, LCOLS)
    out += images(charts[f"latency-acks{acks}"])


def rss_parse(tag):
    d = rss(tag)
    if not d:
        return None
    return {"idle": d.get("idle VmRSS kB", 0) / 1024, "hwm": d.get("VmHWM kB after the loads", 0) / 1024,
            "disk": d.get("data dir kB", 0) / 1024}


lines = ["### Memory", "",
         "VmRSS 2 s after the broker listens (idle), VmHWM (peak RSS) after all the loads; for "
         "Kafka the java process. Data dir: `du` after the loads (Laminar's counts the "
         "fallocated segment tails, `log.preallocate.bytes`).", "",
         "| round | broker | idle RSS MiB | peak RSS MiB | data dir MiB |", "|---|---|---|---|---|"]
for r, bs in rounds:
    figs = {b: rss_parse(f"r{r}-{b}") for b in bs}
    for b in bs:
        f = figs[b] or {}
        lines.append(f"| {r} | {NAMES[b]} | {num(f.get('idle'), 0)} | {num(f.get('hwm'), 0)} | {num(f.get('disk'), 0)} |")
    for a, b, label in PAIRS:
        if figs.get(a) and figs.get(b):
            l, k = figs[a], figs[b]
            lines.append(f"| {r} | **{label}** | {ratio(l['idle'], k['idle'])} | {ratio(l['hwm'], k['hwm'])} | {ratio(l['disk'], k['disk'])} |")
out += lines + [""]

# acks=all / acks=1 on the same broker in the same round: the price of waiting for the fsync
# (Laminar) or, on a single Kafka node without flushes, of idempotence and nothing else.
lines = ["## Derived: acks=all / acks=1", "",
         "Same broker, same round. Laminar's acks=all waits for an fsync; Kafka's (one node, no "
         "flush) does not, so its ratio shows only the client-side difference (idempotence).", "",
         "| round | broker | load | records/s | avg | p50 | p99 | p99.9 | max |",
         "|---|---|---|---|---|---|---|---|---|"]
for r, bs in rounds:
    for b in bs:
        tag = f"r{r}-{b}"
        for what, load, parse in (("produce, 1 partition", "produce-p{}", producer),
                                  ("produce, 8 partitions", "produce-p{}", producer),
                                  ("end to end", "e2e-acks{}", e2e),
                                  ("perf latency", "latency-acks{}", perf_latency)):
            if load.startswith("produce"):
                p = 8 if "8" in what else 1
                a = parse(raw(tag, f"produce-p{p}-acksall"))
                o = parse(raw(tag, f"produce-p{p}-acks1"))
            else:
                a = parse(raw(tag, load.format("all")))
                o = parse(raw(tag, load.format("1")))
            if not (a and o):
                continue
            lines.append(f"| {r} | {NAMES[b]} | {what} | "
                         + " | ".join(ratio(a.get(k), o.get(k)) if k in a else "–"
                                      for k in ("records_s", "avg", "p50", "p99", "p999", "max")) + " |")
out += lines + [""]

failed = []
for name in sorted(os.listdir(RAW)):
    if name.endswith(".txt"):
        rc = exit_code(open(os.path.join(RAW, name), errors="replace").read())
        if rc not in (None, 0):
            failed.append(f"- `{name}` (raw directory): exit {rc}")
if failed:
    out += ["## Failed loads", ""] + failed + [""]
out += ["Raw output of every tool, broker logs, Kafka's server.log and the latency series for "
        "`laminar perf plot`: in the run's raw directory (`bench_raw_dir` in bench/machine.sh), "
        "not in git."]

text = "\n".join(out) + "\n"
with open(os.path.join(OUT, "summary.md"), "w") as f:
    f.write(text)
print(text)
