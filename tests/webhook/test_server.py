"""The webhook's HTTPS server with a real TLS client: reviews answered on /mutate and /validate, health
and readiness, bad bodies, kept-alive connections, and certificate rotation without a restart."""

from __future__ import annotations

import http.client
import json
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from runtimekit.protocol import KitProtocol
from runtimekit.webhook.fleet import Fleet
from runtimekit.webhook.server import WebhookServer
from runtimekit.webhook.settings import WebhookSettings
from runtimekit.webhook.tlsfiles import ServingCertificate

P = KitProtocol.default()


def write_pair(ca: trustme.CA, folder: Path) -> tuple[Path, Path]:
    issued = ca.issue_cert("127.0.0.1")
    cert, key = folder / "tls.crt", folder / "tls.key"
    cert.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
    key.write_bytes(issued.private_key_pem.bytes())
    return cert, key


class Served:
    def __init__(self, server: WebhookServer, ca: trustme.CA, folder: Path) -> None:
        self.server, self.ca, self.folder = server, ca, folder
        self.ready = False

    def connect(self, ca: trustme.CA | None = None) -> http.client.HTTPSConnection:
        context = ssl.create_default_context()
        (ca or self.ca).configure_trust(context)
        return http.client.HTTPSConnection("127.0.0.1", self.server.port, context=context, timeout=5)

    def post(self, path: str, body: Any, connection: http.client.HTTPSConnection | None = None) -> tuple[int, Any]:
        conn = connection or self.connect()
        conn.request("POST", path, json.dumps(body).encode(), {"Content-Type": "application/json"})
        answer = conn.getresponse()
        raw = answer.read()
        try:
            return answer.status, json.loads(raw)
        except ValueError:
            return answer.status, raw.decode()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    ca = trustme.CA()
    cert, key = write_pair(ca, tmp_path)
    tls = ServingCertificate(cert, key, min_interval_s=0.0)
    holder: list[Served] = []
    server = WebhookServer(WebhookSettings(P), tls, Fleet, "127.0.0.1", 0, ready=lambda: holder[0].ready).start()
    holder.append(Served(server, ca, tmp_path))
    yield holder[0]
    server.stop()


def review(obj: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "abc",
            "operation": operation,
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "object": obj,
            "userInfo": {"username": "alice"},
        },
    }


def gpu_pod(core: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {P.resources.core: core}}}]},
    }


def test_mutate_and_validate_answer_reviews_on_one_kept_connection(served: Served) -> None:
    connection = served.connect()
    code, mutated = served.post("/mutate?timeout=5s", review(gpu_pod("30")), connection)
    assert code == 200
    assert mutated["response"]["uid"] == "abc"
    assert mutated["response"]["patchType"] == "JSONPatch"
    code, validated = served.post("/validate?timeout=5s", review(gpu_pod("150")), connection)
    assert code == 200
    assert validated["response"]["allowed"] is False
    assert validated["response"]["status"]["code"] == 403


def test_health_readiness_and_unknown_paths(served: Served) -> None:
    def get(path: str) -> int:
        conn = served.connect()
        conn.request("GET", path)
        answer = conn.getresponse()
        answer.read()
        return answer.status

    assert get("/healthz") == 200
    assert get("/readyz") == 503
    served.ready = True
    assert get("/readyz") == 200
    assert get("/metrics") == 404
    assert served.post("/elsewhere", review({}))[0] == 404


@pytest.mark.parametrize("body", [["not", "a", "review"], {"kind": "AdmissionReview"}, "{"])
def test_a_body_that_is_not_a_review_is_a_400(served: Served, body: Any) -> None:
    code, text = served.post("/validate", body)
    assert code == 400
    assert "bad AdmissionReview" in text


def test_a_client_that_does_not_trust_the_ca_cannot_talk(served: Served) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        served.post("/mutate", review({}), served.connect(trustme.CA()))


def test_a_renewed_certificate_serves_the_next_connection(served: Served) -> None:
    old = served.connect()
    assert served.post("/mutate", review({}), old)[0] == 200
    renewed = trustme.CA()
    time.sleep(0.01)  # a new modification time
    write_pair(renewed, served.folder)
    assert served.post("/mutate", review({}), served.connect(renewed))[0] == 200
    with pytest.raises(ssl.SSLCertVerificationError):
        served.post("/mutate", review({}), served.connect(served.ca))
    assert served.post("/mutate", review({}), old)[0] == 200  # an open connection keeps its certificate


def test_a_renewal_that_does_not_load_keeps_the_old_certificate(served: Served) -> None:
    (served.folder / "tls.key").write_text("not a key")
    assert served.post("/mutate", review({}), served.connect())[0] == 200
