"""Medians of old vs new `perf log` runs (runs.jsonl), and their ratios."""
import json
import statistics as st
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "runs.jsonl"
rows = [json.loads(line) for line in open(path)]
NEW = "final" if any(r["build"] == "final" for r in rows) else "new"
for v in ["noflush", "flush100"]:
    med = {}
    for b in ["old", NEW]:
        rs = [r["run"]["append"] for r in rows if r["variant"] == v and r["build"] == b]
        mb = [x["mb_per_s"] for x in rs]
        p999 = [x["latency_us"]["p999"] for x in rs]
        mx = [x["latency_us"]["max"] for x in rs]
        med[b] = (st.median(mb), st.median(p999), st.median(mx))
        print(f"{v:9} {b}: MB/s {[round(m) for m in mb]} p99.9 us {p999} max us {mx}")
    o, n = med["old"], med[NEW]
    print(
        f"{v:9} medians old/new: MB/s {o[0]:.0f}/{n[0]:.0f} (new/old {n[0]/o[0]:.3f}), "
        f"p99.9 {o[1]:.0f}/{n[1]:.0f} us (new/old {n[1]/o[1]:.3f}), max {o[2]:.0f}/{n[2]:.0f} us"
    )
