"""Which pods the extender is for (upstream's TestIsInterested as data, with the kit's resources), and the
managedResources list kube-scheduler is given."""

from __future__ import annotations

from typing import Any, cast

import pytest

from runtimekit.kube.objects import Pod
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import preset_protocol
from runtimekit.scheduler.extender.interest import asks_kit_resources, managed_resources

P = KitProtocol.default()


def pod(containers: list[dict[str, Any]] | None = None, init: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers or [{"name": "app"}]}
    if init:
        spec["initContainers"] = init
    return {"metadata": {"name": "p"}, "spec": spec}


def c(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "app", "resources": resources}


@pytest.mark.parametrize(
    ("obj", "wanted"),
    [
        pytest.param(pod(), False, id="empty resources"),
        pytest.param(pod([c({"cpu": "1", "memory": "1Gi"})]), False, id="cpu and memory only"),
        pytest.param(pod([c({"example.com/foo": "1"})]), False, id="another extended resource"),
        pytest.param(pod([c({P.resources.core: "0"})]), True, id="requests"),
        pytest.param(pod([c(limits={P.resources.memory: "0"})]), True, id="limits"),
        pytest.param(pod([c()], init=[c({P.resources.gpu: "1"})]), True, id="init container"),
        pytest.param(pod([c(limits={"aliyun.com/mig-1g.10gb": "1"})]), True, id="a MIG slice"),
        pytest.param(pod([c(), c(limits={P.resources.gpu: "1"})]), True, id="the second container"),
        pytest.param({"metadata": {}}, False, id="no spec"),
    ],
)
def test_asks_kit_resources(obj: dict[str, Any], wanted: bool) -> None:
    assert asks_kit_resources(cast(Pod, obj), P) is wanted


def test_a_presets_names_and_aliases_count() -> None:
    hami = preset_protocol("hami")
    names = managed_resources(hami)
    for name in names[:3]:
        assert asks_kit_resources(cast(Pod, pod([c(limits={name: "1"})])), hami)


def test_managed_resources_spell_out_every_mig_profile() -> None:
    names = managed_resources(P)
    assert names[:3] == [P.resources.gpu, P.resources.core, P.resources.memory]
    assert {"aliyun.com/mig-1g.10gb", "aliyun.com/mig-7g.141gb", "aliyun.com/mig-1g.6gb"} <= set(names)
    assert len(names) == len(set(names))
    assert all(P.manages(n) for n in names)
