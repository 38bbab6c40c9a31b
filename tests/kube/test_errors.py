"""One vocabulary of API-server failures: the class and `retryable` each status gets (a table), and
the classes a real (embedded) API server's answers raise through KubeHttp."""

from __future__ import annotations

import socket

import pytest

from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube.errors import (
    ConflictError,
    ExpiredError,
    ForbiddenError,
    InvalidError,
    KubeError,
    NotFoundError,
    UnavailableError,
)
from runtimekit.kube.http import KubeHttp


@pytest.mark.parametrize(
    ("code", "kind", "retryable"),
    [
        pytest.param(0, UnavailableError, True, id="no-answer"),
        pytest.param(400, InvalidError, False, id="400-bad-request"),
        pytest.param(401, ForbiddenError, False, id="401-unauthorized"),
        pytest.param(403, ForbiddenError, False, id="403-forbidden"),
        pytest.param(404, NotFoundError, False, id="404-not-found"),
        pytest.param(405, InvalidError, False, id="405-method"),
        pytest.param(408, UnavailableError, True, id="408-timeout"),
        pytest.param(409, ConflictError, True, id="409-conflict"),
        pytest.param(410, ExpiredError, True, id="410-gone"),
        pytest.param(415, InvalidError, False, id="415-media-type"),
        pytest.param(422, InvalidError, False, id="422-invalid"),
        pytest.param(429, UnavailableError, True, id="429-throttled"),
        pytest.param(500, UnavailableError, True, id="500-internal"),
        pytest.param(503, UnavailableError, True, id="503-unavailable"),
        pytest.param(504, UnavailableError, True, id="504-gateway-timeout"),
        pytest.param(418, KubeError, False, id="other"),
    ],
)
def test_each_status_has_its_class_and_retryability(code: int, kind: type[KubeError], retryable: bool) -> None:
    error = KubeError.of(code, "Reason", "what the server said")
    assert type(error) is kind
    assert error.retryable is retryable
    assert (error.code, error.reason, error.message) == (code, "Reason", "what the server said")
    assert str(error) == f"{code} Reason: what the server said"


def test_context_keeps_the_class_and_the_status() -> None:
    error = KubeError.of(409, "Conflict", "the object has been modified").with_context("patch pod ns/p")
    assert isinstance(error, ConflictError)
    assert (error.code, error.message) == (409, "patch pod ns/p: the object has been modified")


def test_errors_made_by_hand_have_their_class_status() -> None:
    assert UnavailableError("API server down").code == 503
    assert str(NotFoundError("pod ns/p")) == "pod ns/p"


def test_a_real_api_server_answers_with_the_right_classes(apiserver: ApiServer) -> None:
    http = KubeHttp.connect(server=apiserver.url)
    try:
        with pytest.raises(NotFoundError):
            http.get("/api/v1/namespaces/default/pods/nope")
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
        created = http.post("/api/v1/namespaces/default/configmaps", body)
        with pytest.raises(ConflictError):
            http.post("/api/v1/namespaces/default/configmaps", body)
        stale = dict(body, metadata={**body["metadata"], "resourceVersion": "1"})
        assert created["metadata"]["resourceVersion"] != "1"
        with pytest.raises(ConflictError):
            http.put("/api/v1/namespaces/default/configmaps/c", stale)
        bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not_Valid", "namespace": "default"}}
        with pytest.raises(InvalidError) as invalid:
            http.post("/api/v1/namespaces/default/configmaps", bad)
        assert not invalid.value.retryable
    finally:
        http.close()


def test_an_unreachable_server_is_a_temporary_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    http = KubeHttp.connect(server=f"http://127.0.0.1:{port}", timeout=2.0)
    try:
        with pytest.raises(UnavailableError) as unreachable:
            http.get("/api/v1/nodes")
        assert (unreachable.value.code, unreachable.value.reason) == (0, "Unreachable")
        assert unreachable.value.retryable
    finally:
        http.close()
