"""Plain requests to a Kubernetes API server over kept-alive HTTP/1.1 connections (`wire`).

httpx costs about 1.3 ms of CPU per request on the development VM; the standard library's
`http.client` about twice what a request costs over `runtimekit.kube.wire` (one write per request,
httptools' parser; its docstring has the figures). A scheduler binding hundreds of pods a second
spends much of its CPU there. `PlainHttp` keeps one keep-alive connection per thread and sends a request
exactly as `KubeHttp`'s httpx client would: the same server URL (with any path prefix), the same TLS
context (lightkube's `verify_cluster`: CA, client certificate, insecure-skip-tls-verify) and the
same credentials (a bearer token, a token file re-read when the server answers 401, as client-go and
lightkube do, or basic auth). Credentials that need a flow of their own (exec plugins, auth
providers) are not handled here: `PlainHttp.supports` says so and `KubeHttp` keeps httpx for them.
Watches stream over a connection of their own (`stream`).
"""

from __future__ import annotations

import base64
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from lightkube.config import client_adapter
from lightkube.config.kubeconfig import SingleConfig

from runtimekit.kube.wire import Connection, Stream

IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


@dataclass(frozen=True)
class PlainResponse:
    status: int
    reason: str
    content: bytes


class PlainHttp:
    def __init__(self, config: SingleConfig, timeout: float, user_agent: str) -> None:
        parts = urlsplit(str(config.cluster.server))
        self._https = parts.scheme == "https"
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self._timeout = timeout
        user = config.user
        self._context = (
            client_adapter.verify_cluster(config.cluster, user, config.abs_file, trust_env=False)
            if self._https and user is not None
            else None
        )
        self._token_file = user.token_file if user is not None and user.token_file else None
        self._headers = {"User-Agent": user_agent, "Accept": "application/json"}
        if user is not None and not self._token_file:
            if user.token:
                self._headers["Authorization"] = f"Bearer {user.token}"
            elif user.username and user.password:
                pair = base64.b64encode(f"{user.username}:{user.password}".encode()).decode()
                self._headers["Authorization"] = f"Basic {pair}"
        self._local = threading.local()
        self._lock = threading.Lock()
        # every thread's connection, for close(); weak, so a finished thread's goes with it
        self._all: weakref.WeakSet[Connection] = weakref.WeakSet()

    @staticmethod
    def supports(config: SingleConfig) -> bool:
        """Whether the config needs nothing but a token, a token file, basic auth or TLS."""
        user = config.user
        scheme = urlsplit(str(config.cluster.server)).scheme
        return scheme in ("http", "https") and (user is None or not (user.exec or user.auth_provider))

    def _read_token(self) -> None:
        """Read the token file (raises OSError naming it when it cannot be read: the caller reports
        the request as failed, and a later one reads the file again)."""
        assert self._token_file is not None
        token = Path(self._token_file).read_text().strip()
        self._headers["Authorization"] = f"Bearer {token}"

    def _new_connection(self) -> Connection:
        return Connection(self._host, self._port, self._context, self._timeout)

    def _connection(self) -> Connection:
        held: _Held | None = getattr(self._local, "held", None)
        if held is None:
            held = self._local.held = _Held(self._new_connection())
            with self._lock:
                self._all.add(held.conn)
        elif held.conn.closed_by_peer():
            held.conn.close()  # the server closed the idle connection: open a new one rather than fail
        return held.conn

    def _prepare(self, path: str, params: dict[str, str]) -> tuple[str, dict[str, str]]:
        """The request target (the server URL's path prefix, the query) and the headers to send."""
        if self._token_file and "Authorization" not in self._headers:
            self._read_token()  # first use, or the file could not be read last time
        return self._prefix + path + ("?" + urlencode(params) if params else ""), dict(self._headers)

    def _rotated(self, status: int, headers: dict[str, str]) -> bool:
        """After a 401 with a token file: the file read again into `headers` (the token may have been
        rotated), True to send once more; False otherwise."""
        if status != 401 or not self._token_file:
            return False
        self._headers.pop("Authorization", None)
        self._read_token()
        headers["Authorization"] = self._headers["Authorization"]
        return True

    def request(
        self,
        method: str,
        path: str,
        params: dict[str, str],
        body: bytes | None,
        content_type: str,
        timeout: float | None = None,
    ) -> PlainResponse:
        """Send one request and read the whole answer. Raises OSError or http.client.HTTPException
        when the server cannot be reached or breaks the connection; the connection is then dropped."""
        target, headers = self._prepare(path, params)
        if body is not None:
            headers["Content-Type"] = content_type
        response = self._exchange(method, target, body, headers, timeout)
        if self._rotated(response.status, headers):
            response = self._exchange(method, target, body, headers, timeout)
        return response

    def stream(self, path: str, params: dict[str, str], timeout: float) -> Stream:
        """GET a streamed answer (a watch) on a connection of its own; the caller reads `chunks()`
        and the stream closes when they end. `timeout` is the longest wait for any read."""
        target, headers = self._prepare(path, params)
        stream = self._new_connection().stream(target, headers, timeout)
        if self._rotated(stream.status, headers):
            stream.close()
            stream = self._new_connection().stream(target, headers, timeout)
        return stream

    def _exchange(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str], timeout: float | None
    ) -> PlainResponse:
        conn = self._connection()
        reused = conn.sock is not None
        try:
            return self._once(conn, method, target, body, headers, timeout)
        except ConnectionError:
            # A kept-alive connection the server closed just as it was reused: an idempotent request
            # is sent again on a new one (as Go's client does); others report the failure.
            if not (reused and method in IDEMPOTENT):
                raise
            return self._once(self._connection(), method, target, body, headers, timeout)

    def _once(
        self,
        conn: Connection,
        method: str,
        target: str,
        body: bytes | None,
        headers: dict[str, str],
        timeout: float | None,
    ) -> PlainResponse:
        answer = conn.exchange(method, target, headers, body, timeout if timeout is not None else self._timeout)
        return PlainResponse(answer.status, answer.reason, answer.content)

    def close(self) -> None:
        """Close every thread's connection (a thread that sends again opens a new one)."""
        with self._lock:
            for conn in list(self._all):
                conn.close()


class _Held:
    """A thread's connection; closed when the thread ends and its thread-local values go."""

    __slots__ = ("conn",)

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def __del__(self) -> None:
        self.conn.close()
