#!/usr/bin/env python3
"""Summarises bench/tls.sh's raw output (in the run's raw directory outside the repository,
bench/bench_raw.py): per broker, mode (plaintext, tls) and round, the
producer's records/s, MB/s and latency percentiles (ProducerPerformance's last line) and the
consumer's MB/s (ConsumerPerformance's result line); then the medians over rounds and the
Laminar/Kafka ratios, and each broker's TLS/plaintext ratio. Then the burst part: the
established producer's steady-state percentiles alone and during bursts of new TLS
connections, and the bursts' handshake times."""
import json
import re
import statistics
import sys
from pathlib import Path

from bench_raw import raw_dir

out = Path(sys.argv[1])
raw = Path(raw_dir(out))


def producer_line(kind=""):
    """ProducerPerformance's summary line: the whole run's, or (kind "steady state ") the
    one after its --warmup-records."""
    return re.compile(
        rf"(\d+) {kind}records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg "
        r"latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, "
        r"(\d+) ms 99.9th")


PRODUCE = producer_line()
rows = {}
for f in sorted(raw.glob("r*-*-*-produce.txt")):
    rnd, broker, mode = f.name.split("-")[:3]
    m = None
    for line in f.read_text().splitlines():
        m = PRODUCE.search(line) or m
    if m:
        rows.setdefault((broker, mode), {}).setdefault("produce", []).append(
            (rnd, float(m.group(2)), float(m.group(3)), int(m.group(6)), int(m.group(8)), int(m.group(9))))
for f in sorted(raw.glob("r*-*-*-consume.txt")):
    rnd, broker, mode = f.name.split("-")[:3]
    lines = [l for l in f.read_text().splitlines() if re.match(r"^\d{4}-\d\d-\d\d ", l)]
    if lines:
        cols = [c.strip() for c in lines[-1].split(",")]
        # start, end, MB, MB/s, nMsg, nMsg/s, rebalance ms, fetch ms, fetch MB/s, fetch nMsg/s
        rows.setdefault((broker, mode), {}).setdefault("consume", []).append(
            (rnd, float(cols[3]), float(cols[5]), float(cols[8])))

# Laminar beside Kafka, or (BROKERS="laminar base") beside another Laminar build.
brokers_seen = {b for (b, _) in rows}
other = "kafka" if "kafka" in brokers_seen or "base" not in brokers_seen else "base"
OTHER = {"kafka": "Kafka", "base": "base (the other Laminar build)"}[other]
print(f"# TLS beside plaintext, Laminar beside {OTHER} (Kafka's perf tools)\n")
print((out / "config.txt").read_text().strip().replace("\n", "  \n"))
print("\n| broker | mode | round | produce records/s | produce MB/s | p50 ms | p99 ms | p99.9 ms | consume MB/s | consume fetch MB/s |")
print("|---|---|---|---|---|---|---|---|---|---|")
med = {}
for (broker, mode), r in sorted(rows.items()):
    prod = {x[0]: x for x in r.get("produce", [])}
    cons = {x[0]: x for x in r.get("consume", [])}
    for rnd in sorted(set(prod) | set(cons)):
        p = prod.get(rnd)
        c = cons.get(rnd)
        print(f"| {broker} | {mode} | {rnd} | "
              + (f"{p[1]:,.0f} | {p[2]:.1f} | {p[3]} | {p[4]} | {p[5]}" if p else "- | - | - | - | -")
              + " | " + (f"{c[1]:.1f} | {c[3]:.1f}" if c else "- | -") + " |")
    if r.get("produce"):
        med[(broker, mode, "produce MB/s")] = statistics.median(x[2] for x in r["produce"])
        med[(broker, mode, "produce p99 ms")] = statistics.median(x[4] for x in r["produce"])
    if r.get("consume"):
        med[(broker, mode, "consume MB/s")] = statistics.median(x[1] for x in r["consume"])

print("\nMedians over rounds, and ratios:\n")
print(f"| measure | mode | Laminar | {OTHER} | Laminar / {other} |")
print("|---|---|---|---|---|")
for measure in ["produce MB/s", "produce p99 ms", "consume MB/s"]:
    for mode in ["plaintext", "tls"]:
        l, k = med.get(("laminar", mode, measure)), med.get((other, mode, measure))
        ratio = f"{l / k:.2f}" if l is not None and k else "-"
        show = lambda v: "-" if v is None else f"{v:.1f}"
        print(f"| {measure} | {mode} | {show(l)} | {show(k)} | {ratio} |")
# CPU seconds per GB moved, broker and client, from each load's cpu files (broker: the
# difference of /proc/PID/stat before and after; client: /usr/bin/time).
CPU = re.compile(r"broker cpu s: ([\d.]+) user ([\d.]+) sys")
CLIENT = re.compile(r"client cpu s: ([\d.]+) user ([\d.]+) sys ([\d.]+) wall")
cpu_rows = []
n_records = re.search(r"N: (\d+)", (out / "config.txt").read_text())
gb = int(n_records.group(1)) * 1024 / 1e9 if n_records else 0
for f in sorted(raw.glob("r*-*-*-*-cpu.txt")):
    rnd, broker, mode, load = f.name.split("-")[:4]
    b = [(float(u), float(s_)) for u, s_ in CPU.findall(f.read_text())]
    log = raw / f"{rnd}-{broker}-{mode}-{load}.txt"
    c = CLIENT.findall(log.read_text()) if log.exists() else []
    if len(b) == 2 and c and gb:
        broker_s = (b[1][0] - b[0][0]) + (b[1][1] - b[0][1])
        client_s = float(c[-1][0]) + float(c[-1][1])
        cpu_rows.append((broker, mode, load, rnd, broker_s, client_s, float(c[-1][2]), gb))
if cpu_rows:
    print("\n## CPU per load: broker and client (the client shares the machine's 2 cores)\n")
    print("| broker | mode | load | round | broker CPU s | client CPU s | wall s | broker CPU s per GB | client CPU s per GB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for broker, mode, load, rnd, bs, cs, wall, gb in sorted(cpu_rows):
        print(f"| {broker} | {mode} | {load} | {rnd} | {bs:.1f} | {cs:.1f} | {wall:.1f} | {bs / gb:.1f} | {cs / gb:.1f} |")

print("\n| broker | TLS / plaintext, produce MB/s | TLS / plaintext, consume MB/s |")
print("|---|---|---|")
for broker in ["laminar", other]:
    def ratio(measure):
        t, p = med.get((broker, "tls", measure)), med.get((broker, "plaintext", measure))
        return f"{t / p:.2f}" if t is not None and p else "-"
    print(f"| {broker} | {ratio('produce MB/s')} | {ratio('consume MB/s')} |")

STEADY = producer_line("steady state ")
rate = {}
for f in sorted(raw.glob("r*-*-*-rate.txt")):
    rnd, broker, phase = f.name.split("-")[:3]
    m = STEADY.findall(f.read_text())
    if m:
        rate[(broker, phase, rnd)] = [float(x) for x in m[-1]]
if rate:
    print("\n## Established producer over TLS, alone and during bursts of new TLS connections\n")
    print("| broker | round | phase | records/s | p50 ms | p99 ms | p99.9 ms | max ms | bursts: ok / connections, wall s, handshake p50 / p99 / max ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    p99 = {}
    for (broker, phase, rnd), v in sorted(rate.items()):
        bursts = []
        if phase == "burst":
            for b in sorted(raw.glob(f"{rnd}-{broker}-burst-*.json")):
                try:
                    j = json.loads(b.read_text().strip().splitlines()[-1])
                    h = j["handshake_ms"]
                    bursts.append(f"{j['ok']}/{j['connections']}, {j['wall_s']} s, {h['p50']} / {h['p99']} / {h['max']}")
                except (ValueError, KeyError, IndexError):
                    bursts.append("unreadable")
        p99.setdefault((broker, phase), []).append(v[7])
        print(f"| {broker} | {rnd} | {phase} | {v[1]:,.0f} | {v[5]:.0f} | {v[7]:.0f} | {v[8]:.0f} | {v[4]:.0f} | {'; '.join(bursts) or '-'} |")
    print("\n| broker | median p99 alone ms | median p99 during bursts ms | during / alone |")
    print("|---|---|---|---|")
    for broker in ["laminar", other]:
        a, b = p99.get((broker, "steady")), p99.get((broker, "burst"))
        if a and b:
            ma, mb = statistics.median(a), statistics.median(b)
            print(f"| {broker} | {ma:.0f} | {mb:.0f} | {mb / ma:.2f} |" if ma else f"| {broker} | {ma:.0f} | {mb:.0f} | - |")
