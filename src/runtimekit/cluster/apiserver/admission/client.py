"""Sending one AdmissionReview to a webhook over HTTPS, as kube-apiserver's webhook client does.

`WebhookClient.post(url, ca_bundle, body, timeout_s)` POSTs to `url?timeout=<n>s` (the webhook learns
its deadline, as from kube-apiserver), verifies the server with the PEM `ca_bundle` (the system's CAs
when it is empty), and returns the answer's body. Any failure raises `CallFailed` with a message in
the words Go's client would use (`Post "https://…?timeout=5s": context deadline exceeded`,
`dial tcp 127.0.0.1:9443: connect: connection refused`, `tls: failed to verify certificate: …`,
`the server could not find the requested resource`), which the dispatcher wraps in kube-apiserver's
`failed calling webhook "NAME": failed to call webhook: …`. Connections are kept alive per thread and
per server; a kept connection the server has closed is replaced once. Called by `dispatch`.
"""

from __future__ import annotations

import hashlib
import http.client
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

_CONTEXTS: dict[bytes, ssl.SSLContext] = {}
_CONTEXTS_LOCK = threading.Lock()


class CallFailed(Exception):
    """The webhook could not be called, or did not answer with a review."""


@dataclass(frozen=True)
class Endpoint:
    """Where to connect (`host`, `port`) and which name the certificate must carry (`server_name`)."""

    host: str
    port: int
    server_name: str
    path: str


def tls_context(ca_bundle: bytes) -> ssl.SSLContext:
    """A client context trusting `ca_bundle` (PEM), made once per bundle."""
    key = hashlib.sha256(ca_bundle).digest()
    with _CONTEXTS_LOCK:
        found = _CONTEXTS.get(key)
        if found is None:
            found = _CONTEXTS[key] = ssl.create_default_context(cadata=ca_bundle.decode("ascii", "replace") or None)
        return found


def endpoint_of(url: str) -> Endpoint:
    parts = urlsplit(url)
    host = parts.hostname or ""
    return Endpoint(host, parts.port or 443, host, parts.path or "/")


def _go_reason(exc: BaseException) -> str:
    """What Go's client says for the same failure."""
    if isinstance(exc, TimeoutError | socket.timeout):
        return "context deadline exceeded"
    if isinstance(exc, ssl.SSLCertVerificationError):
        detail = exc.verify_message or str(exc)
        if "unable to get local issuer" in detail or "self-signed" in detail or "self signed" in detail:
            return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        if "Hostname mismatch" in detail or "IP address mismatch" in detail:
            return f"tls: failed to verify certificate: x509: certificate is not valid for this server ({detail})"
        return f"tls: failed to verify certificate: {detail}"
    if isinstance(exc, ConnectionRefusedError):
        return "connect: connection refused"
    return str(exc) or type(exc).__name__


def _status_error(status: int, body: bytes) -> str:
    if status == 404:
        return "the server could not find the requested resource"
    if status >= 500:
        snippet = body.decode("utf-8", "replace").strip()[:200]
        return f'an error on the server ("{snippet}") has prevented the request from succeeding'
    return f"the server responded with the status code {status} but did not return more information"


ConnectionKey = tuple[str, int, str, bytes]


class _Connection(http.client.HTTPSConnection):
    """An HTTPS connection to `endpoint.host` that verifies the certificate for `endpoint.server_name`
    (a Service's DNS name while connecting to its endpoint's address)."""

    def __init__(self, endpoint: Endpoint, context: ssl.SSLContext, timeout_s: float) -> None:
        super().__init__(endpoint.host, endpoint.port, timeout=timeout_s, context=context)
        self._tls = context
        self._server_name = endpoint.server_name

    def connect(self) -> None:
        raw = socket.create_connection((self.host, self.port), self.timeout)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self.sock = self._tls.wrap_socket(raw, server_hostname=self._server_name)
        except BaseException:
            raw.close()
            raise


class _PerThread(threading.local):
    def __init__(self) -> None:
        self.connections: dict[ConnectionKey, _Connection] = {}


class WebhookClient:
    """Thread-safe: each thread keeps its own connections."""

    def __init__(self) -> None:
        self._local = _PerThread()

    def post(self, endpoint: Endpoint, ca_bundle: bytes, body: bytes, timeout_s: float, shown_url: str) -> bytes:
        """The answer's body; CallFailed (the message naming `shown_url`) on any failure."""
        query = f"?timeout={int(timeout_s)}s"
        deadline = time.monotonic() + timeout_s
        key = (endpoint.host, endpoint.port, endpoint.server_name, ca_bundle)
        pool = self._local.connections
        for attempt in range(2):
            connection = pool.get(key)
            reused = connection is not None
            if connection is None:
                try:
                    context = tls_context(ca_bundle)
                except (ssl.SSLError, ValueError) as exc:
                    raise CallFailed(f"could not get REST client: unable to load root certificates: {exc}") from exc
                connection = pool[key] = _Connection(endpoint, context, timeout_s)
            try:
                return _exchange(connection, endpoint.path + query, body, deadline)
            except CallFailed:
                pool.pop(key, None)
                connection.close()
                raise
            except (OSError, http.client.HTTPException) as exc:
                pool.pop(key, None)
                connection.close()
                if reused and attempt == 0 and not isinstance(exc, TimeoutError | ssl.SSLError):
                    continue  # the server closed a kept-alive connection: once more on a new one
                reason = _go_reason(exc)
                if isinstance(exc, ConnectionRefusedError):
                    reason = f"dial tcp {endpoint.host}:{endpoint.port}: {reason}"
                raise CallFailed(f'Post "{shown_url}{query}": {reason}') from exc
        raise AssertionError("unreachable: the second attempt returns or raises")

    def close(self) -> None:
        """Close this thread's connections."""
        for connection in self._local.connections.values():
            connection.close()
        self._local.connections.clear()


def _exchange(connection: _Connection, target: str, body: bytes, deadline: float) -> bytes:
    connection.timeout = max(0.001, deadline - time.monotonic())
    if connection.sock is not None:
        connection.sock.settimeout(connection.timeout)
    connection.request("POST", target, body, {"Content-Type": "application/json", "Accept": "application/json"})
    if connection.sock is not None:
        connection.sock.settimeout(max(0.001, deadline - time.monotonic()))
    response = connection.getresponse()
    content = response.read()
    if response.will_close:
        connection.close()
    if not 200 <= response.status < 300:
        raise CallFailed(_status_error(response.status, content))
    return content
