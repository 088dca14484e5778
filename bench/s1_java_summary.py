#!/usr/bin/env python3
"""Summarises a bench/s1_java.sh run: reads OUT/config.txt and the raw files (the run's raw
directory outside the repository, bench/bench_raw.py), writes OUT/summary.md and prints it.
Standard library only.

Per broker and round: the producer's steady-state p50/p99/p99.9/max (ProducerPerformance,
whole milliseconds) alone (a) and with the cold consumer (b), the consumer's MB/s over the
producer's lifetime in (b), the broker's disk reads, and whether the round passes:
    b.p99 <= max(1.2 * a.p99, a.p99 + 5 ms)  and  b.max < 100 ms  and
    consumer MB/s >= 0.9 * READ_BPS / 10^6
(MB = 10^6 bytes everywhere in the summary; ConsumerPerformance's own "MB" is 2^20 bytes and is
converted). For Laminar, the diff of its Prometheus histograms over each phase: fallocate calls
and the bucket their slowest one fell in, and the Produce request phases.

Usage: bench/s1_java_summary.py OUT
"""
import gzip
import os
import re
import statistics
import sys
from datetime import datetime

from bench_raw import raw_dir

OUT = sys.argv[1]
RAW = raw_dir(OUT)
NAMES = {"laminar": "Laminar", "kafka": "Kafka"}
MIB = 1 << 20

# ProducerPerformance's summary lines (its percentiles are whole milliseconds).
WHOLE = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, ([\d.]+) ms 50th, ([\d.]+) ms 95th, ([\d.]+) ms 99th, "
    r"([\d.]+) ms 99.9th")
STEADY = re.compile(
    r"(\d+) steady state records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg "
    r"latency, ([\d.]+) ms max latency, ([\d.]+) ms 50th, ([\d.]+) ms 95th, ([\d.]+) ms 99th, "
    r"([\d.]+) ms 99.9th")
KEYS = ["records", "records_s", "mib_s", "avg", "max", "p50", "p95", "p99", "p999"]


def text(name):
    """A raw file's text; NAME.gz (kept results compress their metrics) if NAME is gone."""
    path = os.path.join(RAW, name)
    try:
        if not os.path.exists(path) and os.path.exists(path + ".gz"):
            with gzip.open(path + ".gz", "rt", errors="replace") as f:
                return f.read()
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def exit_code(t):
    m = re.search(r"^\[exit (\d+)\]$", t, re.M)
    return int(m.group(1)) if m else None


def producer(name):
    """The steady-state figures (after --warmup-records), else the whole run's; None if none."""
    t = text(name)
    m = STEADY.findall(t) or WHOLE.findall(t)
    if not m:
        return None
    d = dict(zip(KEYS, map(float, m[-1])))
    d["steady"] = bool(STEADY.search(t))
    d["exit"] = exit_code(t)
    return d


def times(name):
    d = {}
    for line in text(name).splitlines():
        k, _, v = line.partition(" ")
        try:
            d[k] = float(v)
        except ValueError:
            pass
    return d


def consumer_points(name):
    """[(epoch s, MiB consumed so far)] from ConsumerPerformance --show-detailed-stats lines."""
    pts, cols = [], None
    for line in text(name).splitlines():
        fields = [x.strip() for x in line.split(",")]
        if "data.consumed.in.MB" in fields:
            cols = fields
            continue
        if not cols or len(fields) != len(cols):
            continue
        d = dict(zip(cols, fields))
        try:
            t = datetime.strptime(d["time"], "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
            pts.append((t, float(d["data.consumed.in.MB"])))
        except (KeyError, ValueError):
            continue
    return pts


def interp(pts, t):
    """Cumulative MiB at time t, linear between the points (flat after the last one)."""
    if t <= pts[0][0]:
        return pts[0][1]
    for (t0, v0), (t1, v1) in zip(pts, pts[1:]):
        if t0 <= t <= t1:
            return v0 + (v1 - v0) * (t - t0) / (t1 - t0) if t1 > t0 else v1
    return pts[-1][1]


def consumer_rate(tag):
    """MB/s (10^6 B/s) of the consumer over the producer's lifetime in phase b, and a note."""
    tm = times(f"{tag}-b-times.txt")
    pts = consumer_points(f"{tag}-b-consumer.txt")
    if not pts or "producer_start" not in tm or "producer_end" not in tm:
        return None, "no consumer figures"
    # Nothing was consumed before the consumer started.
    pts = [(tm.get("consumer_start", pts[0][0] - 1), 0.0)] + pts
    w0, w1 = tm["producer_start"], tm["producer_end"]
    note = ""
    raw = text(f"{tag}-b-consumer.txt")
    if "[stopped by the script" not in raw:
        # It ended by itself: it read all of `big`, or timed out. Count its active part only.
        w1 = min(w1, pts[-1][0])
        note = "consumer ended before the producer"
    if w1 <= w0:
        return None, note or "empty window"
    mib = interp(pts, w1) - interp(pts, w0)
    return mib * MIB / 1e6 / (w1 - w0), note


def proc_io(tag, phase, when):
    for line in text(f"{tag}-{phase}-io-{when}.txt").splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    return None


def disk_read_rate(tag, phase):
    """The broker's disk reads (/proc/PID/io read_bytes) over the phase, MB/s."""
    a, b = proc_io(tag, phase, "before"), proc_io(tag, phase, "after")
    tm = times(f"{tag}-{phase}-times.txt")
    t0 = tm.get("consumer_start", tm.get("producer_start"))
    t1 = tm.get("consumer_end", tm.get("producer_end"))
    if a is None or b is None or t0 is None or t1 is None or t1 <= t0:
        return None
    return (b - a) / 1e6 / (t1 - t0)


# --- Laminar's Prometheus text ---

SAMPLE = re.compile(r"^([A-Za-z_:][\w:]*)(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def prom(name):
    samples = {}
    for line in text(name).splitlines():
        m = SAMPLE.match(line)
        if not m:
            continue
        labels = frozenset(LABEL.findall(m.group(2) or ""))
        try:
            samples[(m.group(1), labels)] = float(m.group(3))
        except ValueError:
            pass
    return samples


def hist_diff(before, after, family, **match):
    """[(le seconds, count in the phase at or below le)], ending with +Inf; None if absent."""
    want = set(match.items())
    out = []
    for (name, labels), v in after.items():
        if name != f"{family}_bucket" or not want <= set(labels):
            continue
        le = dict(labels).get("le")
        out.append((float("inf") if le == "+Inf" else float(le), v - before.get((name, labels), 0.0)))
    return sorted(out) or None


def quantile_bound(buckets, q):
    """The upper bound (s) of the bucket holding quantile q; q=1: the slowest one's bucket."""
    if not buckets:
        return None
    n = buckets[-1][1]
    if n <= 0:
        return None
    for le, c in buckets:
        if c >= q * n - 1e-9:
            return le
    return float("inf")


def fmt_bound(s):
    if s is None:
        return "–"
    if s == float("inf"):
        return "> 10 s"
    ms = s * 1000
    return f"≤ {ms:g} ms"


def num(x, digits=0):
    return "–" if x is None else f"{x:.{digits}f}"


# --- the run ---

config_lines = open(os.path.join(OUT, "config.txt")).read().rstrip("\n").splitlines()
config = dict(l.split(": ", 1) for l in config_lines if ": " in l)
read_bps = float(config.get("read bps", "0"))
need_mb_s = 0.9 * read_bps / 1e6

brokers = [b for b in config.get("brokers", "laminar kafka").split()
           if os.path.exists(os.path.join(RAW, f"{b}-fill.txt"))]

out = [f"# Scenario S1 (cold catch-up) with Kafka's Java clients ({OUT})", "",
       "## Machine, versions, configuration", "", "```"] + config_lines + ["```", ""]
out += [
    "Units: latencies in ms (ProducerPerformance prints whole milliseconds; p50/p99/p99.9 and "
    "max are its steady-state figures, after the --warmup-records). MB = 10^6 bytes: the "
    "consumer's MB/s is ConsumerPerformance's record bytes (keys + values, not the batch "
    "overhead) consumed between the producer's start and its end, converted from its "
    "2^20-byte \"MB\". Disk read MB/s: the broker process's read_bytes (/proc/PID/io) over "
    "the phase: (a) the producer's run, (b) from the consumer's start to its stop.",
    "",
    f"Pass: b.p99 ≤ max(1.2 × a.p99, a.p99 + 5 ms) and b.max < 100 ms and consumer ≥ 0.9 × "
    f"READ_BPS = {need_mb_s:.2f} MB/s (READ_BPS {read_bps:.0f} B/s = {read_bps / 1e6:.2f} MB/s = "
    f"{read_bps / MIB:.2f} MiB/s).",
    "",
]

for b in brokers:
    name = NAMES.get(b, b)
    fill = producer(f"{b}-fill.txt")
    out += [f"## {name}", ""]
    if fill:
        out += [f"Fill: {fill['records']:.0f} records of 1024 B, {fill['records_s']:,.0f} records/s, "
                f"{fill['mib_s'] * MIB / 1e6:.1f} MB/s (exit {fill['exit']}).", ""]
    rounds = sorted({int(m.group(1)) for f in os.listdir(RAW)
                     for m in [re.match(rf"r(\d+)-{b}-a-producer\.txt$", f)] if m})
    out += ["| round | a: p50/p99/p99.9/max ms | b: p50/p99/p99.9/max ms | consumer MB/s | "
            "disk read MB/s a / b | p99 ratio b/a | pass? |",
            "|---|---|---|---|---|---|---|"]
    passes, rows = 0, []
    notes = []
    for r in rounds:
        tag = f"r{r}-{b}"
        pa, pb = producer(f"{tag}-a-producer.txt"), producer(f"{tag}-b-producer.txt")
        mbs, note = consumer_rate(tag)
        if note:
            notes.append(f"- round {r}: {note}")
        for ph, p in (("a", pa), ("b", pb)):
            if p and (p["exit"] not in (0, None) or not p["steady"]):
                notes.append(f"- round {r} phase {ph}: producer exit {p['exit']}"
                             + ("" if p["steady"] else ", no steady-state line (whole run used)"))

        def cell(p):
            return "–" if not p else f"{p['p50']:.0f} / {p['p99']:.0f} / {p['p999']:.0f} / {p['max']:.0f}"

        ok, why = None, []
        ratio = None
        if pa and pb:
            ratio = pb["p99"] / pa["p99"] if pa["p99"] > 0 else None
            if pb["p99"] > max(1.2 * pa["p99"], pa["p99"] + 5):
                why.append("p99")
            if pb["max"] >= 100:
                why.append("max")
            if mbs is None or mbs < need_mb_s:
                why.append("consumer")
            ok = not why
            passes += ok
            rows.append((pa, pb, mbs))
        da, db = disk_read_rate(tag, "a"), disk_read_rate(tag, "b")
        verdict = "–" if ok is None else ("yes" if ok else f"no ({', '.join(why)})")
        ratio_s = "–" if ratio is None else (f"{ratio:.2f}" if pa["p99"] > 0 else "n/a")
        if ratio is None and pa and pb and pa["p99"] == 0:
            ratio_s = "n/a (a.p99 = 0)"
        out.append(f"| {r} | {cell(pa)} | {cell(pb)} | {num(mbs, 1)} | {num(da, 1)} / {num(db, 1)} | "
                   f"{ratio_s} | {verdict} |")
    out.append("")
    if rows:
        med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
        out.append(f"Passed {passes} of {len(rows)} rounds. Medians: a.p99 {med([a['p99'] for a, _, _ in rows]):.0f} ms, "
                   f"b.p99 {med([x['p99'] for _, x, _ in rows]):.0f} ms, a.max {med([a['max'] for a, _, _ in rows]):.0f} ms, "
                   f"b.max {med([x['max'] for _, x, _ in rows]):.0f} ms, consumer "
                   f"{num(med([m for _, _, m in rows if m is not None]), 1)} MB/s.")
        out.append("")
    if notes:
        out += ["Notes:", ""] + notes + [""]

    if b == "laminar":
        out += ["Laminar's histograms, diffed over each phase (Prometheus buckets: a value is the "
                "upper bound of the bucket holding that quantile, 50 µs to 10 s):", "",
                "| round | phase | fallocate calls | fallocate max | pwrite max | Produce requests | "
                "Produce total p99 | total max | request_queue p99 | local p99 | wait p99 | "
                "cold_read calls | cold_read max |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rounds:
            tag = f"r{r}-{b}"
            for ph in ("a", "b"):
                before, after = prom(f"{tag}-{ph}-metrics-before.prom"), prom(f"{tag}-{ph}-metrics-after.prom")
                if not before or not after:
                    out.append(f"| {r} | {ph} | (no metrics) |||||||||||")
                    continue
                disk = "laminar_disk_call_seconds"
                req = "laminar_request_phase_seconds"
                fal = hist_diff(before, after, disk, call="fallocate")
                pw = hist_diff(before, after, disk, call="pwrite")
                cold = hist_diff(before, after, disk, call="cold_read")
                tot = hist_diff(before, after, req, api="Produce", phase="total")
                phases = {p: hist_diff(before, after, req, api="Produce", phase=p)
                          for p in ("request_queue", "local", "wait")}
                count = lambda h: "–" if not h else f"{h[-1][1]:.0f}"  # noqa: E731
                out.append(
                    f"| {r} | {ph} | {count(fal)} | {fmt_bound(quantile_bound(fal, 1))} | "
                    f"{fmt_bound(quantile_bound(pw, 1))} | {count(tot)} | "
                    f"{fmt_bound(quantile_bound(tot, 0.99))} | {fmt_bound(quantile_bound(tot, 1))} | "
                    + " | ".join(fmt_bound(quantile_bound(phases[p], 0.99)) for p in phases)
                    + f" | {count(cold)} | {fmt_bound(quantile_bound(cold, 1))} |")
        out.append("")
        out.append("(Produce requests from every client in the phase: the producer, and in (b) "
                   "nothing else produces. fallocate: the storage engine's segment "
                   "preallocation, `laminar_disk_call_seconds{call=\"fallocate\"}`.)")
        out.append("")

with open(os.path.join(OUT, "summary.md"), "w") as f:
    f.write("\n".join(out) + "\n")
print("\n".join(out))
