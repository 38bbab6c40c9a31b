"""A burst of writes reaches a watch stream in one write: the `Waker` wakes a stream two turns of the
event loop after a write on the loop's thread, so the requests that came in the same turn finish
their writes first and the stream sends their events together (one send and one read at each end
instead of one per event, which the API server and every informer paid for each pod)."""

from __future__ import annotations

import asyncio
import time

from fixtures.apiserver import make_pod
from runtimekit.cluster.apiserver.listing import Filter
from runtimekit.cluster.apiserver.operations import Api
from runtimekit.cluster.apiserver.resources import ResourceTable
from runtimekit.cluster.apiserver.store import Store
from runtimekit.cluster.apiserver.tables import TableMaker
from runtimekit.cluster.apiserver.watch import Waker, WatchRequest, WatchStream
from runtimekit.kube import jsoncodec
from runtimekit.kube.objects import JsonObject
from runtimekit.protocol import KitProtocol


def test_writes_of_consecutive_loop_turns_reach_a_watcher_in_one_write() -> None:
    async def scenario() -> list[bytes]:
        maker = TableMaker(KitProtocol.default(), time.time)
        table = ResourceTable.builtin()
        store = Store(facts=maker.facts)
        api = Api(table, store)
        pods = api.resource("", "v1", "pods")
        waker = Waker(asyncio.get_running_loop())
        store.add_listener(waker.notify)
        writes: list[bytes] = []

        async def write(data: bytes) -> None:
            writes.append(data)

        request = WatchRequest(pods, Filter.compile(pods, "default", {}), store.rv)
        task = asyncio.create_task(WatchStream(api, maker, waker, request, write).run())
        for _ in range(5):  # the stream reaches its wait
            await asyncio.sleep(0)
        # two requests answered in consecutive turns of the loop, as a create and the next one are
        store.put(pods, jsoncodec.loads(jsoncodec.dumps(make_pod("a"))), None)
        await asyncio.sleep(0)
        store.put(pods, jsoncodec.loads(jsoncodec.dumps(make_pod("b"))), None)
        for _ in range(100):
            if sum(data.count(b"\n") for data in writes) >= 2:
                break
            await asyncio.sleep(0)
        waker.close()
        await asyncio.wait_for(task, 5)
        return writes

    writes = asyncio.run(scenario())
    assert len(writes) == 1  # before: the first pod's event alone, then the second's
    events: list[JsonObject] = [jsoncodec.loads(line) for line in writes[0].splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "a"), ("ADDED", "b")]


def test_a_write_wakes_its_watcher_within_a_few_turns_of_an_idle_loop() -> None:
    async def scenario() -> int:
        loop = asyncio.get_running_loop()
        waker = Waker(loop)
        waiting = waker.wait("pods")
        waker.notify("pods")
        turns = 0
        while not waiting.done():
            await asyncio.sleep(0)
            turns += 1
            assert turns < 10
        return turns

    assert asyncio.run(scenario()) <= 3


def test_a_write_after_the_server_stopped_does_not_fail_on_its_closed_loop() -> None:
    # a restarted server's loop thread may get the stopped one's thread id; its writes must still succeed
    loop = asyncio.new_event_loop()
    waker = Waker(loop)
    loop.close()
    waker.notify("pods")  # before: RuntimeError("Event loop is closed"), a 500 to the client
