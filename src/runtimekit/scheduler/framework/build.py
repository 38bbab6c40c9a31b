"""Building a framework's actions and plugins from a conf and a registry, reporting every problem.

One place decides what a conf entry becomes: an action or plugin built from its registered builder
(a name a plugins directory provides is imported first: `Registry.provide`, so a module is
imported only when a conf names it, and a conf reload that names a new one imports it then),
a warning (a name Volcano ships that is not built here: skipped, `known_names.py`; what a builder says
through `BuildContext.warn`), or a problem (unknown name, bad argument, a builder that fails).
`Framework(...)` calls it failing fast (the first error raised as it was: `RegistryError`,
`ArgumentError`, ...); `check.py` calls it collecting, so that `--check-conf`, start-up and conf
reload can say every problem at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtimekit.scheduler.framework.action import Action
from runtimekit.scheduler.framework.arguments import ArgumentError
from runtimekit.scheduler.framework.conf import PluginOption, SchedulerConf
from runtimekit.scheduler.framework.interfaces import Plugin
from runtimekit.scheduler.framework.known_names import (
    NameCheck,
    check_action,
    check_plugin,
    implied_plugins,
    unsupported_arguments,
)
from runtimekit.scheduler.framework.problems import ConfError, Problems
from runtimekit.scheduler.framework.registry import BuildContext, Kind, Registry, RegistryError

# What a builder raises for a bad conf entry; anything else is a builder's bug, raised as it is
# when failing fast and reported as an error when collecting.
CONF_ERRORS = (RegistryError, ArgumentError, ConfError)


@dataclass(frozen=True)
class BuiltPlugin:
    option: PluginOption
    plugin: Plugin


def build_actions(
    conf: SchedulerConf, registry: Registry, context: BuildContext, problems: Problems, source: str = "<conf>"
) -> list[Action]:
    """The conf's actions in order; an action that cannot be built is reported and left out, one that
    Volcano ships but that is not built here is skipped with a warning (`known_names.py`)."""
    actions = []
    for name in conf.actions:
        where = f"{source}: actions: {name}"
        if not _provided(registry, name, "action", problems, where):
            continue
        if not _wanted(check_action(name, registry.actions), problems, where):
            continue
        try:
            actions.append(registry.build_action(name, conf.action_arguments(name), context))
        except Exception as exc:
            _report(problems, where, exc)
        _carry(context, problems, where)
    for name in conf.configurations:
        if name not in conf.actions:
            problems.warning(f"{source}: configurations: {name!r} is not in 'actions'; its arguments are not used")
    return actions


def build_tiers(
    conf: SchedulerConf, registry: Registry, context: BuildContext, problems: Problems, source: str = "<conf>"
) -> list[list[BuiltPlugin]]:
    """The conf's plugins tier by tier; a plugin that cannot be built is reported and left out."""
    tiers: list[list[BuiltPlugin]] = []
    named = {option.name for tier in conf.tiers for option in tier.plugins}
    for i, tier in enumerate(conf.tiers):
        built: list[BuiltPlugin] = []
        for j, option in enumerate(tier.plugins):
            where = f"{source}: tiers[{i}].plugins[{j}] ({option.name})"
            if not _provided(registry, option.name, "plugin", problems, where):
                continue
            if not _wanted(check_plugin(option.name, registry.plugins), problems, where):
                continue
            arguments, dropped = unsupported_arguments(option.name, option.arguments)
            for warning in dropped:
                context.warn(warning)
            arguments, implied = implied_plugins(option.name, arguments)
            _build_one(PluginOption(option.name, arguments, option.flags), registry, context, problems, where, built)
            for name in implied:  # Volcano's switch for what is a plugin here, as if named right after
                if name not in named:
                    named.add(name)
                    _build_one(PluginOption(name), registry, context, problems, f"{where}: {name}", built)
        tiers.append(built)
    return tiers


def _build_one(
    option: PluginOption,
    registry: Registry,
    context: BuildContext,
    problems: Problems,
    where: str,
    built: list[BuiltPlugin],
) -> None:
    try:
        plugin = registry.build_plugin(option.name, option.arguments, context)
        plugin.flags = dict(option.flags)
        if option.flags.get("enableHierarchy") and not plugin.hierarchy:
            context.warn("enableHierarchy has no effect here (only capacity has hierarchical queues)")
        built.append(BuiltPlugin(option, plugin))
    except Exception as exc:
        _report(problems, where, exc)
    _carry(context, problems, where)


def _provided(registry: Registry, name: str, kind: Kind, problems: Problems, where: str) -> bool:
    """Import the module of a plugins directory that provides `name`, if one does (False: it failed,
    reported)."""
    try:
        registry.provide(name, kind)
    except RegistryError as exc:
        problems.error(f"{where}: {exc}", exc)
        return False
    return True


def _wanted(check: NameCheck, problems: Problems, where: str) -> bool:
    """Build it (True); skip it with a warning, or report it as an error (False)."""
    if check.error:
        problems.error(f"{where}: {check.error}", RegistryError(check.error))
    elif check.warning:
        problems.warning(f"{where}: {check.warning}")
    return check.build


def _carry(context: BuildContext, problems: Problems, where: str) -> None:
    """The warnings a builder gave through its context become the conf's warnings."""
    for message in context.warnings:
        problems.warning(f"{where}: {message}")
    context.warnings.clear()


def _report(problems: Problems, where: str, exc: Exception) -> None:
    if isinstance(exc, CONF_ERRORS):
        problems.error(f"{where}: {exc}", exc)
    elif problems.fail_fast:
        raise exc
    else:
        problems.error(f"{where}: building failed: {type(exc).__name__}: {exc}")
