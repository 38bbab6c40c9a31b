"""The embedded API server's HTTP front (aiohttp's low-level server, no router): what any HTTP/1.1
server in front of kube-apiserver does stays as it was with an aiohttp Application. `Expect:
100-continue` is answered before the body is sent (curl sends it for bodies over 1 KiB and waits a
second for the answer), an unknown `Expect` is 417 as Go's net/http answers it, and every path reaches
the API's own routing (404 Status or plain 404 as kube-apiserver gives them)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx2
import pytest

from fixtures.apiserver import http_client
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.apiserver.errors import ApiError
from runtimekit.cluster.apiserver.routing import negotiate, parse_path


@pytest.fixture(scope="module")
def server() -> Iterator[ApiServer]:
    with ApiServer(seed=3) as started:
        yield started


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    return socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=5)


def _read_until(sock: socket.socket, marker: bytes, got: bytes = b"") -> bytes:
    while marker not in got:
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def _post_head(path: str, body: bytes, expect: str) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nExpect: {expect}\r\n\r\n"
    ).encode()


def test_expect_100_continue_is_answered_before_the_body(server: ApiServer) -> None:
    body = json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "expect"}, "data": {"k": "v" * 2000}}
    )
    with _connect(server.url) as sock:
        sock.sendall(_post_head("/api/v1/namespaces/default/configmaps", body.encode(), "100-continue"))
        interim = _read_until(sock, b"\r\n\r\n")  # sent before the body: the server asked for it
        assert interim.startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(body.encode())
        answer = _read_until(sock, b"}", interim[len(b"HTTP/1.1 100 Continue\r\n\r\n") :])
    assert answer.startswith(b"HTTP/1.1 201 ")
    assert server.api.store.get(server.api.resource("", "v1", "configmaps"), "default", "expect") is not None


def test_an_unknown_expectation_is_refused_with_417(server: ApiServer) -> None:
    with _connect(server.url) as sock:
        sock.sendall(_post_head("/api/v1/namespaces/default/configmaps", b"{}", "something-else"))
        answer = _read_until(sock, b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 417 ")


def test_every_path_reaches_the_api_routing(server: ApiServer) -> None:
    with http_client(server.url) as client:
        assert client.get("/healthz").text == "ok"
        missing = client.get("/api/v1/namespaces/default/configmaps/none")
        assert missing.status_code == 404
        assert missing.json()["reason"] == "NotFound"
        plain = client.get("/no/such/path")
        assert (plain.status_code, plain.text) == (404, "404 page not found\n")
        created = client.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "front"}})
        assert created.status_code == 201
        assert created.headers["Content-Type"] == "application/json"


def test_a_body_over_the_limit_is_413(server: ApiServer) -> None:
    big = b'{"metadata":{"name":"big"},"data":{"k":"' + b"x" * (3 * 2**20 + 1) + b'"}}'
    with http_client(server.url) as client:
        try:
            answer = client.post("/api/v1/namespaces/default/configmaps", content=big)
        except httpx2.HTTPError:  # the server may close before the whole body is sent
            return
    assert answer.status_code == 413


def test_a_binding_is_answered_with_kube_apiservers_success_status(server: ApiServer) -> None:
    with http_client(server.url) as client:
        pod = {"metadata": {"name": "bound"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        assert client.post("/api/v1/namespaces/default/pods", json=pod).status_code == 201
        binding = {"metadata": {"name": "bound"}, "target": {"kind": "Node", "name": "node-1"}}
        for _ in range(2):  # the second is refused: the answer is no constant
            answer = client.post("/api/v1/namespaces/default/pods/bound/binding", json=binding)
            if answer.status_code == 201:
                assert (
                    answer.content == b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}'
                )
            else:
                assert answer.status_code == 409
                assert answer.json()["reason"] == "Conflict"
        assert client.get("/api/v1/namespaces/default/pods/bound").json()["spec"]["nodeName"] == "node-1"


PATHS = [
    "/api",
    "/api/v1",
    "/apis",
    "/apis/apps",
    "/apis/apps/v1",
    "/api/v1/pods",
    "/api/v1/namespaces/default/pods",
    "/api/v1/namespaces/default/pods/p1/binding",
    "/api/v1/namespaces/default",
    "/api/v1/namespaces/default/status",
    "/api/v1/watch/namespaces/default/pods/p1",
    "/apis/apps/v1/namespaces/d/deployments/x/scale",
    "//api//v1//nodes/",
    "/api/v1/a/b/c/d/e",
    "/healthz",
    "/",
]


def test_the_remembered_path_answers_are_the_parsed_ones() -> None:
    for _ in range(2):  # the second round is answered from the cache
        for path in PATHS:
            assert parse_path(path) == parse_path.__wrapped__(path)


def test_an_unacceptable_accept_header_is_refused_every_time() -> None:
    for _ in range(2):
        with pytest.raises(ApiError) as refused:
            negotiate("application/xml")
        assert refused.value.code == 406
    table = "application/json;as=Table;v=v1;g=meta.k8s.io, application/json"
    assert negotiate(table) == negotiate.__wrapped__(table)
    assert negotiate("") == negotiate.__wrapped__("")
