"""The built-in registry: the seed design's names of the GPU plugins build those plugins."""

from __future__ import annotations

import functools

import pytest

from runtimekit.scheduler.builtin import ALIASES, builtin_registry
from runtimekit.scheduler.framework import Framework, parse_conf
from runtimekit.scheduler.plugins.gpushare.plugin import GpuSharePlugin as GpuShare
from runtimekit.scheduler.plugins.mig import Mig


@pytest.mark.parametrize(
    ("alias", "plugin", "kind", "arguments"),
    [
        pytest.param("StandardPlugin", "gpushare", GpuShare, "{gpushare.policy: bestfit}", id="StandardPlugin"),
        pytest.param("MigPlugin", "mig", Mig, "{mig.policy: firstfit}", id="MigPlugin"),
    ],
)
def test_an_alias_builds_the_plugin_it_names(alias: str, plugin: str, kind: type, arguments: str) -> None:
    conf = parse_conf(f'actions: "allocate"\ntiers:\n- plugins:\n  - name: {alias}\n    arguments: {arguments}\n')
    framework = Framework(conf, builtin_registry())
    (built,) = framework.plugins.every.flat
    assert isinstance(built, kind)
    assert built.name == plugin
    assert ALIASES[alias] == plugin


def test_a_replaced_plugin_is_replaced_under_its_alias_too() -> None:
    from runtimekit.scheduler.plugins.gpushare import plugin

    replacement = functools.partial(plugin.build, workload=None)
    registry = builtin_registry({"gpushare": replacement})
    assert registry.plugins["StandardPlugin"] is replacement
    assert "alias of gpushare" in registry.origins["p:StandardPlugin"]
