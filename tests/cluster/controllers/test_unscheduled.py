"""The embedded cluster's check for pods no scheduler will take: an Event after the grace period,
once, naming the scheduler asked for and the names the cluster's scheduler answers to."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fixtures.apiserver import make_pod
from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.controllers.unscheduled import REASON, UnscheduledCheck, message
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informers import Informers

PODS = "/api/v1/namespaces/default/pods"
EVENTS = "/api/v1/namespaces/default/events"


@pytest.fixture
def http(apiserver: ApiServer) -> Iterator[KubeHttp]:
    kube = KubeHttp.connect(server=apiserver.url)
    informers = Informers(KubeHttp.connect(server=apiserver.url))
    check = UnscheduledCheck(informers.http, informers, ["default-scheduler", "lj-runtimekit-scheduler"], grace_s=0.2)
    informers.start()
    check.start()
    assert check.synced(10)
    yield kube
    check.stop()
    informers.stop()
    kube.close()


def events(http: KubeHttp, name: str) -> list[dict[str, object]]:
    return http.list(EVENTS, {"fieldSelector": f"involvedObject.name={name},reason={REASON}"})[0]


def test_a_pod_for_a_scheduler_nobody_runs_is_told_why(http: KubeHttp) -> None:
    http.post(PODS, make_pod("lost", scheduler="volcano"))
    http.post(PODS, make_pod("fine"))  # default-scheduler: answered
    http.post(PODS, make_pod("bound", scheduler="volcano", node="n1"))  # already has a node
    [event] = wait_for(lambda: events(http, "lost"), what="the Event")
    assert event["type"] == "Warning"
    assert event["message"] == message("volcano", ["default-scheduler", "lj-runtimekit-scheduler"])
    assert 'schedulerName "volcano"' in str(event["message"])
    assert "default-scheduler, lj-runtimekit-scheduler" in str(event["message"])
    assert "runtimekit up --scheduler-name volcano" in str(event["message"])
    http.post(PODS, make_pod("marker", scheduler="other"))
    wait_for(lambda: events(http, "marker"), what="a later pod's Event")
    assert not events(http, "fine")
    assert not events(http, "bound")
    assert len(events(http, "lost")) == 1


def test_without_a_scheduler_every_pod_is_told() -> None:
    assert message("default-scheduler", []) == (
        'no scheduler runs in this cluster, so nothing will schedule this pod (schedulerName "default-scheduler")'
    )


def test_a_scheduler_name_a_preset_answers_to_is_named_with_the_preset() -> None:
    told = message("hami-scheduler", ["default-scheduler", "lj-runtimekit-scheduler"])
    assert "runtimekit up --protocol hami answers to it, with that system's names" in told
    assert "runtimekit up --protocol" not in message("my-own", ["default-scheduler"])
