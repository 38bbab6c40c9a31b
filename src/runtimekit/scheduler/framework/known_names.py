"""What Volcano's scheduler ships, by name, and what a Volcano conf naming it gets here.

Volcano registers its actions and plugins by name at start (`pkg/scheduler/actions/factory.go`,
`pkg/scheduler/plugins/factory.go`). A conf written for Volcano may name any of them. Here:

- a name this scheduler's registry knows is built;
- a name Volcano ships that the registry does not know is skipped with a warning naming it, as
  Volcano itself skips a plugin it cannot build, so Volcano's own confs load;
- a name neither knows is an error (a typo must not pass silently).

`check_plugin` and `check_action` give that verdict for one name; the framework builder and the
conf checker both call them, so the two never disagree. `unsupported_arguments` takes out of a
plugin's arguments the Volcano keys whose feature does not exist here, or lives in another plugin
(volume binding; predicates' GPU sharing of Volcano up to v1.8),
with a warning when they turn it on, before the plugin sees them; `implied_plugins` those that turn
on a plugin of its own here (Volcano's DRA switch of predicates: `dynamicresources`). A leaf module:
it imports nothing of the framework.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from runtimekit.scheduler.framework.arguments import Arguments

# pkg/scheduler/plugins/factory.go of Volcano (the PluginName of each registered builder), those of
# earlier releases (`devices`, `reservation`) and `capacity-card`, which Volcano's CI conf
# (installer/helm/chart/volcano/config/volcano-scheduler-capacity-card-ci.conf) names.
VOLCANO_PLUGINS = frozenset(
    {
        "binpack",
        "capacity",
        "capacity-card",
        "cdp",
        "conformance",
        "devices",
        "deviceshare",
        "drf",
        "extender",
        "gang",
        "network-topology-aware",
        "nodegroup",
        "nodeorder",
        "numa-aware",
        "overcommit",
        "pdb",
        "predicates",
        "priority",
        "proportion",
        "rescheduling",
        "reservation",
        "resource-strategy-fit",
        "resourcequota",
        "sla",
        "task-topology",
        "tdm",
        "usage",
    }
)

# pkg/scheduler/actions/factory.go of current Volcano (each action's Name()).
# `elect` and `reserve` are Volcano 1.1-1.5's (with its `reservation` plugin), gone since 1.6
VOLCANO_ACTIONS = frozenset(
    {
        "allocate",
        "backfill",
        "elect",
        "enqueue",
        "gangpreempt",
        "gangreclaim",
        "preempt",
        "reclaim",
        "reserve",
        "shuffle",
    }
)


@dataclass(frozen=True)
class NameCheck:
    """The verdict on one action or plugin name of a conf: build it (neither `warning` nor `error`),
    skip it with `warning`, or refuse the conf with `error`. Messages name the name."""

    name: str
    warning: str = ""
    error: str = ""

    @property
    def build(self) -> bool:
        return not self.warning and not self.error


def check_plugin(name: str, known: Collection[str]) -> NameCheck:
    """The verdict on plugin `name`, given the plugin names the registry knows."""
    if name in known:
        return NameCheck(name)
    if name in VOLCANO_PLUGINS:
        return NameCheck(name, warning=f"plugin {name!r} is one of Volcano's but not built here; skipped")
    return NameCheck(name, error=f"unknown plugin {name!r}; known plugins: {', '.join(sorted(known))}")


def check_action(name: str, known: Collection[str]) -> NameCheck:
    """The verdict on action `name`, given the action names the registry knows."""
    if name in known:
        return NameCheck(name)
    if name in VOLCANO_ACTIONS:
        return NameCheck(name, warning=f"action {name!r} is one of Volcano's but not built here; skipped")
    return NameCheck(name, error=f"unknown action {name!r}; known actions: {', '.join(sorted(known))}")


# Volcano arguments of plugins built here whose feature this scheduler does not have: key -> why.
UNSUPPORTED_ARGUMENTS: dict[str, dict[str, str]] = {
    "predicates": {
        # Volcano (up to v1.8) shared GPUs in predicates; here the gpushare plugin (or deviceshare) does
        "predicate.GPUSharingEnable": "GPUs are placed by the gpushare plugin here (or deviceshare); add it",
        "predicate.GPUNumberEnable": "GPUs are placed by the gpushare plugin here (or deviceshare); add it",
        "predicate.VGPUEnable": "GPUs are placed by the gpushare plugin here (or deviceshare); add it",
    },
}


# Volcano arguments that turn on what is a plugin of its own here: plugin -> key -> that plugin. Volcano
# runs kube's DynamicResources inside predicates when `predicate.DynamicResourceAllocationEnable` is
# true; here `dynamicresources` does, as if the conf named it right after predicates.
IMPLIED_PLUGINS: dict[str, dict[str, str]] = {
    "predicates": {"predicate.DynamicResourceAllocationEnable": "dynamicresources"},
}


def implied_plugins(plugin: str, arguments: Arguments) -> tuple[dict[str, Any], list[str]]:
    """The arguments without the keys of `IMPLIED_PLUGINS`, and the plugins those set to true turn on
    (a value that is not true or false is left in, for the plugin to refuse by name)."""
    known = IMPLIED_PLUGINS.get(plugin, {})
    kept = {k: v for k, v in arguments.items() if k not in known or not _flag(v)}
    on = [known[k] for k, v in arguments.items() if k in known and _flag(v) and str(v).lower() == "true"]
    return kept, on


def _flag(value: Any) -> bool:
    return isinstance(value, bool) or (isinstance(value, str) and value.lower() in ("true", "false"))


def unsupported_arguments(plugin: str, arguments: Arguments) -> tuple[dict[str, Any], list[str]]:
    """The arguments without the keys of `UNSUPPORTED_ARGUMENTS`, and a warning for each of them that
    is set to anything but false."""
    known = UNSUPPORTED_ARGUMENTS.get(plugin, {})
    kept = {k: v for k, v in arguments.items() if k not in known}
    warnings = [
        f"plugin {plugin!r}: {key}: {known[key]}; ignored"
        for key, value in arguments.items()
        if key in known and value not in (False, "false", "False")
    ]
    return kept, warnings
