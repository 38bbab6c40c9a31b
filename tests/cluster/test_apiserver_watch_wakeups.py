"""What a write costs the watch streams of other kinds: a write wakes only the streams of its kind
(`Waker`), with no task or timer per wake-up (`asyncio.wait_for` made both, for every stream on every
write); a stream left asleep while other kinds are written still sends its bookmarks on time with
the current resourceVersion, ends at its timeout, and is not expired for other kinds' events the
history let go (`History.after_of`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import ExitStack
from typing import Any

import httpx2
import pytest

from fixtures.apiserver import http_client, make_pod
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.apiserver.errors import ApiError
from runtimekit.cluster.apiserver.resources import BUILTIN, ResourceInfo
from runtimekit.cluster.apiserver.store import Store

PODS = next(info for info in BUILTIN if info.plural == "pods" and info.group == "")
CONFIGMAPS_INFO = next(info for info in BUILTIN if info.plural == "configmaps")
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


def test_a_bookmark_after_writes_of_other_kinds_carries_the_current_resource_version(server: ApiServer) -> None:
    with http_client(server.url) as http, http_client(server.url) as writer:
        params = {"watch": "true", "allowWatchBookmarks": "true"}
        with http.stream("GET", NODES, params=params, timeout=httpx2.Timeout(10.0)) as response:
            lines = response.iter_lines()
            write_configmaps(writer, "later", 5)
            current = writer.get(CONFIGMAPS).json()["metadata"]["resourceVersion"]
            first = next(line for line in lines if line.strip())
        assert '"type":"BOOKMARK"' in first
        assert f'"resourceVersion":"{current}"' in first


def no_facts(_info: ResourceInfo, _obj: object) -> tuple[object, ...]:
    return ((), None)


def test_a_reader_of_one_kind_is_expired_only_when_an_event_of_its_kind_is_gone() -> None:
    store = Store(facts=no_facts, history_size=3)
    store.put(PODS, make_pod("a"), None)  # rv 1
    for i in range(4):  # rv 2..5: rv 1 and 2 leave the history
        store.put(CONFIGMAPS_INFO, {"metadata": {"name": f"c{i}", "namespace": "default"}}, None)
    with pytest.raises(ApiError) as caught:
        store.events_after(1, 10)
    assert caught.value.code == 410
    assert [e.rv for e in store.events_of(PODS.storage, 1, 10)] == [3, 4, 5]  # no pod event lost
    with pytest.raises(ApiError) as caught:
        store.events_of(PODS.storage, 0, 10)  # the pod written at rv 1 is gone
    assert caught.value.code == 410
    with pytest.raises(ApiError) as caught:
        store.events_of(CONFIGMAPS_INFO.storage, 1, 10)  # the ConfigMap of rv 2 is gone
    assert caught.value.code == 410


def test_a_reader_of_versions_from_before_the_history_began_is_expired() -> None:
    store = Store(facts=no_facts, history_size=3, start_rv=10)
    for i in range(5):
        store.put(CONFIGMAPS_INFO, {"metadata": {"name": f"c{i}", "namespace": "default"}}, None)
    with pytest.raises(ApiError) as caught:
        store.events_of(PODS.storage, 5, 10)  # what happened before rv 10 is not known
    assert caught.value.code == 410
