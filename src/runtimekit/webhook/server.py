"""The webhook's HTTPS endpoint: `POST /mutate` and `POST /validate` take an AdmissionReview and answer
one; `GET /healthz` says it serves, `GET /readyz` also that the node view has listed the nodes.

A thin adapter: each request's review goes to `decide.mutate` or `decide.validate` with the settings
and the current `Fleet`, and the decision goes back through `review.respond`. TLS is the server's
(`ServingCertificate`): every new connection takes the context as it is now, so a renewed certificate
serves the next connection; the handshake happens on the connection's own thread, so a slow client
holds up no one. A body that is not an AdmissionReview is a 400 with the reason. Used by
`runtimekit webhook` and `runtimekit up`.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import sys
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from runtimekit.base.threads import Workers
from runtimekit.kube.objects import AdmissionReview
from runtimekit.webhook import decide
from runtimekit.webhook.fleet import Fleet
from runtimekit.webhook.review import Decision, respond
from runtimekit.webhook.settings import WebhookSettings
from runtimekit.webhook.tlsfiles import ServingCertificate

log = logging.getLogger(__name__)
MAX_BODY = 3 * 1024 * 1024  # kube-apiserver sends objects up to its own request limit


# how often serve_forever looks for a shutdown request: `stop()` waits up to this (socketserver's
# default, 0.5 s, made stopping a node or `runtimekit up` slow); an idle select() wake is cheap
SHUTDOWN_POLL_S = 0.05


class _TlsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], tls: ServingCertificate
    ) -> None:
        self.tls = tls
        super().__init__(address, handler)

    def handle_error(self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any) -> None:
        """A client that fails the handshake or goes away is its own business: no traceback."""
        error = sys.exc_info()[1]
        if isinstance(error, ssl.SSLError | ConnectionError | TimeoutError):
            log.debug("connection from %s ended: %s", client_address, error)
            return
        super().handle_error(request, client_address)

    def get_request(self) -> tuple[socket.socket, object]:
        raw, address = self.socket.accept()
        wrapped = self.tls.context().wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        return wrapped, address


def make_handler(
    settings: WebhookSettings, fleet: Callable[[], Fleet], ready: Callable[[], bool]
) -> type[BaseHTTPRequestHandler]:
    routes: dict[str, Callable[[AdmissionReview], Decision]] = {
        "/mutate": lambda review: decide.mutate(review.get("request") or {}, settings),
        "/validate": lambda review: decide.validate(review.get("request") or {}, settings, fleet()),
    }

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # kube-apiserver keeps its connections
        disable_nagle_algorithm = True
        wbufsize = -1  # an answer's headers and body leave in one TLS record, flushed after each request
        timeout = 60  # an idle kept connection is closed after this many seconds

        def setup(self) -> None:
            super().setup()
            cast(ssl.SSLSocket, self.connection).do_handshake()  # on this connection's thread

        def handle(self) -> None:
            try:
                super().handle()
            except (ssl.SSLError, ConnectionError, TimeoutError):
                self.close_connection = True

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path in ("/healthz", "/livez") or (path == "/readyz" and ready()):
                self._send(200, b"ok\n", "text/plain; charset=utf-8")
            elif path == "/readyz":
                self._send(503, b"the node view has not listed the nodes yet\n", "text/plain; charset=utf-8")
            else:
                self._send(404, b"not found: POST /mutate or /validate, GET /healthz\n", "text/plain; charset=utf-8")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self.close_connection = True  # the body is left unread
                self._send(413, b"request body too large\n", "text/plain; charset=utf-8")
                return
            body = self.rfile.read(length)  # read whatever the answer, so the connection stays usable
            route = routes.get(self.path.split("?", 1)[0])  # kube-apiserver adds ?timeout=10s
            if route is None:
                self._send(404, b"not found: POST /mutate or /validate\n", "text/plain; charset=utf-8")
                return
            try:
                review = json.loads(body)
                if not isinstance(review, dict) or not isinstance(review.get("request"), dict):
                    raise ValueError("not an AdmissionReview with a request")
            except ValueError as exc:
                self._send(400, f"bad AdmissionReview: {exc}\n".encode(), "text/plain; charset=utf-8")
                return
            answer = respond(cast(AdmissionReview, review), route(cast(AdmissionReview, review)))
            self._send(200, json.dumps(answer).encode(), "application/json")

        def _send(self, code: int, body: bytes, kind: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


class WebhookServer:
    """`start()` serves on its own thread; `port` is the one bound (0 picks a free one)."""

    def __init__(
        self,
        settings: WebhookSettings,
        tls: ServingCertificate,
        fleet: Callable[[], Fleet],
        host: str = "0.0.0.0",
        port: int = 9443,
        ready: Callable[[], bool] = lambda: True,
    ) -> None:
        self.httpd = _TlsServer((host, port), make_handler(settings, fleet, ready), tls)
        self.host, self.port = host, int(self.httpd.server_address[1])
        self._workers = Workers("webhook")

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}"

    def start(self) -> WebhookServer:
        self._workers.spawn("webhook-https", lambda: self.httpd.serve_forever(poll_interval=SHUTDOWN_POLL_S))
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._workers.stop(5.0)
