"""`deviceshare`: Volcano's GPU-sharing arguments mapped onto gpushare: which device kinds it places,
its policy and weight, what warns and what is refused."""

from __future__ import annotations

import pytest

from runtimekit.model import GpuKind, PodKey
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.arguments import ArgumentError
from runtimekit.scheduler.plugins.deviceshare import DeviceShare, build
from scheduler.helpers import job_of, share, static_cache, whole

SHARE, WHOLE = GpuKind.SHARE, GpuKind.WHOLE


@pytest.mark.parametrize(
    ("arguments", "kinds", "policy", "weight"),
    [
        pytest.param({"deviceshare.GPUSharingEnable": True}, {SHARE}, "packfrag", 1.0, id="GPU sharing: shares"),
        pytest.param({"deviceshare.GPUNumberEnable": True}, {WHOLE}, "packfrag", 1.0, id="GPU number: whole GPUs"),
        pytest.param(
            {"deviceshare.VGPUEnable": True, "deviceshare.SchedulePolicy": "binpack"},
            {SHARE, WHOLE},
            "binpack",
            1.0,
            id="vGPU with binpack",
        ),
        pytest.param(
            {
                "deviceshare.VGPUEnable": "true",
                "deviceshare.SchedulePolicy": "spread",
                "deviceshare.ScheduleWeight": 10,
            },
            {SHARE, WHOLE},
            "spread",
            10.0,
            id="spread, weighted",
        ),
        pytest.param(
            {"deviceshare.GPUSharingEnable": True, "deviceshare.SchedulePolicy": "fgd"},
            {SHARE},
            "fgd",
            1.0,
            id="a gpushare policy",
        ),
    ],
)
def test_volcanos_arguments_map_onto_gpushare(
    arguments: dict[str, object], kinds: set[GpuKind], policy: str, weight: float
) -> None:
    plugin = build(arguments, BuildContext())
    assert isinstance(plugin, DeviceShare)
    assert (set(plugin.device_kinds), plugin.args.policy, plugin.args.weight) == (kinds, policy, weight)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        pytest.param(
            {"deviceshare.GPUSharingEnable": True, "deviceshare.GPUNumberEnable": True},
            "cannot both be true",
            id="sharing and number",
        ),
        pytest.param(
            {"deviceshare.GPUNumberEnable": True, "deviceshare.VGPUEnable": True},
            "cannot be used together",
            id="number and vGPU",
        ),
        pytest.param(
            {"deviceshare.SchedulePolicy": "roundrobin"}, "unknown SchedulePolicy 'roundrobin'", id="an unknown policy"
        ),
        pytest.param(
            {"deviceshare.GPUExclusiveRules": [{"team": "a"}]}, "GPUExclusiveRules is not supported", id="exclusivity"
        ),
        pytest.param(
            {"deviceshare.GPUSharingEnabled": True}, "unknown argument 'deviceshare.GPUSharingEnabled'", id="a typo"
        ),
    ],
)
def test_what_cannot_be_honoured_is_refused(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ArgumentError, match=message):
        build(arguments, BuildContext())


def test_what_means_nothing_here_warns() -> None:
    context = BuildContext()
    build({"deviceshare.GPUSharingEnable": True, "deviceshare.NodeLockEnable": True}, context)
    assert len(context.warnings) == 1
    assert "NodeLockEnable has no effect here" in context.warnings[0]


def test_with_sharing_only_a_whole_gpu_pod_is_not_placed_and_a_share_is() -> None:
    conf = """
actions: "allocate"
tiers:
- plugins:
  - name: predicates
  - name: deviceshare
    arguments: {deviceshare.GPUSharingEnable: true}
"""
    cache = static_cache("n1", gpus=2)
    cache.add_job(job_of("shared", share(300)))
    cache.add_job(job_of("whole", whole(1), created=1.0))
    Framework(parse_conf(conf), builtin_registry(), BuildContext()).run_once(cache)
    assert sorted(cache.bound) == [PodKey("shared-0")]
    assert cache.bindings[PodKey("shared-0")].devices  # written in PreBind, as gpushare does
    assert "no plugin allocates" in cache.unschedulable[PodKey("whole-0")].message
