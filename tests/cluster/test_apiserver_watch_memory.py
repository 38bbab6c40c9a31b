"""What watches cost the embedded API server: a burst sent to many watchers that do not read costs a
bounded buffer per watcher, not the burst per watcher; a watcher that falls behind the history gets
kube-apiserver's ERROR 410 "too old resource version" and its stream ends; the history is bounded in
bytes. (The full scenario, 200 watchers and 500 x 10 KB objects, with RSS figures:
benchmarks/bench_watch_memory.py.)

The watchers are raw sockets with a small receive buffer, so what the server has not sent stays in
its own memory (a kernel with large socket buffers would otherwise take the burst off its hands)."""

from __future__ import annotations

import gc
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fixtures.apiserver import http_client
from runtimekit.cluster.apiserver import ApiServer

NAMESPACE = "burst"
PATH = f"/api/v1/namespaces/{NAMESPACE}/configmaps"


def rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


@contextmanager
def peak_rss() -> Iterator[list[int]]:
    """Samples RSS every 2 ms while the block runs; the list holds the largest seen."""
    peak = [rss()]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.002):
            peak[0] = max(peak[0], rss())

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join()
        peak[0] = max(peak[0], rss())


class StalledWatch:
    """A watch that reads nothing until `events()` is called."""

    def __init__(self, url: str, rv: int) -> None:
        parts = urlsplit(url)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.settimeout(30.0)
        self.sock.connect((parts.hostname, parts.port))
        request = f"GET {PATH}?watch=1&resourceVersion={rv} HTTP/1.1\r\nHost: {parts.netloc}\r\n\r\n"
        self.sock.sendall(request.encode())
        self.file = self.sock.makefile("rb", buffering=0)
        assert b" 200 " in self.file.readline()
        while self.file.readline().strip():
            pass

    def events(self, expected: int) -> list[dict[str, Any]]:
        """Events until `expected` of them or the end of the stream (chunked encoding)."""
        out: list[dict[str, Any]] = []
        pending = b""
        while len(out) < expected:
            size = int(self.file.readline().strip(), 16)
            if size == 0:
                break
            pending += _exactly(self.file, size)
            _exactly(self.file, 2)
            *lines, pending = pending.split(b"\n")
            out.extend(json.loads(line) for line in lines)
        return out

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def _exactly(file: Any, size: int) -> bytes:
    data = b""
    while len(data) < size:
        part = file.read(size - len(data))
        assert part, "the stream ended inside a chunk"
        data += part
    return data


def fill(server: ApiServer, objects: int, size: int) -> None:
    api = server.api
    api.create(api.resource("", "v1", "namespaces"), "", {"metadata": {"name": NAMESPACE}})
    configmaps = api.resource("", "v1", "configmaps")
    for i in range(objects):
        api.create(configmaps, NAMESPACE, {"metadata": {"name": f"cm-{i:04d}"}, "data": {"blob": "x" * size}})


def test_a_burst_to_watchers_that_do_not_read_costs_a_bounded_buffer_each() -> None:
    # 8 MB to each watcher: twice what the kernel may keep in a socket's send buffer (tcp_wmem), so
    # the rest is the server's to hold
    watchers, objects, size = 20, 400, 20_000
    with ApiServer() as server, http_client(server.url) as http:
        fill(server, objects, size)
        watches = [StalledWatch(server.url, server.store.rv) for _ in range(watchers)]
        try:
            gc.collect()
            before = rss()
            with peak_rss() as peak:
                assert http.delete(PATH).status_code == 200
                threading.Event().wait(1.0)  # every watcher renders what it may before it waits
            grown = peak[0] - before
            wire = watchers * objects * size
            # before: each watcher joined the whole burst and held it in about three copies (about 2.5x
            # the wire); now a watcher holds one write, and the history the burst once (with its lines)
            assert grown < wire / 2, f"RSS grew {grown / 2**20:.0f} MiB for {wire / 2**20:.0f} MiB on the wire"
            for watch in watches:
                events = watch.events(objects + 1)  # and the namespace's kube-root-ca.crt
                assert [e["type"] for e in events] == ["DELETED"] * (objects + 1)
        finally:
            for watch in watches:
                watch.close()


def test_a_watcher_left_behind_by_the_history_gets_410_expired_and_its_stream_ends() -> None:
    with ApiServer(history_bytes=256 * 1024) as server:
        fill(server, 0, 0)
        watch = StalledWatch(server.url, server.store.rv)
        try:
            configmaps = server.api.resource("", "v1", "configmaps")
            for i in range(800):  # 16 MB: past what the kernel's socket buffers take
                blob = {"metadata": {"name": f"cm-{i:04d}"}, "data": {"x": "x" * 20_000}}
                server.api.create(configmaps, NAMESPACE, blob)
            events = watch.events(10_000)
        finally:
            watch.close()
    *added, error = events
    assert len(added) < 800
    assert [e["object"]["metadata"]["name"] for e in added] == [f"cm-{i:04d}" for i in range(len(added))]
    assert {e["type"] for e in added} <= {"ADDED"}
    status = error["object"]
    assert (error["type"], status["code"], status["reason"]) == ("ERROR", 410, "Expired")
    assert status["message"].startswith("too old resource version: ")
