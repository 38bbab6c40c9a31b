"""The registry of built-in actions and plugins. Callers build it explicitly and may add their
own (plugins directory, entry points) before building a framework."""

from __future__ import annotations

from runtimekit.scheduler.actions import allocate, backfill, enqueue, preempt, reclaim
from runtimekit.scheduler.framework.registry import ActionBuilder, PluginBuilder, Registry
from runtimekit.scheduler.plugins import (
    binpack,
    capacity,
    conformance,
    deviceshare,
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
}


def builtin_registry() -> Registry:
    registry = Registry()
    for name, action in ACTIONS.items():
        registry.register_action(name, action)
    for name, plugin in PLUGINS.items():
        registry.register_plugin(name, plugin)
    return registry
