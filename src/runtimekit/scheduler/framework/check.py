"""The conf check: every problem of a scheduler conf at once, and warnings about what it will not do.

`check_conf` reads the conf (bare or in a ConfigMap), builds every action and plugin against the
registry, collecting each problem instead of stopping at the first, then looks at what the built
framework can do: a kind of GPU request (whole GPUs, shares, MIG slices) that no enabled device
plugin allocates is a warning, since pods asking for it would stay Pending without a word at start.

Callers: `runtimekit scheduler --check-conf FILE`, the scheduler's start-up (warnings logged, errors
stop it) and its conf reload (errors refuse the new conf).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from runtimekit.model import GpuKind
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.framework.conf import DEFAULT_CONF_TEXT, SchedulerConf, read_conf, read_text
from runtimekit.scheduler.framework.framework import Framework
from runtimekit.scheduler.framework.interfaces import DeviceKinds, PluginLists
from runtimekit.scheduler.framework.problems import ConfError, Problems
from runtimekit.scheduler.framework.registry import BuildContext, Registry


@dataclass(frozen=True)
class Checked:
    """A checked conf: the framework built from it when there is no error, and every problem."""

    source: str
    problems: Problems
    conf: SchedulerConf | None = None
    framework: Framework | None = None

    @property
    def ok(self) -> bool:
        return self.framework is not None


def check_file(path: str | Path | None, registry: Registry, context: BuildContext) -> Checked:
    """`check_conf` of a conf file (the built-in default for None)."""
    if path is None:
        return check_conf(DEFAULT_CONF_TEXT, "<default>", registry, context)
    try:
        text = read_text(path)
    except ConfError as exc:
        problems = Problems()
        problems.error(str(exc))
        return Checked(str(path), problems)
    return check_conf(text, str(path), registry, context)


def check_conf(text: str, source: str, registry: Registry, context: BuildContext) -> Checked:
    """Read, build and inspect a conf, collecting every problem (see the module docstring)."""
    problems = Problems()
    conf = read_conf(text, source, problems)
    if conf is None:
        return Checked(source, problems)
    return check_parsed(conf, registry, context, problems)


def check_parsed(
    conf: SchedulerConf, registry: Registry, context: BuildContext, problems: Problems | None = None
) -> Checked:
    """`check_conf` of a conf already read (the problems of reading it, if any, in `problems`)."""
    problems = problems if problems is not None else Problems()
    framework = Framework(conf, registry, context, problems=problems, source=conf.source)
    if problems.errors:  # a plugin that failed to build may be the one that allocates: no guessing
        return Checked(conf.source, problems, conf)
    device_coverage(framework.plugins, context.protocol, conf.source, problems)
    return Checked(conf.source, problems, conf, framework)


def covered_kinds(plugins: PluginLists) -> set[GpuKind]:
    """The kinds of GPU request the enabled DeviceAllocate plugins allocate (gpushare: whole GPUs and
    shares; mig: MIG slices; a plugin that does not say: every kind)."""
    covered: set[GpuKind] = set()
    for plugin in plugins.allocate_devices.flat:
        covered |= plugin.device_kinds if isinstance(plugin, DeviceKinds) else set(GpuKind)
    return covered


def kind_names(protocol: KitProtocol) -> dict[GpuKind, tuple[str, str]]:
    """Each kind of GPU request as a reader knows it (with the protocol's resource names), and the
    plugin that allocates it."""
    res = protocol.resources
    return {
        GpuKind.WHOLE: (f"whole GPUs ({res.gpu})", "gpushare"),
        GpuKind.SHARE: (f"GPU shares ({res.core}, {res.memory})", "gpushare"),
        GpuKind.MIG: (f"MIG slices ({res.mig_prefix}<profile>)", "mig"),
    }


def device_coverage(plugins: PluginLists, protocol: KitProtocol, source: str, problems: Problems) -> None:
    """Warn for each kind of GPU request that no enabled DeviceAllocate plugin allocates."""
    covered = covered_kinds(plugins)
    for kind, (what, name) in kind_names(protocol).items():
        if kind not in covered:
            problems.warning(
                f"{source}: no plugin allocates {what}: pods asking for them will stay Pending "
                f"(add {name} to a tier, with enableDevice left on)"
            )
