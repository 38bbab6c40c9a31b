"""Watches over HTTP: initial state, resuming from a resourceVersion, bookmarks, 410 Expired in the
stream, sendInitialEvents, selector transitions, timeouts and table watches.

Each test opens the stream, makes its changes with a second client, then reads the events it
expects; every read has a timeout, so a missing event fails the test instead of hanging it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import aiohttp
import httpx2
import pytest

from fixtures.apiserver import http_client, make_pod
from runtimekit.cluster.apiserver import ApiServer

PODS = "/api/v1/namespaces/default/pods"
MERGE = {"Content-Type": "application/merge-patch+json"}


class Watch:
    def __init__(self, response: httpx2.Response) -> None:
        self.response = response
        self._lines = response.iter_lines()

    def next(self) -> dict[str, Any]:
        for line in self._lines:
            if line.strip():
                event: dict[str, Any] = json.loads(line)
                return event
        raise AssertionError("the watch ended")

    def take(self, count: int, *, skip_bookmarks: bool = True) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        while len(out) < count:
            event = self.next()
            if skip_bookmarks and event["type"] == "BOOKMARK":
                continue
            out.append((event["type"], event["object"]["metadata"].get("name", "")))
        return out

    def ended(self) -> bool:
        return all(not line.strip() for line in self._lines)


@contextmanager
def watch(
    http: httpx2.Client, path: str = PODS, headers: dict[str, str] | None = None, **params: str
) -> Iterator[Watch]:
    query = {"watch": "true", **params}
    with http.stream("GET", path, params=query, headers=headers, timeout=httpx2.Timeout(10.0)) as response:
        assert response.status_code == 200
        assert response.headers["Content-Type"] == "application/json"
        yield Watch(response)


def post(http: httpx2.Client, obj: dict[str, Any], path: str = PODS) -> dict[str, Any]:
    response = http.post(path, json=obj)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture
def writer(apiserver: ApiServer) -> Iterator[httpx2.Client]:
    with http_client(apiserver.url) as client:
        yield client


def test_watch_without_resource_version_starts_with_the_current_state(
    kube_http: httpx2.Client, writer: httpx2.Client
) -> None:
    post(writer, make_pod("a"))
    post(writer, make_pod("b"))
    with watch(kube_http) as events:
        assert events.take(2) == [("ADDED", "a"), ("ADDED", "b")]
        post(writer, make_pod("c"))
        writer.patch(f"{PODS}/a", json={"metadata": {"labels": {"x": "y"}}}, headers=MERGE)
        writer.delete(f"{PODS}/b")
        assert events.take(3) == [("ADDED", "c"), ("MODIFIED", "a"), ("DELETED", "b")]


def test_watch_resumes_from_a_list_resource_version(kube_http: httpx2.Client, writer: httpx2.Client) -> None:
    post(writer, make_pod("old"))
    rv = writer.get(PODS).json()["metadata"]["resourceVersion"]
    post(writer, make_pod("new"))
    writer.delete(f"{PODS}/old")
    post(writer, {"metadata": {"name": "cm"}}, "/api/v1/namespaces/default/configmaps")
    with watch(kube_http, resourceVersion=rv) as events:
        first = events.next()
        assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "new")
        deleted = events.next()
        assert (deleted["type"], deleted["object"]["metadata"]["name"]) == ("DELETED", "old")
        assert int(deleted["object"]["metadata"]["resourceVersion"]) > int(
            first["object"]["metadata"]["resourceVersion"]
        )


def test_resuming_from_the_last_event_misses_nothing(kube_http: httpx2.Client, writer: httpx2.Client) -> None:
    with watch(kube_http, resourceVersion=writer.get(PODS).json()["metadata"]["resourceVersion"]) as events:
        post(writer, make_pod("a"))
        last = events.next()["object"]["metadata"]["resourceVersion"]
    post(writer, make_pod("b"))
    with watch(kube_http, resourceVersion=last) as events:
        assert events.take(1) == [("ADDED", "b")]


@pytest.mark.parametrize("true", ["1", "true", "True"])
def test_bookmarks_carry_the_current_resource_version(
    kube_http: httpx2.Client, writer: httpx2.Client, true: str
) -> None:
    rv = writer.get(PODS).json()["metadata"]["resourceVersion"]
    post(writer, {"metadata": {"name": "cm"}}, "/api/v1/namespaces/default/configmaps")
    with watch(kube_http, watch=true, resourceVersion=rv, allowWatchBookmarks="True") as events:
        bookmark = events.next()
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["kind"] == "Pod"
    assert bookmark["object"]["apiVersion"] == "v1"
    assert int(bookmark["object"]["metadata"]["resourceVersion"]) == int(rv) + 1


def test_too_old_resource_version_is_an_error_event_with_410() -> None:
    with ApiServer(history_size=4) as server, http_client(server.url) as http:
        for i in range(6):
            post(http, make_pod(f"p{i}"))
        with watch(http, resourceVersion="1") as events:
            error = events.next()
            assert events.ended()
    assert error["type"] == "ERROR"
    status = error["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert status["message"].startswith("too old resource version: 1 (")


def test_too_large_resource_version(kube_http: httpx2.Client) -> None:
    with watch(kube_http, resourceVersion="999999") as events:
        error = events.next()
    assert error["type"] == "ERROR"
    assert error["object"]["code"] == 504
    assert error["object"]["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


def test_send_initial_events_ends_with_a_marked_bookmark(kube_http: httpx2.Client, writer: httpx2.Client) -> None:
    post(writer, make_pod("a"))
    post(writer, make_pod("b"))
    rv = writer.get(PODS).json()["metadata"]["resourceVersion"]
    params = {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "allowWatchBookmarks": "true"}
    with watch(kube_http, **params) as events:
        assert events.take(2, skip_bookmarks=False) == [("ADDED", "a"), ("ADDED", "b")]
        end = events.next()
        assert end["type"] == "BOOKMARK"
        assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert end["object"]["metadata"]["resourceVersion"] == rv
        post(writer, make_pod("c"))
        assert events.take(1) == [("ADDED", "c")]


def test_send_initial_events_needs_not_older_than(kube_http: httpx2.Client) -> None:
    response = kube_http.get(PODS, params={"watch": "1", "sendInitialEvents": "true"})
    assert response.status_code == 422
    assert {c["field"] for c in response.json()["details"]["causes"]} == {"resourceVersionMatch", "allowWatchBookmarks"}


def test_selector_transitions_are_added_and_deleted(kube_http: httpx2.Client, writer: httpx2.Client) -> None:
    post(writer, make_pod("p", labels={"tier": "web"}))
    rv = writer.get(PODS).json()["metadata"]["resourceVersion"]
    with watch(kube_http, resourceVersion=rv, labelSelector="tier=web") as events:
        writer.patch(f"{PODS}/p", json={"metadata": {"labels": {"tier": "db"}}}, headers=MERGE)
        writer.patch(f"{PODS}/p", json={"metadata": {"labels": {"tier": "web", "x": "1"}}}, headers=MERGE)
        writer.patch(f"{PODS}/p", json={"metadata": {"labels": {"x": "2"}}}, headers=MERGE)
        post(writer, make_pod("other", labels={"tier": "db"}))
        writer.delete(f"{PODS}/p")
        assert events.take(4) == [("DELETED", "p"), ("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "p")]


def test_deleted_on_selector_change_carries_the_old_content_at_the_new_version(
    kube_http: httpx2.Client, writer: httpx2.Client
) -> None:
    post(writer, make_pod("p", labels={"tier": "web"}))
    rv = writer.get(PODS).json()["metadata"]["resourceVersion"]
    with watch(kube_http, resourceVersion=rv, labelSelector="tier=web") as events:
        changed = writer.patch(f"{PODS}/p", json={"metadata": {"labels": {"tier": "db"}}}, headers=MERGE).json()
        gone = events.next()["object"]
    assert gone["metadata"]["labels"] == {"tier": "web"}
    assert gone["metadata"]["resourceVersion"] == changed["metadata"]["resourceVersion"]


def test_field_selected_and_namespaced_watch(kube_http: httpx2.Client, writer: httpx2.Client) -> None:
    post(writer, {"metadata": {"name": "other"}}, "/api/v1/namespaces")
    rv = writer.get(PODS).json()["metadata"]["resourceVersion"]
    with watch(kube_http, resourceVersion=rv, fieldSelector="metadata.name=x") as events:
        post(writer, make_pod("y"))
        post(writer, make_pod("x", namespace="other"), "/api/v1/namespaces/other/pods")
        post(writer, make_pod("x"))
        first = events.next()
    assert (first["type"], first["object"]["metadata"]["namespace"]) == ("ADDED", "default")


def test_legacy_watch_path_for_one_object(kube_http: httpx2.Client, writer: httpx2.Client) -> None:
    post(writer, make_pod("x"))
    post(writer, make_pod("y"))
    with kube_http.stream("GET", "/api/v1/watch/namespaces/default/pods/x", timeout=httpx2.Timeout(10.0)) as response:
        events = Watch(response)
        assert events.take(1) == [("ADDED", "x")]
        writer.patch(f"{PODS}/y", json={"metadata": {"labels": {"a": "b"}}}, headers=MERGE)
        writer.patch(f"{PODS}/x", json={"metadata": {"labels": {"a": "b"}}}, headers=MERGE)
        assert events.take(1) == [("MODIFIED", "x")]


def test_timeout_seconds_ends_the_stream(kube_http: httpx2.Client) -> None:
    with watch(kube_http, resourceVersion="1", timeoutSeconds="1") as events:
        assert events.ended()


def test_table_watch_sends_headers_once(kube_http: httpx2.Client, writer: httpx2.Client) -> None:
    post(writer, make_pod("a"))
    accept = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
    with watch(kube_http, headers=accept) as events:
        first = events.next()
        post(writer, make_pod("b"))
        second = events.next()
    assert first["object"]["kind"] == "Table"
    assert first["object"]["columnDefinitions"]
    assert first["object"]["rows"][0]["cells"][0] == "a"
    assert second["object"]["columnDefinitions"] is None
    assert second["object"]["rows"][0]["cells"][0] == "b"


def test_writes_from_other_threads_wake_watchers(apiserver: ApiServer, kube_http: httpx2.Client) -> None:
    rv = kube_http.get(PODS).json()["metadata"]["resourceVersion"]
    pods = apiserver.api.resource("", "v1", "pods")
    with watch(kube_http, resourceVersion=rv) as events:
        apiserver.api.create(pods, "default", make_pod("direct"))
        assert events.take(1) == [("ADDED", "direct")]


def test_many_watchers_each_receive_every_event_in_order(apiserver: ApiServer) -> None:
    pods = apiserver.api.resource("", "v1", "pods")
    start = str(apiserver.store.rv)

    async def follow(session: aiohttp.ClientSession, count: int) -> list[str]:
        params = {"watch": "1", "resourceVersion": start}
        names: list[str] = []
        async with session.get(f"{apiserver.url}{PODS}", params=params) as response:
            async for line in response.content:
                names.append(json.loads(line)["object"]["metadata"]["name"])
                if len(names) == count:
                    break
        return names

    async def run() -> list[list[str]]:
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            early = [asyncio.create_task(follow(session, 200)) for _ in range(10)]
            await asyncio.sleep(0)
            await asyncio.to_thread(
                lambda: [apiserver.api.create(pods, "default", make_pod(f"p{i:03d}")) for i in range(200)]
            )
            late = [asyncio.create_task(follow(session, 200)) for _ in range(10)]
            return list(await asyncio.gather(*early, *late))

    expected = [f"p{i:03d}" for i in range(200)]
    assert all(names == expected for names in asyncio.run(run()))


def test_stop_then_start_is_a_restart_that_keeps_objects_port_and_history(apiserver: ApiServer) -> None:
    url = apiserver.url
    with http_client(url) as http:
        post(http, make_pod("before"))
        rv = http.get(PODS).json()["metadata"]["resourceVersion"]
    apiserver.stop()
    with http_client(url) as http, pytest.raises(httpx2.ConnectError):
        http.get(PODS)
    apiserver.start()
    assert apiserver.url == url
    with http_client(url) as http:
        assert [p["metadata"]["name"] for p in http.get(PODS).json()["items"]] == ["before"]
        post(http, make_pod("after"))
        with watch(http, resourceVersion=rv) as events:
            assert events.take(1) == [("ADDED", "after")]
