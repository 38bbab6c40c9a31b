"""The framework: actions and plugins built once from a configuration and a registry, plugins
sorted into per-point lists per tier, and the session cycle (open, run the actions, close).

Building fails fast: an unknown action or plugin, or a bad argument, raises with its name. Given a
collecting `Problems`, it reports every problem there instead (`check.py`); such a framework is for
inspection only while the problems hold an error. An action or plugin Volcano ships that is not
built here is skipped with a warning (`known_names.py`); the warnings of a build are in `warnings`.
Plugins are built once and live across sessions (so caches such as FGD's fragmentation table
persist); `on_session_open/close` are called every session.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from runtimekit.scheduler.framework.action import Action, NeedsRunning
from runtimekit.scheduler.framework.build import BuiltPlugin, build_actions, build_tiers
from runtimekit.scheduler.framework.cache import Cache
from runtimekit.scheduler.framework.conf import SchedulerConf
from runtimekit.scheduler.framework.info import JobKey
from runtimekit.scheduler.framework.interfaces import Plugin, PluginLists
from runtimekit.scheduler.framework.observe import ON_SESSION_CLOSE, ON_SESSION_OPEN, Observer, QueueFigures
from runtimekit.scheduler.framework.problems import Problems
from runtimekit.scheduler.framework.registry import BuildContext, Registry
from runtimekit.scheduler.framework.rowmemos import RowMemos
from runtimekit.scheduler.framework.sampling import NodeSampler
from runtimekit.scheduler.framework.session import BindCycle, Session

log = logging.getLogger(__name__)


__all__ = ["BuiltPlugin", "Framework"]


class Framework:
    def __init__(
        self,
        conf: SchedulerConf,
        registry: Registry,
        context: BuildContext | None = None,
        explain: bool = True,
        problems: Problems | None = None,
        source: str = "<conf>",
    ) -> None:
        self.conf = conf
        self.explain = explain
        self.context = context or BuildContext()
        problems = problems if problems is not None else Problems(fail_fast=True)
        self.problems = problems
        self.actions: list[Action] = build_actions(conf, registry, self.context, problems, source)
        self.action_names = tuple(action.name for action in self.actions)  # skipped ones left out
        self.enabled_actions = frozenset(self.action_names)
        self.tiers: list[list[BuiltPlugin]] = build_tiers(conf, registry, self.context, problems, source)
        self.plugins = PluginLists.build([[(b.option, b.plugin) for b in tier] for tier in self.tiers])
        # what the live scheduler reads of the cluster for these actions and plugins, said once
        self.needs_running = any(a.needs_running for a in self.actions if isinstance(a, NeedsRunning))
        self.watched = frozenset(kind for plugin in self.plugins.watches.flat for kind in plugin.watches)
        # a plugin that counts the claims each queue's bound pods hold (capacity's DRA quotas) says so
        self.needs_claim_users = any(getattr(p, "needs_claim_users", False) for p in self.plugins.every.flat)
        self.observer: Observer | None = None  # told how long things take (the scheduler's metrics)
        self.sampler: NodeSampler | None = None  # how many feasible nodes to score (None: all)
        self.queue_figures: Mapping[str, QueueFigures] = {}  # the latest session's, from ReportsQueues plugins
        self.bind_cycle = BindCycle(self.plugins)
        self.row_memos = RowMemos()  # node scores and feasible rows per pod signature, session to session

    @property
    def warnings(self) -> list[str]:
        """The warnings of the build (Volcano names skipped, arguments that mean nothing here, ...)."""
        return [p.message for p in self.problems.warnings]

    def plugin(self, name: str) -> Plugin | None:
        return next((p for p in self.plugins.every.flat if p.name == name), None)

    def open_session(self, cache: Cache) -> Session:
        observer = self.observer
        started = time.perf_counter() if observer is not None else 0.0
        ssn = Session(
            self.plugins,
            cache,
            cache.snapshot(),
            self.enabled_actions,
            self.explain,
            observer,
            self.sampler,
            self.bind_cycle,
            self.row_memos,
        )
        for plugin in self.plugins.every.flat:
            if observer is None:
                plugin.on_session_open(ssn.view)
                continue
            begun = time.perf_counter()
            plugin.on_session_open(ssn.view)
            observer.plugin_done(plugin.name, ON_SESSION_OPEN, time.perf_counter() - begun)
        if observer is not None:
            observer.session_opened(time.perf_counter() - started)
        return ssn

    def close_session(self, ssn: Session) -> None:
        observer = self.observer
        if ssn.held:  # reserved but not bound (pipelined, or a statement left open)
            for task in list(ssn.held.values()):
                ssn.unreserve(task)
        for plugin in self.plugins.every.flat:
            begun = time.perf_counter() if observer is not None else 0.0
            plugin.on_session_close(ssn.view)
            if observer is not None:
                observer.plugin_done(plugin.name, ON_SESSION_CLOSE, time.perf_counter() - begun)
        ssn.state.clear()  # the cycle's state goes with it (a closed session may still be inspected)
        if self.plugins.queue_reports.flat:
            self.queue_figures = {
                name: figures
                for plugin in self.plugins.queue_reports.flat
                for name, figures in plugin.queue_figures().items()
            } or self.queue_figures
        touched = ssn.touched_jobs
        for key in sorted(touched) if len(touched) > 1 else touched:
            job = ssn.jobs.get(JobKey(key))
            if job is not None:
                ssn.cache.job_updated(job)

    def run_once(self, cache: Cache) -> Session:
        """One scheduling cycle: open a session, run every action in order, close it."""
        observer = self.observer
        started = time.perf_counter()
        ssn = self.open_session(cache)
        try:
            for action in self.actions:
                if observer is None:
                    action.execute(ssn)
                    continue
                begun = time.perf_counter()
                action.execute(ssn)
                observer.action_done(action.name, time.perf_counter() - begun)
        finally:
            self.close_session(ssn)
            if observer is not None:
                observer.session_done(time.perf_counter() - started)
        return ssn
