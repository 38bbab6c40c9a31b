"""A reloaded conf may not take the GPU plugins away while pods ask for what they allocate: the guard
compares the kinds of GPU request the running and the new conf allocate, and the pods known."""

from __future__ import annotations

import pytest

from runtimekit.model import ContainerGpuRequest, GpuKind, GpuRequest, PodKey, PodRequest
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.conf_guard import gpu_plugins_lost
from runtimekit.scheduler.framework import BuildContext
from runtimekit.scheduler.framework.check import check_conf
from runtimekit.scheduler.framework.info import JobKey, TaskInfo
from runtimekit.scheduler.framework.interfaces import PluginLists
from scheduler.helpers import cpu_only, share, whole

P = KitProtocol.default()
BOTH = "  - name: gpushare\n  - name: mig\n"
CONFS = {
    "gpushare and mig": BOTH,
    "gpushare": "  - name: gpushare\n",
    "mig": "  - name: mig\n",
    "deviceshare": "  - name: deviceshare\n",
    "gpushare, enableDevice off": "  - name: gpushare\n    enableDevice: false\n  - name: mig\n",
    "predicates, GPU arguments": "  - name: predicates\n    arguments: {predicate.GPUSharingEnable: true}\n",
    "tiers null": None,
}


def plugins(name: str) -> PluginLists:
    body = CONFS[name]
    text = 'actions: "allocate"\ntiers: null\n' if body is None else f'actions: "allocate"\ntiers:\n- plugins:\n{body}'
    checked = check_conf(text, name, builtin_registry(), BuildContext(protocol=P))
    assert checked.framework is not None, checked.problems.items
    return checked.framework.plugins


def task(name: str, request: PodRequest) -> TaskInfo:
    return TaskInfo(PodKey(name), "default", name, JobKey(name), request)


def mig(profile: str = "1g.10gb") -> PodRequest:
    gpu = GpuRequest(GpuKind.MIG, 1, mig_profile=profile, resource=P.resources.mig_prefix + profile)
    return PodRequest(1000, 0, (ContainerGpuRequest("main", gpu),))


@pytest.mark.parametrize(
    ("running", "new", "pods", "refused"),
    [
        pytest.param("gpushare and mig", "tiers null", [share(100)], "GPU shares", id="tiers null, a share pod"),
        pytest.param("gpushare and mig", "tiers null", [cpu_only()], None, id="tiers null, no GPU pod"),
        pytest.param("gpushare and mig", "tiers null", [], None, id="tiers null, no pod"),
        pytest.param("gpushare and mig", "mig", [whole(2)], "whole GPUs", id="gpushare dropped, a whole-GPU pod"),
        pytest.param("gpushare and mig", "mig", [mig()], None, id="gpushare dropped, only MIG pods"),
        pytest.param("gpushare and mig", "gpushare", [mig()], "MIG slices", id="mig dropped, a MIG pod"),
        pytest.param("gpushare and mig", "gpushare", [share(100)], None, id="mig dropped, only share pods"),
        pytest.param(
            "gpushare and mig", "gpushare, enableDevice off", [share(100)], "GPU shares", id="enableDevice off"
        ),
        pytest.param(
            "gpushare and mig",
            "predicates, GPU arguments",
            [share(100)],
            "GPU shares",
            id="predicates with GPU arguments allocates nothing",
        ),
        pytest.param("gpushare", "deviceshare", [share(100), whole(1)], None, id="deviceshare allocates"),
        pytest.param("tiers null", "tiers null", [share(100)], None, id="the running conf had none either"),
    ],
)
def test_a_conf_is_refused_only_when_it_drops_what_a_known_pod_asks_for(
    running: str, new: str, pods: list[PodRequest], refused: str | None
) -> None:
    tasks = [task(f"p{i}", request) for i, request in enumerate(pods)]
    why = gpu_plugins_lost(plugins(running), plugins(new), lambda: tasks, P, "new.conf")
    if refused is None:
        assert why is None
    else:
        assert why is not None
        assert why.startswith(f"new.conf: no plugin would allocate {refused}")
        assert "default/p0" in why
        assert "--allow-conf-without-gpu-plugin" in why


def test_the_message_names_every_lost_kind_with_the_protocols_names_and_a_few_pods() -> None:
    tasks = [task(f"p{i}", share(100) if i % 2 else whole(1)) for i in range(7)]
    why = gpu_plugins_lost(plugins("gpushare and mig"), plugins("tiers null"), lambda: tasks, P, "new.conf")
    assert why is not None
    assert f"whole GPUs ({P.resources.gpu}) and GPU shares ({P.resources.core}, {P.resources.memory})" in why
    assert "MIG" not in why  # no pod asks for a MIG slice
    assert "7 pod(s) ask for them (default/p0, default/p1, default/p2 and 4 more)" in why
    assert "keep gpushare in a tier" in why


def test_the_pods_are_not_looked_at_when_the_new_conf_drops_nothing() -> None:
    def known() -> list[TaskInfo]:
        raise AssertionError("the cache was copied for a conf that keeps every GPU plugin")

    assert gpu_plugins_lost(plugins("gpushare"), plugins("deviceshare"), known, P, "new.conf") is None
