#!/usr/bin/env python3
"""Tables of the socket.send.buffer.bytes A/B runs in this directory (run.sh, run-b.sh)."""
import glob, json, os, re, statistics

here = os.path.dirname(os.path.abspath(__file__))
rows = {}
for fill in sorted(glob.glob(os.path.join(here, "*.fill.json"))):
    tag = os.path.basename(fill)[: -len(".fill.json")]
    m = re.match(r"(b-)?(auto|\d+)-r(\d+)$", tag)
    batch, setting, rnd = ("b" if m.group(1) else "a"), m.group(2), int(m.group(3))
    cp = []
    for g in (1, 2):
        last = open(os.path.join(here, f"{tag}.consumer-perf-{g}.txt")).read().strip().splitlines()[-1].split(",")
        cp.append(float(last[8]))  # fetch.MB.sec
    s2 = json.load(open(os.path.join(here, f"{tag}.s2.json")))
    rows.setdefault((batch, setting), []).append((rnd, cp, s2))

print("| batch | socket.send.buffer.bytes | round | ConsumerPerformance fetch MB/s (2 runs) | S2 produce MB/s | S2 produce p99 ms | S2 consumer MB/s |")
print("|---|---|---|---|---|---|---|")
for (batch, setting), rs in sorted(rows.items()):
    for rnd, cp, s2 in sorted(rs, key=lambda r: r[0]):
        print(f"| {batch} | {setting} | {rnd} | {cp[0]:.0f}, {cp[1]:.0f} | {s2['mb_per_s']:.1f} | "
              f"{s2['latency_us']['p99'] / 1000:.0f} | {s2['consumer']['mb_per_s']:.1f} |")
print()
print("| socket.send.buffer.bytes | runs | median ConsumerPerformance fetch MB/s | median S2 produce MB/s | median S2 produce p99 ms |")
print("|---|---|---|---|---|")
by_setting = {}
for (batch, setting), rs in rows.items():
    by_setting.setdefault(setting, []).extend(rs)
for setting, rs in sorted(by_setting.items()):
    cps = [c for _, cp, _ in rs for c in cp]
    print(f"| {setting} | {len(rs)} | {statistics.median(cps):.0f} | "
          f"{statistics.median(s['mb_per_s'] for _, _, s in rs):.1f} | "
          f"{statistics.median(s['latency_us']['p99'] / 1000 for _, _, s in rs):.0f} |")
