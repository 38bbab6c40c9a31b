"""Which container kubelet is admitting, read from its PodResources listing and the API server's pods."""

from __future__ import annotations

from typing import Any

import pytest
from dp_helpers import RES, gpu_pod

from runtimekit.api.podresources_client import ListedContainer, ListedPod
from runtimekit.deviceplugin.admitting import admitting

CORE = {RES.core: 30, RES.memory: 8}


def listed(name: str, **held: list[str]) -> ListedPod:
    containers = tuple(ListedContainer(c, dict.fromkeys(resources, ("GPU-0::0",))) for c, resources in held.items())
    return ListedPod("default", name, containers)


def two_containers(name: str) -> dict[str, Any]:
    return gpu_pod(name, [("a", CORE, []), ("b", CORE, [])])


@pytest.mark.parametrize(
    ("listing", "size", "expected"),
    [
        pytest.param([listed("p", a=[])], 30, [("uid-p", "a")], id="its first container"),
        pytest.param([listed("p", a=[RES.core])], 30, [("uid-p", "b")], id="the next container"),
        pytest.param([listed("p", a=[RES.core], b=[])], 8, [("uid-p", "a")], id="the first one without memory"),
        pytest.param([listed("p", a=[RES.core], b=[RES.core])], 30, [], id="every container holds it"),
        pytest.param([listed("p", a=[])], 50, [], id="another size"),
        pytest.param([], 30, [], id="not listed by kubelet"),
    ],
)
def test_the_container_being_admitted(listing: list[ListedPod], size: int, expected: list[tuple[str, str]]) -> None:
    resource = RES.memory if size == 8 else RES.core
    found = admitting([two_containers("p"), two_containers("waiting")], listing, resource, size)
    assert [(uid, container) for uid, _, _, container in found] == expected


def test_pods_refused_or_finished_are_not_being_admitted() -> None:
    pods = [two_containers("refused"), gpu_pod("done", [("a", CORE, [])], phase="Failed"), two_containers("p")]
    listing = [listed("refused", a=[]), listed("done", a=[]), listed("p", a=[])]
    found = admitting(pods, listing, RES.core, 30, refused={"uid-refused"})
    assert [name for _, _, name, _ in found] == ["p"]
