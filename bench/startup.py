#!/usr/bin/env python3
"""Startup of a new single node, build beside build, alternating: from exec to the line
"laminar listening on", and to the first record acknowledged by kcat (topic auto-created,
acks=all). Usage: startup.py ROUNDS label=/path/to/laminar [label=/path/to/laminar ...]
Prints each round, then per build the percentiles in milliseconds."""
import os, shutil, socket, subprocess, sys, tempfile, time

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port

def one(binary):
    tmp = tempfile.mkdtemp(prefix="laminar-startup-")
    addr = f"127.0.0.1:{free_port()}"
    start = time.monotonic()
    p = subprocess.Popen([binary, "serve", "--listen", addr, "--data-dir", os.path.join(tmp, "data"),
                          "--metrics-listen", "none"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    listening = None
    try:
        for line in p.stderr:
            if "laminar listening on" in line:
                listening = time.monotonic() - start
                break
        kcat = subprocess.run(["kcat", "-b", addr, "-P", "-t", "first", "-X", "acks=all",
                               "-X", "message.timeout.ms=10000"], input="one\n", text=True,
                              capture_output=True, timeout=30)
        acked = time.monotonic() - start
        if kcat.returncode != 0:
            raise SystemExit(f"{binary}: kcat failed: {kcat.stderr}")
        return listening, acked
    finally:
        p.terminate()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)

def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q / 100 * (len(v) - 1))))]

def main():
    rounds = int(sys.argv[1])
    builds = [a.split("=", 1) for a in sys.argv[2:]]
    results = {label: ([], []) for label, _ in builds}
    for r in range(rounds):
        order = builds if r % 2 == 0 else list(reversed(builds))
        for label, binary in order:
            listening, acked = one(binary)
            results[label][0].append(listening * 1000)
            results[label][1].append(acked * 1000)
            print(f"round {r} {label}: listening {listening*1000:.1f} ms, first record acked {acked*1000:.1f} ms", flush=True)
    print(f"\n{'build':<10} {'what':<22} {'p50':>8} {'p90':>8} {'max':>8}  (ms, {rounds} rounds)")
    for label, (l, a) in results.items():
        for what, v in (("listening", l), ("first record acked", a)):
            print(f"{label:<10} {what:<22} {pct(v,50):8.1f} {pct(v,90):8.1f} {max(v):8.1f}")

main()
