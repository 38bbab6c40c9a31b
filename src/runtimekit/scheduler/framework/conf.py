"""The scheduler configuration in Volcano's format (`volcano-scheduler.conf`).

    actions: "enqueue, allocate, backfill"
    tiers:
    - plugins:
      - name: priority
      - name: gang
        enablePreemptable: false
      - name: gpushare
        arguments: {gpushare.policy: fgd}
    configurations:
    - name: allocate
      arguments: {...}

Every `enable...` flag that is not set is true (Volcano's ApplyPluginConfDefaults). Unknown top-level
keys, unknown flags, malformed values, a key given twice in one mapping, a plugin listed twice and a
file that is not UTF-8 are errors naming them; unknown action and plugin names are caught when the
framework is built against a registry (`build.py`), and bad plugin arguments (NaN or infinite
weights included) when the plugin is built.

The file may be the bare conf or a whole ConfigMap (as `kubectl get configmap -o yaml` writes it, or
one document of a rendered chart): the conf is then its `volcano-scheduler.conf` key, or its only key.

`parse_conf`/`load_conf` raise `ConfError` at the first error; `read_conf` reports every problem to a
`Problems` and returns what it could read, for `--check-conf`, start-up and conf reload.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml

from runtimekit.base import textfiles
from runtimekit.kube.objects import ConfigMap, meta
from runtimekit.scheduler.framework.arguments import Arguments
from runtimekit.scheduler.framework.problems import ConfError, Problems

__all__ = [
    "CONFIGMAP_KEY",
    "ConfError",
    "PluginOption",
    "SchedulerConf",
    "Tier",
    "load_conf",
    "parse_conf",
    "read_conf",
]
# Volcano's YAML flag keys (note the mix of enable... and enabled...).
PLUGIN_FLAGS = (
    "enableJobOrder",
    "enableHierarchy",
    "enableJobReady",
    "enableJobPipelined",
    "enableTaskOrder",
    "enablePreemptable",
    "enableReclaimable",
    "enablePreemptive",
    "enableQueueOrder",
    "enabledClusterOrder",
    "enablePredicate",
    "enableBestNode",
    "enableNodeOrder",
    "enableTargetJob",
    "enableReservedNodes",
    "enableJobEnqueued",
    "enabledVictim",
    "enableJobStarving",
    "enabledOverused",
    "enabledAllocatable",
    "enabledHyperNodeOrder",
    "enabledSubJobReady",
    "enabledSubJobPipelined",
    "enabledSubJobOrder",
    "enabledHyperNodeGradient",
    "enableDevice",  # ours: the device-allocation point (which GPUs inside the chosen node)
)
_TOP_KEYS = {"actions", "tiers", "configurations", "metrics"}
CONFIGMAP_KEY = "volcano-scheduler.conf"  # the key Volcano's chart mounts


@dataclass(frozen=True)
class PluginOption:
    name: str
    arguments: Arguments = field(default_factory=dict)
    flags: Mapping[str, bool] = field(default_factory=dict)

    def enabled(self, flag: str) -> bool:
        return self.flags.get(flag, True)


@dataclass(frozen=True)
class Tier:
    plugins: tuple[PluginOption, ...]


@dataclass(frozen=True)
class SchedulerConf:
    actions: tuple[str, ...]
    tiers: tuple[Tier, ...]
    configurations: Mapping[str, Arguments] = field(default_factory=dict)
    metrics: Mapping[str, str] = field(default_factory=dict)
    source: str = field(default="<conf>", compare=False)  # where it was read: file, ConfigMap and key

    def plugin_names(self) -> list[str]:
        return [p.name for tier in self.tiers for p in tier.plugins]

    def action_arguments(self, action: str) -> Arguments:
        return self.configurations.get(action, {})


DEFAULT_CONF_TEXT = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: dynamicresources
  - name: proportion
  - name: nodeorder
  - name: gpushare
  - name: mig
"""


def parse_conf(text: str, source: str = "<conf>") -> SchedulerConf:
    """The conf in `text`; raises ConfError at the first problem."""
    conf = read_conf(text, source, Problems(fail_fast=True))
    assert conf is not None  # failing fast, an unreadable conf has raised
    return conf


def load_conf(path: str | Path | None) -> SchedulerConf:
    """The conf in the file at `path` (the built-in default for None); raises ConfError at the first problem."""
    if path is None:
        return parse_conf(DEFAULT_CONF_TEXT, "<default>")
    return parse_conf(read_text(path), str(path))


def read_text(path: str | Path) -> str:
    """The file's text; ConfError on one line when it cannot be read or is not UTF-8."""
    try:
        return textfiles.read_text(path)
    except textfiles.TextError as exc:
        raise ConfError(str(exc)) from None


def read_conf(text: str, source: str, problems: Problems) -> SchedulerConf | None:
    """Parse `text` (a bare conf or a ConfigMap holding one), reporting every problem to `problems`.
    Returns the conf with what could be read (bad entries left out), or None when there is no conf
    to speak of (not YAML, not a mapping, no usable ConfigMap key)."""
    try:
        documents = [d for d in textfiles.load_yaml_all(text) if d is not None]
    except yaml.YAMLError as exc:  # a key given twice too
        problems.error(f"{source}: not valid YAML: {textfiles.yaml_problem(exc)}")
        return None
    if len(documents) > 1 or (documents and _is_configmap(documents[0])):
        found = _from_configmaps(documents, source, problems)
        if found is None:
            return None
        text, source = found
        return read_conf(text, source, problems)
    data = documents[0] if documents else None
    if not isinstance(data, Mapping):
        problems.error(f"{source}: expected a mapping with 'actions' and 'tiers'")
        return None
    unknown = sorted(set(data) - _TOP_KEYS, key=str)
    for key in unknown:
        problems.error(f"{source}: unknown key {key!r}; expected {sorted(_TOP_KEYS)}")
    return SchedulerConf(
        _actions(source, data.get("actions"), problems),
        _tiers(source, data.get("tiers"), problems),
        _configurations(source, data.get("configurations"), problems),
        _metrics(source, data.get("metrics"), problems),
        source,
    )


def _is_configmap(doc: object) -> bool:
    return isinstance(doc, Mapping) and doc.get("kind") == "ConfigMap"


def _from_configmaps(documents: list[Any], source: str, problems: Problems) -> tuple[str, str] | None:
    """The conf text of a ConfigMap file: the `volcano-scheduler.conf` key, or the only key."""
    maps = [cast(ConfigMap, d) for d in documents if _is_configmap(d)]
    if not maps:
        problems.error(f"{source}: {len(documents)} YAML documents and no ConfigMap among them")
        return None
    chosen = [m for m in maps if CONFIGMAP_KEY in (m.get("data") or {})]
    key = CONFIGMAP_KEY
    if not chosen:
        chosen = [m for m in maps if isinstance(m.get("data"), Mapping) and len(m["data"]) == 1]
        key = next(iter(chosen[0]["data"])) if len(chosen) == 1 else key
    if len(chosen) != 1:
        names = ", ".join(f"{_name(m)} ({', '.join(map(str, m.get('data') or {})) or 'no data'})" for m in maps)
        problems.error(f"{source}: no single ConfigMap with a {CONFIGMAP_KEY!r} key or only one key: {names}")
        return None
    text = chosen[0]["data"][key]
    if not isinstance(text, str):
        problems.error(f"{source}: ConfigMap {_name(chosen[0])}: key {key!r} is not a string")
        return None
    return text, f"{source} (ConfigMap {_name(chosen[0])}, key {key})"


def _name(configmap: ConfigMap) -> str:
    return str(meta(configmap).get("name") or "<unnamed>")


def _actions(source: str, raw: object, problems: Problems) -> tuple[str, ...]:
    if not isinstance(raw, str) or not raw.strip():
        problems.error(f"{source}: 'actions' must be a comma-separated string of action names")
        return ()
    return tuple(a.strip() for a in raw.split(",") if a.strip())


def _tiers(source: str, raw: object, problems: Problems) -> tuple[Tier, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.error(f"{source}: 'tiers' must be a list")
        return ()
    tiers = []
    for i, tier in enumerate(raw):
        if not isinstance(tier, Mapping) or not isinstance(tier.get("plugins"), list):
            problems.error(f"{source}: tiers[{i}] must be a mapping with a 'plugins' list")
            continue
        plugins = (_plugin(source, f"tiers[{i}].plugins[{j}]", p, problems) for j, p in enumerate(tier["plugins"]))
        tiers.append(Tier(tuple(p for p in plugins if p is not None)))
    _check_plugins_once(source, tiers, problems)
    return tuple(tiers)


def _check_plugins_once(source: str, tiers: list[Tier], problems: Problems) -> None:
    """A plugin listed twice would vote twice (its scores added twice, its predicates run twice)."""
    first: dict[str, str] = {}
    for i, tier in enumerate(tiers):
        for j, plugin in enumerate(tier.plugins):
            where = f"tiers[{i}].plugins[{j}]"
            if plugin.name in first:
                why = f"plugin {plugin.name!r} is listed twice (first at {first[plugin.name]})"
                problems.error(f"{source}: {where}: {why}")
            else:
                first[plugin.name] = where


def _plugin(source: str, where: str, raw: object, problems: Problems) -> PluginOption | None:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str) or not raw["name"]:
        problems.error(f"{source}: {where} needs a 'name'")
        return None
    flags: dict[str, bool] = {}
    for key, value in raw.items():
        if key in ("name", "arguments"):
            continue
        if key not in PLUGIN_FLAGS:
            problems.error(f"{source}: {where} ({raw['name']}): unknown key {key!r}")
        elif not isinstance(value, bool):
            problems.error(f"{source}: {where} ({raw['name']}): {key} must be true or false")
        else:
            flags[key] = value
    args = raw.get("arguments")
    args = {} if args is None else args
    if not isinstance(args, Mapping):
        problems.error(f"{source}: {where} ({raw['name']}): arguments must be a mapping")
        args = {}
    return PluginOption(raw["name"], dict(args), flags)


def _configurations(source: str, raw: object, problems: Problems) -> dict[str, Arguments]:
    configurations: dict[str, Arguments] = {}
    if raw is None:
        return configurations
    if not isinstance(raw, list):
        problems.error(f"{source}: 'configurations' must be a list")
        return configurations
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            problems.error(f"{source}: configurations[{i}] needs a 'name'")
            continue
        args = item.get("arguments")
        args = {} if args is None else args
        if not isinstance(args, Mapping):
            problems.error(f"{source}: configurations[{i}].arguments must be a mapping")
            continue
        configurations[item["name"]] = dict(args)
    return configurations


def _metrics(source: str, raw: object, problems: Problems) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.error(f"{source}: 'metrics' must be a mapping")
        return {}
    return {str(k): str(v) for k, v in raw.items()}
