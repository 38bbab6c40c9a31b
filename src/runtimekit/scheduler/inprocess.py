"""The scheduling framework built in process, for callers without an API server: the simulator, the
benchmarks and tests. A typed `FrameworkConfig` in (a parsed `SchedulerConf`, or `placement_conf` for
the simulator's one-plugin conf), a `Framework` out, built against the built-in registry and failing
fast (the first bad name or argument raises). A target workload is handed to the gpushare plugin as
it is built, so nobody writes conf text to parse it back or reaches into a built plugin.

The live scheduler's counterpart is `build.py` (`build_scheduler`), which reads a conf file and
reports every problem at once.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import partial

from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.framework import BuildContext, Framework
from runtimekit.scheduler.framework.conf import PluginOption, SchedulerConf, Tier
from runtimekit.scheduler.plugins.dra import DynamicResources
from runtimekit.scheduler.plugins.gpushare import plugin as gpushare
from runtimekit.scheduler.policies import TargetWorkload

__all__ = ["FrameworkConfig", "build_framework", "placement_conf"]


@dataclass(frozen=True)
class FrameworkConfig:
    conf: SchedulerConf
    seed: int = 0  # the build context's RNG (the random policy, tie-breaks)
    protocol: KitProtocol = field(default_factory=KitProtocol.default)
    # FGD's target workload, handed to gpushare as it is built; None: its `gpushare.workload` file, else learned
    workload: TargetWorkload | None = None
    explain: bool = True  # work out why a pod fits nowhere (the simulator does not ask)


def placement_conf(policy: str, claims: bool = False) -> SchedulerConf:
    """One action, allocate, and one plugin, gpushare placing by `policy`: how the simulator schedules
    each arriving pod. With `claims`, `dynamicresources` before it, as in the default conf (pods that
    ask through ResourceClaims). An unknown policy is refused when the framework is built."""
    option = PluginOption(gpushare.NAME, {f"{gpushare.NAME}.policy": policy})
    options = (PluginOption(DynamicResources.name), option) if claims else (option,)
    return SchedulerConf(("allocate",), (Tier(options),), source="<simulate>")


def build_framework(config: FrameworkConfig) -> Framework:
    """The framework of `config.conf`; raises the first problem (`RegistryError`, `ArgumentError`, ...)."""
    workload = config.workload
    replaced = {gpushare.NAME: partial(gpushare.build, workload=workload)} if workload is not None else None
    context = BuildContext(protocol=config.protocol, rng=random.Random(config.seed))
    return Framework(config.conf, builtin_registry(replaced), context, explain=config.explain)
