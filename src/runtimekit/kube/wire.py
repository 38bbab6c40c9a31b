"""One keep-alive HTTP/1.1 connection to an API server: a request goes out in one write, its answer
is read through httptools (llhttp, the parser Node.js uses: Content-Length, chunked bodies, keep-alive
and `Connection: close` as the protocol has them).

The standard library's `http.client` parses every answer's headers with the `email` package and
writes a body as a second piece, so a second TCP segment for the server to read. Sending the same
binding POSTs to the embedded API server in a process of its own (benchmarks/bench_kube_http.py,
the development VM), a client spends 57-61 µs of CPU per request through `KubeHttp` over this
connection, JSON included, and 118-127 µs through `http.client`; the answer comes back in 340 µs
instead of 411. A scheduler binding a thousand pods a second spends that on every pod.

Failures are the standard library's kinds, so callers treat both alike: `OSError` when the server
cannot be reached or the socket breaks (`http.client.RemoteDisconnected`, a ConnectionError, when
a kept-alive connection was closed before any answer; `TimeoutError` when a read or write waited
longer than the timeout), `http.client.HTTPException` for an answer that is not HTTP. Not
thread-safe: one connection per thread (`PlainHttp` keeps them).

A plain TCP connection's socket blocks, its timeout the kernel's (SO_RCVTIMEO, SO_SNDTIMEO, set
only when the timeout changes): a socket with a Python timeout polls before every send and every
read, and each of those calls, as each `settimeout`, lets go of the GIL, which in a scheduler busy
on another thread costs a wake-up of a waiting thread and often a switch. A binding's request and
answer take two calls that way instead of five. A TLS connection keeps Python's timeout (set only
when it changes): the ssl module polls only when the socket has nothing to read.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

import httptools

READ_SIZE = 1 << 16


@dataclass
class _Answer:
    """What the parser reports of one response."""

    reason: str = ""
    parts: list[bytes] = field(default_factory=list)
    done: bool = False
    status: int = 0
    keep_alive: bool = False
    parser: httptools.HttpResponseParser | None = None

    # httptools' callbacks
    def on_status(self, status: bytes) -> None:
        self.reason += status.decode("latin-1")

    def on_headers_complete(self) -> None:  # the parser forgets both once the message is complete
        assert self.parser is not None
        self.status = int(self.parser.get_status_code())
        self.keep_alive = bool(self.parser.should_keep_alive())

    def on_body(self, body: bytes) -> None:
        self.parts.append(body)

    def on_message_complete(self) -> None:
        self.done = True


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str
    content: bytes
    keep_alive: bool


class Connection:
    """A connection to `host:port`, TLS when `context` is given; opened on first use and after close."""

    __slots__ = ("__weakref__", "_host_header", "_kernel_timeout", "context", "host", "port", "sock", "timeout")

    def __init__(self, host: str, port: int, context: ssl.SSLContext | None, timeout: float) -> None:
        self.host, self.port, self.context, self.timeout = host, port, context, timeout
        self.sock: socket.socket | None = None
        self._kernel_timeout = 0.0  # the plain socket's SO_RCVTIMEO and SO_SNDTIMEO (0: not set yet)
        name = f"[{host}]" if ":" in host else host
        default = 443 if context is not None else 80
        self._host_header = name if port == default else f"{name}:{port}"

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.context is not None:
                sock = self.context.wrap_socket(sock, server_hostname=self.host)
            else:
                sock.settimeout(None)  # blocking: the kernel times reads and writes out (`_timeout`)
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self._kernel_timeout = 0.0

    def _timeout(self, sock: socket.socket, timeout: float) -> None:
        """Let a read or a write of `sock` wait `timeout` seconds at most (see the module docstring)."""
        if self.context is not None or timeout <= 0:  # TLS (or no wait at all): Python's timeout
            if sock.gettimeout() != timeout:
                sock.settimeout(timeout)
            return
        if sock.gettimeout() is not None:  # after a timeout of Python's: blocking again
            sock.settimeout(None)
            self._kernel_timeout = 0.0
        if timeout != self._kernel_timeout:
            seconds = int(timeout)
            micros = min(999_999, max(0 if seconds else 1, int((timeout - seconds) * 1e6)))  # never 0 s 0 µs: no limit
            value = struct.pack("ll", seconds, micros)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)
            self._kernel_timeout = timeout

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()

    def closed_by_peer(self) -> bool:
        """An idle kept-alive connection with something to read has been closed (or broken) by the
        server: it sends nothing unasked."""
        if self.sock is None:
            return False
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def _send(self, method: str, target: str, headers: dict[str, str], body: bytes | None, timeout: float) -> None:
        if self.sock is None:
            self.connect()
        sock = self.sock
        assert sock is not None
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._host_header}", "Accept-Encoding: identity"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body) if body is not None else 0}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self._timeout(sock, timeout)
        try:
            sock.sendall(head + body if body else head)
        except BlockingIOError:  # the kernel's timeout (a blocking socket)
            raise TimeoutError("timed out") from None

    def exchange(self, method: str, target: str, headers: dict[str, str], body: bytes | None, timeout: float) -> Answer:
        """Send one request and read its whole answer; on any failure the connection is closed and
        the error raised (see the module docstring)."""
        try:
            self._send(method, target, headers, body, timeout)
            assert self.sock is not None
            return self._read(self.sock)
        except BaseException:
            self.close()
            raise

    def stream(self, target: str, headers: dict[str, str], timeout: float) -> Stream:
        """GET `target` and return once the answer's headers are in; its body is read as it comes
        (`Stream.chunks`, a watch's events). The connection is the stream's until it is closed."""
        try:
            self._send("GET", target, headers, None, timeout)
            return Stream(self)
        except BaseException:
            self.close()
            raise

    def _read(self, sock: socket.socket) -> Answer:
        answer = _Answer()
        parser = answer.parser = httptools.HttpResponseParser(answer)
        received = False
        while not answer.done:
            if not _feed(sock, parser):
                if not received:
                    raise http.client.RemoteDisconnected("the server closed the connection without an answer")
                raise http.client.IncompleteRead(b"".join(answer.parts))
            received = True
        if not answer.keep_alive:
            self.close()
        return Answer(answer.status, answer.reason, b"".join(answer.parts), answer.keep_alive)


def _feed(sock: socket.socket, parser: httptools.HttpResponseParser) -> bool:
    """Read what has arrived into the parser; False when the server has closed the connection."""
    try:
        data = sock.recv(READ_SIZE)
    except BlockingIOError:  # the kernel's timeout (a blocking socket)
        raise TimeoutError("timed out") from None
    if not data:
        return False
    try:
        parser.feed_data(data)
    except httptools.HttpParserError as exc:
        raise http.client.HTTPException(f"not an HTTP answer: {exc}") from None
    return True


class Stream:
    """An answer read as it arrives: `status` and `reason` at once, the body through `chunks()`."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._answer = _Answer()
        self._parser = self._answer.parser = httptools.HttpResponseParser(self._answer)
        while not self._answer.status:  # the headers
            self._feed()

    @property
    def status(self) -> int:
        return self._answer.status

    @property
    def reason(self) -> str:
        return self._answer.reason

    def _feed(self) -> None:
        sock = self.conn.sock
        if sock is None:
            raise http.client.RemoteDisconnected("the stream is closed")
        if _feed(sock, self._parser):
            return
        if not self._answer.status:
            raise http.client.RemoteDisconnected("the server closed the connection without an answer")
        self._answer.done = True  # a body that ends with the connection

    def chunks(self) -> Iterator[bytes]:
        """The body's bytes as they come, until the answer ends (then the connection is closed)."""
        answer = self._answer
        try:
            while True:
                if answer.parts:
                    parts, answer.parts = answer.parts, []
                    yield b"".join(parts)
                if answer.done:
                    return
                self._feed()
        finally:
            self.close()

    def read(self) -> bytes:
        return b"".join(self.chunks())

    def close(self) -> None:
        self.conn.close()
