"""`build_framework`: the simulator's framework from a typed conf, with its target workload handed to
gpushare as it is built; `placement_conf` is the conf the simulator's text used to say."""

from __future__ import annotations

import pytest

from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.framework import RegistryError, parse_conf
from runtimekit.scheduler.framework.arguments import ArgumentError
from runtimekit.scheduler.inprocess import FrameworkConfig, build_framework, placement_conf
from runtimekit.scheduler.plugins.gpushare import plugin as gpushare
from runtimekit.scheduler.plugins.gpushare.plugin import GpuSharePlugin
from runtimekit.scheduler.plugins.gpushare.policies.fgd import FgdPolicy
from runtimekit.scheduler.policies import POLICY_NAMES, PodType, TargetWorkload


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_the_placement_conf_is_the_one_plugin_conf(policy: str) -> None:
    text = (
        f'actions: "allocate"\ntiers:\n- plugins:\n  - name: gpushare\n    arguments: {{gpushare.policy: {policy}}}\n'
    )
    assert placement_conf(policy) == parse_conf(text)


@pytest.mark.parametrize("given", [True, False], ids=["handed-over", "learned"])
def test_the_target_workload_is_handed_to_gpushare(given: bool) -> None:
    workload = TargetWorkload.from_types([PodType(1000, 500, 1), PodType(2000, 1000, 1)]) if given else None
    framework = build_framework(FrameworkConfig(placement_conf("fgd"), workload=workload, explain=False))
    plugin = framework.plugin("gpushare")
    assert isinstance(plugin, GpuSharePlugin)
    fgd = plugin.policies["fgd"]
    assert isinstance(fgd, FgdPolicy)
    assert fgd.workload is workload
    assert not framework.explain


def test_an_unknown_policy_is_refused_when_built() -> None:
    with pytest.raises(ArgumentError, match="unknown policy 'nope'"):
        build_framework(FrameworkConfig(placement_conf("nope")))


def test_only_a_built_in_plugin_can_be_replaced() -> None:
    with pytest.raises(RegistryError, match="no built-in plugin 'nosuch'"):
        builtin_registry({"nosuch": gpushare.build})
