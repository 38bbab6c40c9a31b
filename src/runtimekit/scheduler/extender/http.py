"""The extender's HTTP server: kube-scheduler's extender verbs as POSTs under the URL prefix
(`<prefix>/filter`, `/prioritize`, `/bind`, `/preempt`), and `GET /healthz`, `/readyz` and
`/metrics`. Handlers only translate bodies (`wire.py`) to calls on `Verbs` and back (STYLE.md #8).

Answers, as kube-scheduler's `HTTPExtender` reads them (any status but 200 is an error to it):
- a body kube-scheduler would not send: 400 with the reason, and the server goes on serving;
- a replica that does not serve (a standby, or one still listing the cluster): filter and bind
  answer 200 with their `Error` set, so kube-scheduler logs why; prioritize and preempt, whose
  answers have no error field, 503;
- a failure inside a verb (a bug): 500 with its message, logged.
Connections are kept alive (HTTP/1.1), as kube-scheduler's client keeps them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Protocol
from urllib.parse import parse_qs, urlsplit

from runtimekit.scheduler.endpoints import TEXT, Route, parse_address
from runtimekit.scheduler.extender import wire
from runtimekit.scheduler.extender.service import Verbs

log = logging.getLogger(__name__)
JSON = "application/json"
MAX_BODY = 512 << 20  # a NodeList of thousands of whole Node objects (nodeCacheCapable: false) fits
VERBS = ("filter", "prioritize", "bind", "preempt")
Answer = tuple[int, str, bytes]


class Served(Protocol):
    """What the handler needs of the extender's server."""

    def verbs(self) -> Verbs | None:
        """The verbs, while this replica serves; None otherwise."""

    def not_serving(self) -> str:
        """Why this replica does not serve now."""

    def observe(self, verb: str, seconds: float, result: str) -> None:
        """Count a call: `result` is ok, refused (an Error answered), invalid (400), unavailable or failed."""


def _call(verbs: Verbs, verb: str, body: bytes) -> tuple[bytes, bool]:
    """The verb's answer, and whether it refused (an `Error` answered)."""
    if verb == "filter":
        args = wire.decode_args(body)
        answer = verbs.filter(args)
        return wire.encode_filter(args, answer), bool(answer.error)
    if verb == "prioritize":
        priorities = verbs.prioritize(wire.decode_args(body))
        return wire.encode_priorities(priorities.names, priorities.scores), False
    if verb == "bind":
        error = verbs.bind(wire.decode_binding(body))
        return wire.encode_binding(error), error is not None
    return wire.encode_preemption(verbs.preempt(wire.decode_preemption(body))), False


def _unavailable(verb: str, why: str, body: bytes) -> tuple[Answer, str]:
    """A standby's answer: the verb's error field where its answer has one, else 503."""
    if verb in ("filter", "bind"):
        try:  # a malformed body is still a malformed body
            (wire.decode_args if verb == "filter" else wire.decode_binding)(body)
        except wire.WireError as exc:
            return (400, TEXT, f"{exc}\n".encode()), "invalid"
        answer = wire.encode_filter_error(why) if verb == "filter" else wire.encode_binding(why)
        return (200, JSON, answer), "unavailable"
    return (503, TEXT, f"{why}\n".encode()), "unavailable"


def answer_post(served: Served, verb: str, body: bytes) -> Answer:
    """The answer to a POST of `verb` with `body` (the HTTP-free part of the handler)."""
    started = time.perf_counter()
    verbs = served.verbs()
    if verbs is None:
        answer, result = _unavailable(verb, served.not_serving(), body)
    else:
        try:
            out, refused = _call(verbs, verb, body)
            answer, result = (200, JSON, out), "refused" if refused else "ok"
        except wire.WireError as exc:
            answer, result = (400, TEXT, f"{exc}\n".encode()), "invalid"
        except Exception as exc:  # a bug: this call fails, the server goes on
            log.exception("extender %s failed", verb)
            answer, result = (500, TEXT, f"{verb} failed: {type(exc).__name__}: {exc}\n".encode()), "failed"
    served.observe(verb, time.perf_counter() - started, result)
    return answer


def handler(served: Served, prefix: str, routes: Mapping[str, Route]) -> type[BaseHTTPRequestHandler]:
    """A request handler: POST `<prefix>/<verb>`; GET the `routes` (`/healthz`, `/readyz`, `/metrics`)."""
    verb_paths = {f"{prefix.rstrip('/')}/{verb}": verb for verb in VERBS}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 300
        # headers and body go out in two writes: without TCP_NODELAY, Nagle's algorithm holds the body
        # until the client's delayed ACK (40 ms), on every call of a kept-alive connection
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                self._send(411, TEXT, b"a Content-Length is required\n", close=True)
                return
            if int(length) > MAX_BODY:
                self._send(413, TEXT, f"body over {MAX_BODY} bytes\n".encode(), close=True)
                return
            body = self.rfile.read(int(length))  # read first: the connection is kept for the next request
            path = urlsplit(self.path).path
            verb = verb_paths.get(path)
            if verb is None:
                known = " or ".join(sorted(verb_paths))
                self._send(404, TEXT, f"not found: {path}; the extender serves POST {known}\n".encode())
                return
            self._send(*answer_post(served, verb, body))

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            top, _, rest = url.path.lstrip("/").partition("/")
            route = routes.get("/" + top)
            if route is None:
                self._send(404, TEXT, f"not found: try {' or '.join(sorted(routes))}\n".encode())
                return
            self._send(*route(parse_qs(url.query, keep_blank_values=True), rest))

        def _send(self, code: int, kind: str, body: bytes, close: bool = False) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


class HttpServer:
    """The extender's listening address, served on threads (one per connection)."""

    def __init__(self, address: str, handler_class: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(parse_address(address), handler_class)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, name=f"extender {address}", daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> HttpServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (also when never started)."""
        if self._thread.is_alive():
            self.httpd.shutdown()
            self._thread.join(5)
        self.httpd.server_close()


def readyz_route(ready: Callable[[], str | None]) -> Route:
    """`/readyz`: 200 `ok` while the replica serves, else 503 saying why (a Service then sends
    kube-scheduler's calls to the serving replica only)."""

    def answer(_query: Mapping[str, list[str]], _rest: str) -> tuple[int, str, bytes]:
        why = ready()
        return (200, TEXT, b"ok") if why is None else (503, TEXT, f"not ready: {why}\n".encode())

    return answer
