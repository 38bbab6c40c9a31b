"""The exporter's HTTP endpoint: `/metrics` (Prometheus text format from a registry of its own, rendered
by `exposition.Exposition`) and `/healthz` for probes. Handlers only translate; the work is in the
collectors."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from runtimekit.base.threads import Workers
from runtimekit.exporter.exposition import Exposition


def make_handler(registry: CollectorRegistry) -> type[BaseHTTPRequestHandler]:
    exposition = Exposition(registry)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: Prometheus reuses its connection between scrapes
        disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart (delayed ACK)
        timeout = 300  # an idle keep-alive connection is closed (and its thread ends) after this many seconds

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                body, kind, code = exposition.render(), CONTENT_TYPE_LATEST, 200
            elif path in ("/healthz", "/readyz", "/livez"):
                body, kind, code = b"ok\n", "text/plain; charset=utf-8", 200
            else:
                body, kind, code = b"not found: try /metrics or /healthz\n", "text/plain; charset=utf-8", 404
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


# how often serve_forever looks for a shutdown request: `stop()` waits up to this (socketserver's
# default, 0.5 s, made stopping a node or `runtimekit up` slow); an idle select() wake is cheap
SHUTDOWN_POLL_S = 0.05


class MetricsServer:
    def __init__(self, registry: CollectorRegistry, host: str = "0.0.0.0", port: int = 9445) -> None:
        self.httpd = ThreadingHTTPServer((host, port), make_handler(registry))
        self.httpd.daemon_threads = True
        self._workers = Workers("metrics")

    @property
    def address(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"{host!s}:{port}" if isinstance(host, str) else f"{host.decode()}:{port}"

    def start(self) -> MetricsServer:
        self._workers.spawn("metrics-http", lambda: self.httpd.serve_forever(poll_interval=SHUTDOWN_POLL_S))
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._workers.stop(5.0)
