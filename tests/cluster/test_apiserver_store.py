"""The store without HTTP: the resourceVersion-indexed history ring, key order under any insertion
order, snapshots as of an older resourceVersion, field indexes, and serialise-once serving."""

from __future__ import annotations

import json
import random

import pytest

from fixtures.apiserver import http_client, make_pod
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.apiserver.errors import ApiError
from runtimekit.cluster.apiserver.resources import BUILTIN, ResourceInfo
from runtimekit.cluster.apiserver.store import ADDED, DELETED, MODIFIED, Store

PODS = next(info for info in BUILTIN if info.plural == "pods" and info.group == "")
EVENTS_V1 = next(info for info in BUILTIN if info.group == "events.k8s.io")


def no_facts(_info: ResourceInfo, _obj: object) -> tuple[object, ...]:
    return ((), None)


def pod(name: str, node: str = "", namespace: str = "default") -> dict[str, object]:
    return make_pod(name, namespace=namespace, node=node or None)


def test_history_is_indexed_by_resource_version_and_bounded() -> None:
    store = Store(facts=no_facts, history_size=3)
    a = store.put(PODS, pod("a"), None)
    b = store.put(PODS, pod("b"), None)
    a2 = store.put(PODS, {**pod("a"), "metadata": {"name": "a", "namespace": "default", "labels": {"x": "1"}}}, a)
    store.remove(PODS, b)
    assert (a.rv, b.rv, a2.rv, store.rv) == (1, 2, 3, 4)
    assert [(e.rv, e.type, e.new.name) for e in store.events_after(1, 10)] == [
        (2, ADDED, "b"),
        (3, MODIFIED, "a"),
        (4, DELETED, "b"),
    ]
    assert store.events_after(2, 1)[0].old is a
    with pytest.raises(ApiError) as caught:
        store.events_after(0, 10)
    assert (caught.value.code, caught.value.reason) == (410, "Expired")
    assert store.events_after(4, 10) == []


def big_pod(name: str, version: int, size: int) -> dict[str, object]:
    body = pod(name)
    body["metadata"] = {"name": name, "namespace": "default", "annotations": {"blob": str(version) * size}}
    return body


def test_history_is_bounded_in_bytes_and_the_versions_past_it_answer_410() -> None:
    """Versions of a big object are not all kept (100 updates of a 1.4 MB object kept 142 MB, after
    its deletion too): the history keeps what its byte bound holds, and the newest event always."""
    store = Store(facts=no_facts, history_bytes=1_000_000)
    current = store.put(PODS, big_pod("big", 0, 100_000), None)
    for version in range(1, 30):
        current = store.put(PODS, big_pod("big", version % 10, 100_000), current)
    store.remove(PODS, current)
    history = store.history
    assert history.bytes <= 1_000_000
    assert history.last == store.rv == 31
    assert 20 < history.oldest <= 31
    with pytest.raises(ApiError) as caught:
        store.events_after(history.oldest - 2, 10)
    assert (caught.value.code, caught.value.reason) == (410, "Expired")
    assert [e.rv for e in store.events_after(history.oldest - 1, 100)] == list(range(history.oldest, 32))
    store.put(PODS, big_pod("bigger", 1, 1_200_000), None)  # alone past the bound: kept, the rest let go
    assert (history.oldest, history.last) == (32, 32)


def test_watch_lines_are_shared_counted_and_forgotten_before_any_event() -> None:
    store = Store(facts=no_facts, history_bytes=200_000)
    for i in range(10):
        store.put(PODS, big_pod(f"p{i}", 1, 10_000), None)
    events = store.events_after(0, 10)
    counted = store.history.bytes
    line = b"x" * 20_000
    assert store.share_line(events[0], "ADDED v1", line) is line
    assert store.share_line(events[0], "ADDED v1", b"another watcher's copy") is line
    assert store.history.bytes == counted + len(line)
    for event in events[1:]:
        store.share_line(event, "ADDED v1", b"y" * 20_000)  # past the bound: the first lines go first
    assert store.history.bytes <= 200_000
    assert store.history.oldest == 1, "lines are a cache: no event is let go for them"
    assert events[0].lines == {}
    assert events[-1].lines


def test_key_order_survives_any_insertion_and_deletion_order() -> None:
    store = Store(facts=no_facts)
    rng = random.Random(7)
    names = [f"p{i:03d}" for i in range(200)]
    rng.shuffle(names)
    stored = {name: store.put(PODS, pod(name, namespace=rng.choice(["a", "b"])), None) for name in names}
    for name in names[:50]:
        store.remove(PODS, stored.pop(name))
    expected = sorted(s.key for s in stored.values())
    assert [s.key for s in store.page(PODS, None, None).items] == expected
    assert [s.key for s in store.page(PODS, "a", None).items] == [k for k in expected if k[0] == "a"]


def test_page_as_of_an_older_resource_version() -> None:
    store = Store(facts=no_facts)
    a = store.put(PODS, pod("a"), None)
    store.put(PODS, pod("b"), None)
    then = store.rv
    store.remove(PODS, a)
    store.put(PODS, pod("c"), None)
    assert [s.name for s in store.page(PODS, None, None, at_rv=then).items] == ["a", "b"]
    assert [s.name for s in store.page(PODS, None, None).items] == ["b", "c"]
    page = store.page(PODS, None, None, at_rv=then, limit=1)
    assert (page.next_start, page.rv) == (("default", "a"), then)


def test_node_index_follows_rebinding_and_deletion() -> None:
    store = Store(facts=no_facts)
    p = store.put(PODS, pod("p", node="n1"), None)
    store.put(PODS, pod("q", node="n1"), None)
    assert [s.name for s in store.page(PODS, None, None, pinned=("spec.nodeName", "n1")).items] == ["p", "q"]
    moved = store.put(PODS, pod("p", node="n2"), p)
    assert [s.name for s in store.page(PODS, None, None, pinned=("spec.nodeName", "n1")).items] == ["q"]
    store.remove(PODS, moved)
    assert store.page(PODS, None, None, pinned=("spec.nodeName", "n2")).items == []


def test_each_version_is_serialised_once_for_every_reader(apiserver: ApiServer) -> None:
    pods = apiserver.api.resource("", "v1", "pods")
    stored = apiserver.api.create(pods, "default", make_pod("p"))
    assert apiserver.api.served(pods, stored) is stored.raw
    events = apiserver.api.resource("events.k8s.io", "v1", "events")
    core = apiserver.api.resource("", "v1", "events")
    event = apiserver.api.create(core, "default", {"metadata": {"name": "e"}, "involvedObject": {"name": "p"}})
    first = apiserver.api.served(events, event)
    assert apiserver.api.served(events, event) is first, "a converted view is encoded once per version"


@pytest.mark.slow
def test_a_watch_from_an_old_version_replays_twenty_thousand_events_in_order(apiserver: ApiServer) -> None:
    """The history a watch resumes from holds 20,000 creations, each delivered once and in order (the
    rate is benchmarks/bench_apiserver.py's business)."""
    pods = apiserver.api.resource("", "v1", "pods")
    start = apiserver.store.rv
    for i in range(20_000):
        apiserver.api.create(pods, "default", make_pod(f"p{i:05d}"))
    names: list[str] = []
    versions: list[int] = []
    with http_client(apiserver.url) as http:
        params = {"watch": "1", "resourceVersion": str(start)}
        with http.stream("GET", "/api/v1/namespaces/default/pods", params=params) as response:
            for line in response.iter_lines():
                if not line:
                    continue
                event = json.loads(line)
                assert event["type"] == "ADDED"
                names.append(event["object"]["metadata"]["name"])
                versions.append(int(event["object"]["metadata"]["resourceVersion"]))
                if len(names) == 20_000:
                    break
    assert names == [f"p{i:05d}" for i in range(20_000)]
    assert versions == sorted(set(versions))
    assert versions[0] > start
