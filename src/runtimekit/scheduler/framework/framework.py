"""The framework: actions and plugins built once from a configuration and a registry, plugins
sorted into per-point lists per tier, and the session cycle (open, run the actions, close).

Building fails fast: an unknown action or plugin, or a bad argument, raises with its name.
Plugins are built once and live across sessions (so caches such as FGD's fragmentation table
persist); `on_session_open/close` are called every session.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from runtimekit.scheduler.framework.action import Action
from runtimekit.scheduler.framework.cache import Cache
from runtimekit.scheduler.framework.conf import PluginOption, SchedulerConf
from runtimekit.scheduler.framework.info import JobKey
from runtimekit.scheduler.framework.interfaces import Plugin, PluginLists
from runtimekit.scheduler.framework.registry import BuildContext, Registry
from runtimekit.scheduler.framework.session import Session

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BuiltPlugin:
    option: PluginOption
    plugin: Plugin


class Framework:
    def __init__(
        self, conf: SchedulerConf, registry: Registry, context: BuildContext | None = None, explain: bool = True
    ) -> None:
        self.conf = conf
        self.explain = explain
        self.context = context or BuildContext()
        self.actions: list[Action] = [
            registry.build_action(name, conf.action_arguments(name), self.context) for name in conf.actions
        ]
        self.action_names = tuple(conf.actions)
        self.enabled_actions = frozenset(self.action_names)
        self.tiers: list[list[BuiltPlugin]] = [
            [BuiltPlugin(opt, registry.build_plugin(opt.name, opt.arguments, self.context)) for opt in tier.plugins]
            for tier in conf.tiers
        ]
        self.plugins = PluginLists.build([[(b.option, b.plugin) for b in tier] for tier in self.tiers])

    def plugin(self, name: str) -> Plugin | None:
        return next((p for p in self.plugins.every.flat if p.name == name), None)

    def open_session(self, cache: Cache) -> Session:
        ssn = Session(self.plugins, cache, cache.snapshot(), self.enabled_actions, self.explain)
        for plugin in self.plugins.every.flat:
            plugin.on_session_open(ssn)
        return ssn

    def close_session(self, ssn: Session) -> None:
        for plugin in self.plugins.every.flat:
            plugin.on_session_close(ssn)
        touched = ssn.touched_jobs
        for key in sorted(touched) if len(touched) > 1 else touched:
            job = ssn.jobs.get(JobKey(key))
            if job is not None:
                ssn.cache.job_updated(job)

    def run_once(self, cache: Cache) -> Session:
        """One scheduling cycle: open a session, run every action in order, close it."""
        ssn = self.open_session(cache)
        try:
            for action in self.actions:
                action.execute(ssn)
        finally:
            self.close_session(ssn)
        return ssn
