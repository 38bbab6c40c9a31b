"""The API client's HTTP/1.1 connection (`runtimekit.kube.wire`) against a server that answers with
scripted bytes: Content-Length and chunked bodies, `Connection: close`, a connection closed before any
answer (retried for idempotent requests on a fresh one), an answer that is not HTTP, a server that
stops answering (the request times out after the timeout it was given), and a watch whose events
arrive split across chunks; then against the embedded API server through KubeHttp."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube.errors import ExpiredError, KubeError, UnavailableError
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.wire import Connection

Reply = Callable[[bytes], list[bytes | None]]  # request bytes -> what to send (None: close)


class ScriptedServer:
    """Accepts connections; for each request read, sends the pieces `reply` gives (None closes the
    connection). Keeps the raw requests and how many connections were made."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.requests: list[bytes] = []
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            buffer = b""
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                buffer += data
                head, sep, rest = buffer.partition(b"\r\n\r\n")
                if not sep:
                    continue
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                if len(rest) < length:
                    continue
                request, buffer = head + sep + rest[:length], rest[length:]
                self.requests.append(request)
                for piece in self.reply(request):
                    if piece is None:
                        return
                    conn.sendall(piece)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Reply], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(reply: Reply) -> ScriptedServer:
        servers.append(ScriptedServer(reply))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def ok(body: bytes, *extra: str) -> bytes:
    head = ["HTTP/1.1 200 OK", "Content-Type: application/json", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def chunked(*chunks: bytes) -> list[bytes | None]:
    out: list[bytes | None] = [
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    ]
    out += [b"%x\r\n%s\r\n" % (len(c), c) for c in chunks]
    out.append(b"0\r\n\r\n")
    return out


def test_a_request_goes_out_whole_and_the_connection_is_kept(serve: Callable[[Reply], ScriptedServer]) -> None:
    server = serve(lambda request: [ok(b'{"n": 1}')])
    conn = Connection("127.0.0.1", server.port, None, 5.0)
    first = conn.exchange("POST", "/a?x=1", {"Accept": "application/json"}, b'{"k": "v"}', 5.0)
    second = conn.exchange("GET", "/b", {}, None, 5.0)
    assert (first.status, first.reason, first.content, first.keep_alive) == (200, "OK", b'{"n": 1}', True)
    assert second.content == b'{"n": 1}'
    assert server.connections == 1
    post, get = server.requests
    assert post.startswith(b"POST /a?x=1 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % server.port)
    assert b"Content-Length: 10\r\n" in post
    assert post.endswith(b'\r\n\r\n{"k": "v"}')
    assert b"Content-Length" not in get


def test_a_chunked_answer_is_joined_and_connection_close_is_honoured(serve: Callable[[Reply], ScriptedServer]) -> None:
    replies = iter([chunked(b'{"items"', b": []}"), [ok(b"{}", "Connection: close")], [ok(b"{}")]])
    server = serve(lambda request: next(replies))
    conn = Connection("127.0.0.1", server.port, None, 5.0)
    assert conn.exchange("GET", "/x", {}, None, 5.0).content == b'{"items": []}'
    closing = conn.exchange("GET", "/x", {}, None, 5.0)
    assert not closing.keep_alive
    assert conn.sock is None
    conn.exchange("GET", "/x", {}, None, 5.0)  # opens a new connection
    assert server.connections == 2


def test_a_kept_connection_closed_before_any_answer_is_retried_for_idempotent_requests(
    serve: Callable[[Reply], ScriptedServer],
) -> None:
    answers = iter([[ok(b"{}")], [None], [ok(b'{"again": true}')], [ok(b"{}")], [None]])
    server = serve(lambda request: next(answers))
    http = KubeHttp.connect(server=f"http://127.0.0.1:{server.port}", timeout=5)
    assert http.get("/one") == {}
    assert http.get("/two") == {"again": True}  # the server dropped the kept connection: sent again
    assert http.get("/three") == {}
    with pytest.raises(UnavailableError):  # a POST is not sent twice
        http.post("/four", {})
    assert server.connections == 2  # /one on the first, the rest on the second


def test_an_answer_that_is_not_http_is_an_http_exception(serve: Callable[[Reply], ScriptedServer]) -> None:
    server = serve(lambda request: [b"SSH-2.0-OpenSSH_9.2\r\n\r\n", None])
    conn = Connection("127.0.0.1", server.port, None, 5.0)
    with pytest.raises(http.client.HTTPException):
        conn.exchange("GET", "/", {}, None, 5.0)
    assert conn.sock is None


def test_a_server_that_does_not_answer_times_out_after_the_requests_timeout(
    serve: Callable[[Reply], ScriptedServer],
) -> None:
    # a silent server, a kept connection that answers part of a body then stops, then answers again
    answers = iter([[], [ok(b"{}")], [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{"], [ok(b"{}")]])
    server = serve(lambda request: next(answers))
    conn = Connection("127.0.0.1", server.port, None, 5.0)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        conn.exchange("GET", "/silent", {}, None, 0.3)
    assert 0.25 <= time.monotonic() - started < 3.0
    assert conn.sock is None  # closed: the next request opens a new connection
    assert conn.exchange("GET", "/x", {}, None, 5.0).content == b"{}"
    started = time.monotonic()
    with pytest.raises(TimeoutError):  # the kept connection's timeout follows the request's
        conn.exchange("GET", "/partial", {}, None, 0.3)
    assert 0.25 <= time.monotonic() - started < 3.0
    http = KubeHttp.connect(server=f"http://127.0.0.1:{server.port}", timeout=5)
    assert http.get("/again") == {}
    assert server.connections == 3


def test_a_timeout_through_kubehttp_is_an_unavailable_error(serve: Callable[[Reply], ScriptedServer]) -> None:
    server = serve(lambda request: [])
    http = KubeHttp.connect(server=f"http://127.0.0.1:{server.port}", timeout=0.3)
    started = time.monotonic()
    with pytest.raises(UnavailableError):
        http.post("/bind", {})
    assert 0.25 <= time.monotonic() - started < 3.0


def test_watch_events_split_across_chunks_arrive_whole(serve: Callable[[Reply], ScriptedServer]) -> None:
    events = (
        b'{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n{"type":"MODIFIED","object":{"metadata":{"name":"b"}}}\n'
    )
    cut = [events[:7], events[7:60], events[60:61], events[61:]]
    server = serve(lambda request: chunked(*cut))
    http = KubeHttp.connect(server=f"http://127.0.0.1:{server.port}", timeout=5)
    seen = [(e.type, e.object["metadata"]["name"]) for e in http.watch("/api/v1/pods", "5", timeout_seconds=10)]
    assert seen == [("ADDED", "a"), ("MODIFIED", "b")]
    assert b"resourceVersion=5" in server.requests[0]
    assert b"watch=true" in server.requests[0]


def test_a_watch_error_event_and_a_refused_watch_are_kube_errors(serve: Callable[[Reply], ScriptedServer]) -> None:
    gone = b'{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}}\n'
    replies = iter(
        [
            chunked(gone),
            [
                b"HTTP/1.1 403 Forbidden\r\nContent-Length: 48\r\n\r\n",
                b'{"code":403,"reason":"Forbidden","message":"no"}',
            ],
        ]
    )
    server = serve(lambda request: next(replies))
    http = KubeHttp.connect(server=f"http://127.0.0.1:{server.port}", timeout=5)
    with pytest.raises(ExpiredError):
        list(http.watch("/api/v1/pods", "1"))
    with pytest.raises(KubeError) as refused:
        list(http.watch("/api/v1/pods", "1"))
    assert (refused.value.code, refused.value.reason) == (403, "Forbidden")


def test_requests_and_a_watch_against_the_embedded_api_server() -> None:
    server = ApiServer(port=0).start()
    try:
        http = KubeHttp.connect(server=server.url, timeout=10)
        _, version = http.list("/api/v1/namespaces/default/pods")
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        }
        http.post("/api/v1/namespaces/default/pods", pod)
        watch = http.watch("/api/v1/namespaces/default/pods", version, timeout_seconds=5)
        first = next(watch)
        assert (first.type, first.object["metadata"]["name"]) == ("ADDED", "p")
        watch.close()
    finally:
        server.stop()
