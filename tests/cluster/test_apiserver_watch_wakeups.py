"""What a write costs the watch streams of other kinds: every write wakes every stream (`Waker`),
so a stream that finds nothing of its kind must go back to waiting without a task or a timer of its
own per wake-up (`asyncio.wait_for` made both), and its bookmarks and timeout still come on time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import ExitStack
from typing import Any

import httpx2
import pytest

from fixtures.apiserver import http_client
from runtimekit.cluster.apiserver import ApiServer

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
NODES = "/api/v1/nodes"


@pytest.fixture
def server() -> Iterator[ApiServer]:
    with ApiServer(bookmark_interval=0.5) as started:
        yield started


def count_tasks(server: ApiServer) -> Callable[[], int]:
    """Count the tasks the server's event loop starts from now on."""
    loop = server._loop
    assert loop is not None
    started = [0]

    def factory(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kw: Any) -> asyncio.Task[Any]:
        started[0] += 1
        return asyncio.Task(coro, loop=loop, **kw)

    async def install() -> None:
        loop.set_task_factory(factory)

    asyncio.run_coroutine_threadsafe(install(), loop).result(5)
    return lambda: started[0]


def write_configmaps(http: httpx2.Client, prefix: str, count: int) -> None:
    for i in range(count):
        assert http.post(CONFIGMAPS, json={"metadata": {"name": f"{prefix}-{i}"}}).status_code == 201
    time.sleep(0.2)  # the wake-ups run on the server's loop after the answers


def test_idle_watch_streams_start_no_task_when_other_kinds_are_written(server: ApiServer) -> None:
    with http_client(server.url) as http, ExitStack() as stack:
        tasks = count_tasks(server)
        write_configmaps(http, "alone", 20)
        alone = tasks()
        for _ in range(4):
            response = stack.enter_context(
                http.stream("GET", NODES, params={"watch": "true", "allowWatchBookmarks": "true"})
            )
            assert response.status_code == 200
        time.sleep(0.2)
        opened = tasks()
        write_configmaps(http, "watched", 20)
        # 4 streams x 20 writes woke 80 times: none of it may start a task (before: one per wake-up)
        assert tasks() - opened <= alone + 4


def test_a_stream_woken_by_other_kinds_still_gets_its_bookmark_and_ends_at_its_timeout(server: ApiServer) -> None:
    with http_client(server.url) as http, http_client(server.url) as writer:
        params = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": "2"}
        started = time.monotonic()
        with http.stream("GET", NODES, params=params, timeout=httpx2.Timeout(10.0)) as response:
            lines = response.iter_lines()
            write_configmaps(writer, "busy", 30)
            first = next(line for line in lines if line.strip())
            assert '"type":"BOOKMARK"' in first
            assert time.monotonic() - started < 1.5
            assert not [line for line in lines if line.strip() and '"BOOKMARK"' not in line]
        assert 1.8 <= time.monotonic() - started < 4.0
