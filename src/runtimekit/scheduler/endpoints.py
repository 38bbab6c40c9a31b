"""The scheduler's HTTP endpoints, as Volcano serves them: `/healthz` (`--enable-healthz`, at
`--healthz-address`, over TLS when `--ca-cert-file`, `--tls-cert-file` and `--tls-private-key-file`
are all given) and `/metrics` (`--enable-metrics`, at `--listen-address`). Both on one address share
one server.

`/healthz` answers as Kubernetes components do: `ok` (200) when every check passes, else 500 naming
the failed checks; `?verbose` lists each check; `/healthz/<check>` asks one. The checks: `ping`
(the process answers), `scheduler` (the scheduling thread runs) and, with leader election,
`leaderElection`: a standby is healthy; a leader is not once its Lease has gone unrenewed longer
than the lease duration plus 20 s (kube-scheduler's tolerance), so a stuck leader gets restarted by
its liveness probe while standbys are left alone. Handlers only translate (STYLE.md #8).
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CollectorRegistry

from runtimekit.scheduler.metrics.text import CONTENT_TYPE, render

Check = Callable[[], str | None]  # None when healthy, else why not
Answer = tuple[int, str, bytes]
Route = Callable[[Mapping[str, list[str]], str], Answer]  # (query, rest of the path) -> answer
TEXT = "text/plain; charset=utf-8"


def parse_address(address: str) -> tuple[str, int]:
    """`host:port` as Go's net.Listen reads it (`:8080` is every interface; `[::1]:80` IPv6)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"address {address!r}: expected host:port (e.g. :8080 or 127.0.0.1:8080)")
    return host.strip("[]"), int(port)


def healthz_route(checks: Sequence[tuple[str, Check]]) -> Route:
    def answer(query: Mapping[str, list[str]], rest: str) -> Answer:
        if rest:
            check = dict(checks).get(rest)
            if check is None:
                return 404, TEXT, f"no health check {rest!r}\n".encode()
            failure = check()
            return (
                (200, TEXT, b"ok") if failure is None else (500, TEXT, f"internal server error: {failure}\n".encode())
            )
        results = [(name, check()) for name, check in checks]
        failed = any(failure is not None for _, failure in results)
        if not failed and "verbose" not in query:
            return 200, TEXT, b"ok"
        lines = [f"[+]{name} ok" if failure is None else f"[-]{name} failed: {failure}" for name, failure in results]
        lines.append("healthz check failed" if failed else "healthz check passed")
        return (500 if failed else 200), TEXT, ("\n".join(lines) + "\n").encode()

    return answer


def metrics_route(registry: CollectorRegistry) -> Route:
    return lambda _query, _rest: (200, CONTENT_TYPE, render(registry))


def _handler(routes: Mapping[str, Route]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: Prometheus and kubelet reuse their connections
        timeout = 300

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            top, _, rest = url.path.lstrip("/").partition("/")
            route = routes.get("/" + top)
            if route is None:
                code, kind, body = 404, TEXT, f"not found: try {' or '.join(sorted(routes))}\n".encode()
            else:
                code, kind, body = route(parse_qs(url.query, keep_blank_values=True), rest)
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


@dataclass(frozen=True)
class Tls:
    ca_file: str
    cert_file: str
    key_file: str

    def context(self) -> ssl.SSLContext:
        """A server context as Volcano's StartHealthz sets it: TLS 1.2 or later, clients' certificates
        checked against the CA when they present one."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, self.key_file)
        context.load_verify_locations(self.ca_file)
        context.verify_mode = ssl.CERT_OPTIONAL
        return context


class Endpoint:
    """One listening address serving some routes (`/healthz`, `/metrics`)."""

    def __init__(self, address: str, routes: Mapping[str, Route], tls: Tls | None = None) -> None:
        host, port = parse_address(address)
        self.httpd = ThreadingHTTPServer((host, port), _handler(routes))
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.context().wrap_socket(self.httpd.socket, server_side=True)
        self._thread = threading.Thread(target=self.httpd.serve_forever, name=f"http {address}", daemon=True)

    @property
    def address(self) -> str:
        host, port = self.httpd.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"{host}:{port}"

    def start(self) -> Endpoint:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)
