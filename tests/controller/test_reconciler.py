"""What the node controller does after a failure, as kopf's TemporaryError and PermanentError: a
temporary error (a conflict, an API server that is unreachable or failing, any unexpected
exception) comes back after a per-node back-off; a permanent one (invalid, forbidden, missing)
stops that node with a Warning Event until the node changes. Driven one step at a time
(`process`) against a real embedded API server, with a fake clock for the work queue."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from runtimekit.base.workqueue import WorkQueue
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.controller.jobs import JobSpec, JobTemplate
from runtimekit.controller.reconciler import ControllerOptions, NodeController, RetryLater
from runtimekit.controller.trigger import LabelTrigger
from runtimekit.kube.errors import (
    ConflictError,
    ExpiredError,
    ForbiddenError,
    InvalidError,
    NotFoundError,
    UnavailableError,
)
from runtimekit.kube.http import KubeHttp
from runtimekit.protocol import KitProtocol

P = KitProtocol.default()
NS = "kube-system"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Failing(NodeController):
    """A controller whose every reconciliation fails with `error`."""

    error: BaseException = RuntimeError("unset")

    def reconcile(self, node_name: str) -> None:
        self.reconciles += 1
        raise self.error


class BrokenTemplate(JobTemplate):
    """A Job template (as an operator's file might be) whose Jobs the API server refuses: 422."""

    def render(self, spec: JobSpec) -> dict[str, Any]:
        job = super().render(spec)
        job["metadata"]["labels"]["runtimekit.aliyun.com/action"] = "not a valid label value!"
        return job


@pytest.fixture
def http(apiserver: ApiServer) -> Iterator[KubeHttp]:
    client = KubeHttp.connect(server=apiserver.url)
    client.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    yield client
    client.close()


def make(cls: type[NodeController], http: KubeHttp, clock: Clock, **kwargs: Any) -> NodeController:
    controller = cls(http, P, LabelTrigger(P), kwargs.pop("template", JobTemplate()), ControllerOptions(NS))
    controller.queue = WorkQueue(controller.queue.backoff, clock=clock)
    controller.on_node("ADDED", http.get("/api/v1/nodes/n1"))
    return controller


def step(controller: NodeController) -> str | None:
    """Hand out the next key and process it; the key, or None when none is due."""
    key = controller.queue.get(timeout=0)
    if key is not None:
        controller.process(key)
    return key


def failures(http: KubeHttp) -> list[dict[str, Any]]:
    events = http.list("/api/v1/namespaces/default/events")[0]
    return [e for e in events if e["reason"] == "ReconcileFailed"]


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(ConflictError("the object has been modified"), id="409-conflict"),
        pytest.param(UnavailableError("connection refused", 0, "Unreachable"), id="unreachable"),
        pytest.param(UnavailableError("too many requests", 429, "TooManyRequests"), id="429-throttled"),
        pytest.param(UnavailableError("etcd timeout", 504, "Timeout"), id="504-timeout"),
        pytest.param(ExpiredError("too old resource version"), id="410-expired"),
        pytest.param(RetryLater("node changed meanwhile"), id="retry-later"),
        pytest.param(ValueError("a bug"), id="unexpected"),
    ],
)
def test_temporary_errors_come_back_after_a_growing_back_off(http: KubeHttp, error: BaseException) -> None:
    clock = Clock()
    controller = make(Failing, http, clock)
    controller.error = error  # type: ignore[attr-defined]
    assert step(controller) == "n1"
    first = controller.queue.backoff.delay(0)
    assert step(controller) is None  # not before its back-off
    clock.now += first
    assert step(controller) == "n1"
    assert controller.queue.retries("n1") == 2
    clock.now += controller.queue.backoff.delay(1)
    assert step(controller) == "n1"
    assert controller.reconciles == 3
    assert failures(http) == []


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(InvalidError("Job is invalid", 422, "Invalid"), id="422-invalid"),
        pytest.param(ForbiddenError("cannot create jobs", 403, "Forbidden"), id="403-forbidden"),
        pytest.param(NotFoundError('namespaces "kube-system" not found', 404, "NotFound"), id="404-namespace"),
    ],
)
def test_permanent_errors_stop_the_node_with_an_event_until_it_changes(http: KubeHttp, error: BaseException) -> None:
    clock = Clock()
    controller = make(Failing, http, clock)
    controller.error = error  # type: ignore[attr-defined]
    assert step(controller) == "n1"
    (event,) = failures(http)
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == "n1"
    assert str(error) in event["message"]
    assert controller.queue.retries("n1") == 0
    clock.now += 3600
    controller.resync()
    controller.on_node("MODIFIED", http.get("/api/v1/nodes/n1"))  # the same version again: nothing new
    assert step(controller) is None
    changed = http.patch("/api/v1/nodes/n1", {"metadata": {"labels": {"team": "a"}}})
    controller.on_node("MODIFIED", changed)
    assert step(controller) == "n1"
    assert controller.reconciles == 2


def test_a_job_the_api_server_refuses_is_reported_once_not_retried(http: KubeHttp) -> None:
    clock = Clock()
    http.patch("/api/v1/nodes/n1", {"metadata": {"labels": {P.labels.enable: "true"}}})
    controller = make(NodeController, http, clock, template=BrokenTemplate())
    assert step(controller) == "n1"
    (event,) = failures(http)
    assert "422" in event["message"]
    assert "not a valid label value!" in event["message"]
    assert http.list(f"/apis/batch/v1/namespaces/{NS}/jobs")[0] == []
    clock.now += 3600
    controller.resync()
    assert step(controller) is None
    assert len(failures(http)) == 1
