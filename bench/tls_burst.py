#!/usr/bin/env python3
"""A burst of new TLS connections to a Kafka listener (issue 30's handshake benchmark).

Opens N connections at once (asyncio, one thread), each: TCP connect, TLS handshake
(verifying the broker's certificate against CAFILE), one ApiVersions v0 request and its
response; every connection stays open until all are done, then all close. Prints one JSON line:
how many succeeded, the burst's wall time, and percentiles (ms) of the handshake and of
connect-to-ApiVersions-answer.

    tls_burst.py HOST PORT CAFILE [N]   (N: 1000)
"""
import asyncio
import json
import ssl
import struct
import sys
import time


def api_versions_v0(correlation_id):
    client_id = b"tls-burst"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


async def one(host, port, ctx, i, done, results):
    t0 = time.monotonic()
    try:
        reader, writer = await asyncio.open_connection(host, port, ssl=ctx, server_hostname=host)
        t_hs = time.monotonic()
        writer.write(api_versions_v0(i))
        await writer.drain()
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        answer = await reader.readexactly(size)
        if struct.unpack(">i", answer[:4])[0] != i:
            raise RuntimeError("an answer to another request")
        t_done = time.monotonic()
        results.append(((t_hs - t0) * 1e3, (t_done - t0) * 1e3, None))
    except Exception as e:  # counted and reported, the burst goes on
        results.append((None, None, f"{type(e).__name__}: {e}"))
        return
    await done.wait()
    writer.close()
    try:
        await writer.wait_closed()
    except Exception:
        pass


def pct(values, q):
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 1)


async def main():
    host, port, cafile = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
    ctx = ssl.create_default_context(cafile=cafile)
    done = asyncio.Event()
    results = []
    t0 = time.monotonic()
    tasks = [asyncio.create_task(one(host, port, ctx, i, done, results)) for i in range(n)]
    while len(results) < n:
        await asyncio.sleep(0.01)
    wall = time.monotonic() - t0
    done.set()
    await asyncio.gather(*tasks)
    handshakes = [r[0] for r in results if r[0] is not None]
    answered = [r[1] for r in results if r[1] is not None]
    errors = [r[2] for r in results if r[2] is not None]
    print(json.dumps({
        "connections": n,
        "ok": len(answered),
        "failed": len(errors),
        "first_error": errors[0] if errors else None,
        "wall_s": round(wall, 3),
        "handshake_ms": {"p50": pct(handshakes, 0.5), "p99": pct(handshakes, 0.99), "max": pct(handshakes, 1.0)},
        "answered_ms": {"p50": pct(answered, 0.5), "p99": pct(answered, 0.99), "max": pct(answered, 1.0)},
    }))


asyncio.run(main())
