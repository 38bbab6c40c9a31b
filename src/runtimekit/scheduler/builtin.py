"""The registry of built-in actions and plugins (and the seed design's aliases of the GPU plugins).
Callers build it explicitly and may add their own (plugins directory, entry points) before building
a framework."""

from __future__ import annotations

from collections.abc import Mapping

from runtimekit.scheduler.actions import allocate, backfill, enqueue, preempt, reclaim
from runtimekit.scheduler.framework.registry import ActionBuilder, PluginBuilder, Registry, RegistryError
from runtimekit.scheduler.plugins import (
    binpack,
    capacity,
    conformance,
    deviceshare,
    dra,
    drf,
    gang,
    mig,
    nodeorder,
    overcommit,
    pdb,
    predicates,
    priority,
    proportion,
    resourcequota,
    sla,
    strategyfit,
)
from runtimekit.scheduler.plugins.gpushare import plugin as gpushare

ACTIONS: dict[str, ActionBuilder] = {
    "enqueue": enqueue.build,
    "allocate": allocate.build,
    "backfill": backfill.build,
    "preempt": preempt.build,
    "reclaim": reclaim.build,
}
PLUGINS: dict[str, PluginBuilder] = {
    "priority": priority.build,
    "gang": gang.build,
    "conformance": conformance.build,
    "drf": drf.build,
    "proportion": proportion.build,
    "overcommit": overcommit.build,
    "predicates": predicates.build,
    "nodeorder": nodeorder.build,
    "binpack": binpack.build,
    "gpushare": gpushare.build,
    "mig": mig.build,
    "deviceshare": deviceshare.build,
    "capacity": capacity.build,
    "sla": sla.build,
    "resourcequota": resourcequota.build,
    "pdb": pdb.build,
    "dynamicresources": dra.build,
    "resource-strategy-fit": strategyfit.build,
}
# The seed design's names for the GPU plugins, which confs written for it use: each builds the plugin
# it names (under that plugin's own name), so such a conf runs unchanged.
ALIASES: dict[str, str] = {"StandardPlugin": gpushare.NAME, "MigPlugin": mig.NAME}


def builtin_registry(replaced: Mapping[str, PluginBuilder] | None = None) -> Registry:
    """The built-in actions and plugins; `replaced` builds some plugins otherwise (the simulator's
    gpushare with its target workload handed over, `scheduler/inprocess.py`)."""
    unknown = sorted(set(replaced or ()) - set(PLUGINS))
    if unknown:
        raise RegistryError(f"no built-in plugin {unknown[0]!r} to replace")
    registry = Registry()
    for name, action in ACTIONS.items():
        registry.register_action(name, action)
    builders = {**PLUGINS, **(replaced or {})}
    for name, plugin in builders.items():
        registry.register_plugin(name, plugin)
    for alias, name in ALIASES.items():
        registry.register_plugin(alias, builders[name], origin=f"builtin (an alias of {name})")
    return registry
