"""The registry of built-in actions and plugins. Callers build it explicitly and may add their
own (plugins directory, entry points) before building a framework."""

from __future__ import annotations

from runtimekit.scheduler.actions import allocate
from runtimekit.scheduler.framework.registry import Registry
from runtimekit.scheduler.plugins.gpushare import plugin as gpushare


def builtin_registry() -> Registry:
    registry = Registry()
    registry.register_action("allocate", allocate.build)
    registry.register_plugin("gpushare", gpushare.build)
    return registry
