"""KubeHttp's standard-library path against a real TLS server: the kubeconfig's CA, client
certificate and token are used as httpx would use them, a rotated token file is re-read on 401, the
server URL's path prefix and query parameters arrive intact, a connection the server closed while
idle is replaced, and credentials that need an exec plugin keep httpx."""

from __future__ import annotations

import base64
import gc
import json
import ssl
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import trustme

from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp


@dataclass
class Seen:
    requests: list[tuple[str, str, str, str]] = field(default_factory=list)  # method, path, auth, client CN
    ports: list[int] = field(default_factory=list)  # the client's port per request: one per connection
    token: str = "first"
    close_after_each: bool = False


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: Seen

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        cert = self.connection.getpeercert()  # type: ignore[attr-defined]
        subject = dict(x[0] for x in cert["subject"]) if cert else {}
        auth = self.headers.get("Authorization", "")
        self.seen.requests.append((self.command, self.path, auth, str(subject.get("commonName", ""))))
        self.seen.ports.append(self.client_address[1])
        if auth != f"Bearer {self.seen.token}":
            status, answer = 401, {"kind": "Status", "code": 401, "reason": "Unauthorized", "message": "bad token"}
        else:
            status, answer = 200, {"path": self.path, "body": json.loads(body) if body else None}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        if self.seen.close_after_each:  # as a server closing idle connections would, without saying so
            self.wfile.flush()
            self.close_connection = True

    do_GET = do_POST = do_PATCH = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Seen, trustme.CA, Path]]:
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca.configure_trust(context)
    context.verify_mode = ssl.CERT_REQUIRED  # mutual TLS, as an API server checking client certificates
    seen = Seen()
    handler = type("BoundHandler", (Handler,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/prefix", seen, ca, tmp_path
    finally:
        server.shutdown()
        server.server_close()


def kubeconfig(path: Path, server: str, ca: trustme.CA, user: str) -> Path:
    ca_data = base64.b64encode(ca.cert_pem.bytes()).decode()
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}', certificate-authority-data: {ca_data}}}}}]\n"
        f"users: [{{name: u, user: {user}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return path


def client_cert_user(ca: trustme.CA, tmp: Path, token_line: str) -> str:
    leaf = ca.issue_cert("runtimekit-scheduler", common_name="runtimekit-scheduler")
    cert = base64.b64encode(b"".join(blob.bytes() for blob in leaf.cert_chain_pems)).decode()
    key = base64.b64encode(leaf.private_key_pem.bytes()).decode()
    return f"{{client-certificate-data: {cert}, client-key-data: {key}, {token_line}}}"


def test_tls_client_certificate_token_prefix_and_query(tls_server: tuple[str, Seen, trustme.CA, Path]) -> None:
    url, seen, ca, tmp = tls_server
    user = client_cert_user(ca, tmp, "token: first")
    http = KubeHttp.connect(str(kubeconfig(tmp / "kubeconfig", url, ca, user)))
    try:
        assert http._plain is not None
        got = http.get("/api/v1/pods", {"fieldSelector": "spec.nodeName=n1", "limit": 5})
        assert got["path"] == "/prefix/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&limit=5"
        assert http.post("/api/v1/namespaces/d/pods/p/binding", {"target": {"name": "n1"}})["body"] == {
            "target": {"name": "n1"}
        }
        assert [(m, a, cn) for m, _, a, cn in seen.requests] == [
            ("GET", "Bearer first", "runtimekit-scheduler"),
            ("POST", "Bearer first", "runtimekit-scheduler"),
        ]
        assert len(set(seen.ports)) == 1  # both went over one kept-alive TLS connection
        seen.token = "other"
        with pytest.raises(KubeError) as failed:  # a static token is not re-read
            http.get("/api/v1/nodes")
        assert (failed.value.code, failed.value.reason) == (401, "Unauthorized")
    finally:
        http.close()


def test_a_rotated_token_file_is_read_again_on_401(tls_server: tuple[str, Seen, trustme.CA, Path]) -> None:
    url, seen, ca, tmp = tls_server
    token = tmp / "token"
    token.write_text("first\n")
    user = client_cert_user(ca, tmp, f"tokenFile: {token}")
    http = KubeHttp.connect(str(kubeconfig(tmp / "kubeconfig", url, ca, user)))
    try:
        assert http.get("/api/v1/nodes")["path"] == "/prefix/api/v1/nodes"
        token.write_text("second\n")
        seen.token = "second"
        assert http.get("/api/v1/nodes")["path"] == "/prefix/api/v1/nodes"
        assert [a for _, _, a, _ in seen.requests] == ["Bearer first", "Bearer first", "Bearer second"]
    finally:
        http.close()


def test_a_connection_the_server_closed_while_idle_is_replaced(tls_server: tuple[str, Seen, trustme.CA, Path]) -> None:
    url, seen, ca, tmp = tls_server
    seen.close_after_each = True
    http = KubeHttp.connect(str(kubeconfig(tmp / "kubeconfig", url, ca, client_cert_user(ca, tmp, "token: first"))))
    try:
        for i in range(5):
            assert http.get(f"/api/v1/nodes/n{i}")["path"] == f"/prefix/api/v1/nodes/n{i}"
        assert len(seen.requests) == 5
        assert len(set(seen.ports)) == 5  # a new connection each time the server closed the last one
    finally:
        http.close()


def test_an_untrusted_server_is_refused(tls_server: tuple[str, Seen, trustme.CA, Path]) -> None:
    url, _, ca, tmp = tls_server
    stranger = trustme.CA()
    http = KubeHttp.connect(str(kubeconfig(tmp / "kubeconfig", url, stranger, client_cert_user(ca, tmp, "token: x"))))
    try:
        with pytest.raises(KubeError) as failed:
            http.get("/api/v1/nodes")
        assert failed.value.code == 0
        assert "CERTIFICATE_VERIFY_FAILED" in failed.value.message
    finally:
        http.close()


def test_exec_credentials_keep_httpx(tmp_path: Path) -> None:
    config = kubeconfig(
        tmp_path / "kubeconfig",
        "https://127.0.0.1:1",
        trustme.CA(),
        "{exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: /bin/true}}",
    )
    http = KubeHttp.connect(str(config))
    assert http._plain is None
    http.close()


def test_a_missing_token_file_fails_the_request_clearly_until_it_appears(
    tls_server: tuple[str, Seen, trustme.CA, Path],
) -> None:
    url, seen, ca, tmp = tls_server
    token = tmp / "token"
    http = KubeHttp.connect(
        str(kubeconfig(tmp / "kubeconfig", url, ca, client_cert_user(ca, tmp, f"tokenFile: {token}")))
    )
    try:
        with pytest.raises(KubeError) as failed:
            http.get("/api/v1/nodes")
        assert failed.value.code == 0
        assert str(token) in failed.value.message
        assert seen.requests == []  # nothing was sent without credentials
        token.write_text("first\n")
        assert http.get("/api/v1/nodes")["path"] == "/prefix/api/v1/nodes"
    finally:
        http.close()


def test_a_finished_threads_connection_is_closed_with_it(apiserver: ApiServer) -> None:
    http = KubeHttp.connect(server=apiserver.url)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            for _ in range(20):
                worker = threading.Thread(target=lambda: http.get("/api/v1/namespaces"))
                worker.start()
                worker.join()
            gc.collect()
        assert http._plain is not None
        assert len(http._plain._all) == 0
        assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
    finally:
        http.close()
