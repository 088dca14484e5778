#!/usr/bin/env python3
"""Write-path options at line rate, outside the broker: what an append waits for while a
flusher fsyncs, for buffered writes (Laminar's write path) and for O_DIRECT writes of
aligned blocks with the unaligned tail kept in memory (Redpanda's).

One thread appends fixed-size sets round-robin to PARTITIONS files at a fixed byte rate
(as `laminar perf log --records-per-s` does); another fdatasyncs every file every
FLUSH_MS (0: never). Each file is fallocated whole before the run, as a segment's
preallocation would be. It prints the append (pwrite) latency percentiles per mode, and
the achieved rate, as JSON lines.

In O_DIRECT mode an append writes from the start of the 4 KiB block that holds the file's
current end through the end of the set rounded up to 4 KiB: the partial last block is
written again by the next append, from a copy kept in memory, so the file never holds a
block that the log did not write.

Usage: write_path_options.py DIR MODE FLUSH_MS [SECONDS] [MB_PER_S] [PARTITIONS] [SET_BYTES]
                             [STEP_MIB]
  MODE: buffered | direct
  STEP_MIB: 0 (default) fallocates each file whole before the run; N > 0 fallocates N MiB
    more on the appending thread whenever an append would pass the allocated end, as
    Laminar's segments grow (`preallocate_bytes`, 32 MiB by default).
"""
import json
import mmap
import os
import sys
import threading
import time

BLOCK = 4096


def percentile(sorted_us, q):
    if not sorted_us:
        return 0.0
    return sorted_us[min(len(sorted_us) - 1, int(q * len(sorted_us)))]


def main():
    d, mode, flush_ms = sys.argv[1], sys.argv[2], int(sys.argv[3])
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 10.0
    mb_per_s = float(sys.argv[5]) if len(sys.argv) > 5 else 330.0
    partitions = int(sys.argv[6]) if len(sys.argv) > 6 else 4
    set_bytes = int(sys.argv[7]) if len(sys.argv) > 7 else 100 * 1034
    step = (int(sys.argv[8]) if len(sys.argv) > 8 else 0) << 20
    assert mode in ("buffered", "direct"), mode
    file_bytes = int(mb_per_s * 1e6 * seconds / partitions) + 64 * BLOCK
    flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC
    if mode == "direct":
        flags |= os.O_DIRECT
    fds = []
    for p in range(partitions):
        fd = os.open(os.path.join(d, f"p{p}.log"), flags, 0o644)
        if step == 0:
            os.posix_fallocate(fd, 0, file_bytes)
        fds.append(fd)
    allocated = [file_bytes if step == 0 else 0] * partitions
    os.sync()

    payload = os.urandom(set_bytes)
    # An aligned staging buffer (anonymous mmap is page-aligned): the old tail block, then
    # the new set, zero padding to the block boundary.
    staging = mmap.mmap(-1, set_bytes + 2 * BLOCK)
    ends = [0] * partitions
    tails = [b""] * partitions
    stop = threading.Event()
    fsync_us = []

    def flusher():
        while not stop.wait(flush_ms / 1000.0):
            for fd in fds:
                t = time.perf_counter_ns()
                os.fdatasync(fd)
                fsync_us.append((time.perf_counter_ns() - t) / 1000.0)

    if flush_ms > 0:
        th = threading.Thread(target=flusher, daemon=True)
        th.start()
    interval_s = set_bytes / (mb_per_s * 1e6)
    lat_us = []
    start = time.perf_counter()
    n = 0
    while True:
        due = start + n * interval_s
        now = time.perf_counter()
        if due - start >= seconds:
            break
        if due > now:
            time.sleep(due - now)
        p = n % partitions
        fd = fds[p]
        t = time.perf_counter_ns()
        if ends[p] + set_bytes + BLOCK > allocated[p]:
            allocated[p] = (-(-(ends[p] + set_bytes + BLOCK) // step)) * step
            os.posix_fallocate(fd, 0, allocated[p])
        if mode == "buffered":
            os.pwrite(fd, payload, ends[p])
        else:
            block_start = ends[p] - len(tails[p])
            staging.seek(0)
            staging.write(tails[p])
            staging.write(payload)
            used = len(tails[p]) + set_bytes
            padded = -(-used // BLOCK) * BLOCK
            staging.write(b"\0" * (padded - used))
            os.pwritev(fd, [memoryview(staging)[:padded]], block_start)
            new_end = ends[p] + set_bytes
            keep = new_end % BLOCK
            tails[p] = bytes(staging[used - keep : used]) if keep else b""
        # From when the append was due, as `laminar perf log` counts it: a writer that
        # started late (descheduled, or behind its previous append) waited too.
        late_us = max(0.0, (time.perf_counter() - due) * 1e6 - (time.perf_counter_ns() - t) / 1000.0)
        lat_us.append((time.perf_counter_ns() - t) / 1000.0 + late_us)
        ends[p] += set_bytes
        n += 1
    elapsed = time.perf_counter() - start
    stop.set()
    if flush_ms > 0:
        th.join()
    for fd in fds:
        os.close(fd)
    lat_us.sort()
    fsync_us.sort()
    print(json.dumps({
        "mode": mode,
        "flush_ms": flush_ms,
        "partitions": partitions,
        "set_bytes": set_bytes,
        "prealloc_step_mib": step >> 20,
        "target_mb_per_s": mb_per_s,
        "achieved_mb_per_s": round(sum(ends) / elapsed / 1e6, 1),
        "appends": len(lat_us),
        "append_us": {k: round(percentile(lat_us, q), 1) for k, q in
                      [("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999), ("max", 1.0)]},
        "fsyncs": len(fsync_us),
        "fsync_us": {k: round(percentile(fsync_us, q), 1) for k, q in
                     [("p50", 0.5), ("p99", 0.99), ("max", 1.0)]},
    }))


if __name__ == "__main__":
    main()
