"""Benchmark the embedded API server's memory under a watch burst; prints one JSON object.

The scenario: WATCHERS open watches on ConfigMaps, then one delete-collection removes OBJECTS
ConfigMaps of SIZE bytes each, so every watcher is sent OBJECTS DELETED events at once
(WATCHERS x OBJECTS x SIZE bytes on the wire). STALLED more watches are opened and never read (a
client that stopped reading). The API server runs in this process (so that `malloc_trim` can be
asked of it); the watchers run in a child process (so that their memory is not counted), read with
a minimal chunked-HTTP parser and report how many events each got.

Reported (MB, the server process's resident set from /proc/self/status):
- `rss_before_mb`: objects stored, watches open, before the burst;
- `rss_peak_mb`: the peak during the burst (VmHWM, reset just before it; sampled too);
- `rss_after_mb`: once every reading watcher has its events and the garbage collector ran: what
  the process still holds;
- `rss_after_trim_mb`: after glibc's `malloc_trim(0)`, which gives freed heap pages back to the OS
  (glibc keeps freed memory of its main heap and arenas otherwise; this is memory Python freed but
  the allocator had not returned).

Usage: python benchmarks/bench_watch_memory.py [--watchers 200] [--objects 500] [--size 10240]
       [--stalled 0] [--history-bytes N]
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import json
import os
import platform
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from runtimekit.cluster.apiserver import ApiServer

NAMESPACE = "bench"
PATH = f"/api/v1/namespaces/{NAMESPACE}/configmaps"


# the server side -----------------------------------------------------------------------------------


def rss_mb(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where that is not allowed."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def malloc_trim() -> bool:
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    return bool(libc.malloc_trim(0))


class PeakSampler:
    """The largest RSS seen every few milliseconds (a check on VmHWM, and its stand-in)."""

    def __init__(self) -> None:
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, rss_mb())


def configmap(i: int, size: int) -> dict[str, Any]:
    return {"metadata": {"name": f"cm-{i:05d}", "namespace": NAMESPACE}, "data": {"blob": "x" * size}}


def request(url: str, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def scenario(watchers: int, objects: int, size: int, stalled: int, history_bytes: int | None) -> dict[str, Any]:
    options: dict[str, Any] = {} if history_bytes is None else {"history_bytes": history_bytes}
    with ApiServer(**options) as server:
        api, url = server.api, server.url
        api.create(api.resource("", "v1", "namespaces"), "", {"metadata": {"name": NAMESPACE}})
        configmaps = api.resource("", "v1", "configmaps")
        for i in range(objects):
            api.create(configmaps, NAMESPACE, configmap(i, size))
        rv = str(server.store.rv)
        child = subprocess.Popen(
            [sys.executable, __file__, "--clients", url, rv, str(watchers), str(objects), str(stalled)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdin is not None
        assert child.stdout is not None
        try:
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError("the watchers did not start")
            time.sleep(0.5)
            gc.collect()
            before = rss_mb()
            hwm = reset_peak()
            with PeakSampler() as sampler:
                start = time.perf_counter()
                request(url, "DELETE", PATH)
                report = json.loads(child.stdout.readline())
                burst = time.perf_counter() - start
            peak = max(rss_mb("VmHWM") if hwm else 0.0, sampler.peak)
            gc.collect()
            time.sleep(0.5)
            after = rss_mb()
            trimmed = malloc_trim()
            after_trim = rss_mb()
        finally:
            child.stdin.close()
            child.wait(timeout=60)
    return {
        "benchmark": "watch_memory",
        "watchers": watchers,
        "stalled_watchers": stalled,
        "objects": objects,
        "object_bytes": size,
        "wire_mb": round(watchers * objects * size / 2**20, 1),
        "history_bytes": history_bytes,
        "events_received_min": min(report["counts"], default=0),
        "events_received_max": max(report["counts"], default=0),
        "errors": report["errors"],
        "burst_s": round(burst, 2),
        "rss_before_mb": round(before, 1),
        "rss_peak_mb": round(peak, 1),
        "rss_peak_source": "VmHWM and sampling" if hwm else "sampling every 5 ms",
        "rss_after_mb": round(after, 1),
        "rss_after_trim_mb": round(after_trim, 1),
        "malloc_trim_released": trimmed,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


# the watchers (child process) ----------------------------------------------------------------------


async def open_watch(url: str, rv: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(f"GET {PATH}?watch=1&resourceVersion={rv} HTTP/1.1\r\nHost: {parts.netloc}\r\n\r\n".encode())
    status = await reader.readline()
    if b" 200 " not in status:
        raise RuntimeError(f"watch refused: {status!r}")
    while (await reader.readline()).strip():
        pass
    return reader, writer


async def follow(reader: asyncio.StreamReader, expected: int) -> tuple[int, bool]:
    """Events read from a chunked watch body until `expected` or its end; (count, saw an ERROR)."""
    count, error = 0, False
    while count < expected:
        size = int((await reader.readline()).strip() or b"0", 16)
        if size == 0:
            break
        chunk = await reader.readexactly(size)
        await reader.readexactly(2)
        count += chunk.count(b"\n")
        error = error or b'"type":"ERROR"' in chunk
    return count, error


async def clients(url: str, rv: str, watchers: int, expected: int, stalled: int) -> None:
    idle = [await open_watch(url, rv) for _ in range(stalled)]
    reading = [await open_watch(url, rv) for _ in range(watchers)]
    print("ready", flush=True)
    results = await asyncio.gather(*(follow(reader, expected) for reader, _ in reading))
    print(json.dumps({"counts": [c for c, _ in results], "errors": sum(e for _, e in results)}), flush=True)
    await asyncio.to_thread(sys.stdin.read)  # hold the watches open until the server side has measured
    for _, writer in [*reading, *idle]:
        writer.close()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--clients":
        url, rv, watchers, expected, stalled = sys.argv[2:7]
        asyncio.run(clients(url, rv, int(watchers), int(expected), int(stalled)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watchers", type=int, default=200)
    parser.add_argument("--objects", type=int, default=500)
    parser.add_argument("--size", type=int, default=10_240, help="bytes of data per ConfigMap")
    parser.add_argument("--stalled", type=int, default=0, help="watches opened and never read")
    parser.add_argument("--history-bytes", type=int, help="the server's history bound in bytes (default its own)")
    args = parser.parse_args()
    result = scenario(args.watchers, args.objects, args.size, args.stalled, args.history_bytes)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
