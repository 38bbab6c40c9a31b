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
keys, unknown flags and malformed values raise `ConfError` naming them; unknown action and plugin
names are caught when the framework is built against a registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

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


class ConfError(ValueError):
    """A scheduler configuration that cannot be used; the message names the key or name."""


@dataclass(frozen=True)
class PluginOption:
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
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
    configurations: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    metrics: Mapping[str, str] = field(default_factory=dict)

    def plugin_names(self) -> list[str]:
        return [p.name for tier in self.tiers for p in tier.plugins]

    def action_arguments(self, action: str) -> Mapping[str, Any]:
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
  - name: proportion
  - name: nodeorder
  - name: gpushare
  - name: mig
"""


def parse_conf(text: str, source: str = "<conf>") -> SchedulerConf:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfError(f"{source}: not valid YAML: {exc}") from exc
    if not isinstance(data, Mapping):
        raise ConfError(f"{source}: expected a mapping with 'actions' and 'tiers'")
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise ConfError(f"{source}: unknown key {unknown[0]!r}; expected {sorted(_TOP_KEYS)}")
    actions_raw = data.get("actions")
    if not isinstance(actions_raw, str) or not actions_raw.strip():
        raise ConfError(f"{source}: 'actions' must be a comma-separated string of action names")
    actions = tuple(a.strip() for a in actions_raw.split(",") if a.strip())
    tiers_raw = data.get("tiers") or []
    if not isinstance(tiers_raw, list):
        raise ConfError(f"{source}: 'tiers' must be a list")
    tiers = tuple(_tier(source, i, t) for i, t in enumerate(tiers_raw))
    configurations: dict[str, Mapping[str, Any]] = {}
    for i, item in enumerate(data.get("configurations") or []):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise ConfError(f"{source}: configurations[{i}] needs a 'name'")
        args = item.get("arguments") or {}
        if not isinstance(args, Mapping):
            raise ConfError(f"{source}: configurations[{i}].arguments must be a mapping")
        configurations[item["name"]] = dict(args)
    metrics = data.get("metrics") or {}
    if not isinstance(metrics, Mapping):
        raise ConfError(f"{source}: 'metrics' must be a mapping")
    return SchedulerConf(actions, tiers, configurations, {str(k): str(v) for k, v in metrics.items()})


def _tier(source: str, index: int, raw: object) -> Tier:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("plugins"), list):
        raise ConfError(f"{source}: tiers[{index}] must be a mapping with a 'plugins' list")
    return Tier(tuple(_plugin(source, f"tiers[{index}].plugins[{j}]", p) for j, p in enumerate(raw["plugins"])))


def _plugin(source: str, where: str, raw: object) -> PluginOption:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str) or not raw["name"]:
        raise ConfError(f"{source}: {where} needs a 'name'")
    flags: dict[str, bool] = {}
    for key, value in raw.items():
        if key in ("name", "arguments"):
            continue
        if key not in PLUGIN_FLAGS:
            raise ConfError(f"{source}: {where} ({raw['name']}): unknown key {key!r}")
        if not isinstance(value, bool):
            raise ConfError(f"{source}: {where} ({raw['name']}): {key} must be true or false")
        flags[key] = value
    args = raw.get("arguments") or {}
    if not isinstance(args, Mapping):
        raise ConfError(f"{source}: {where} ({raw['name']}): arguments must be a mapping")
    return PluginOption(raw["name"], dict(args), flags)


def load_conf(path: str | Path | None) -> SchedulerConf:
    if path is None:
        return parse_conf(DEFAULT_CONF_TEXT, "<default>")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return parse_conf(text, str(path))
