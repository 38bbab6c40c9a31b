"""The `predicates` plugin's arguments: Volcano's `predicate.*` keys, each implemented or refused.

- `predicate.NodeAffinityEnable`, `NodePortsEnable`, `TaintTolerationEnable`, `PodAffinityEnable`,
  `PodTopologySpreadEnable`: true (default) or false, turning that filter on or off;
- `predicate.ProportionalEnable`, `predicate.resources` (comma-separated resource names) and
  `predicate.resources.<name>.cpu|memory` (CPUs and GB kept per idle unit, default 1): Volcano's
  proportional check; a rate for a resource not listed, or a negative one, is refused;
- `predicate.CacheEnable`: accepted, true or false (Volcano's speed switch; node-level verdicts
  are always cached here, and exactly, so either value places pods the same);
- the volume filters, each on unless switched off (as Volcano has them): `NodeVolumeLimitsEnable`,
  `VolumeZoneEnable`, `VolumeBindingEnable`, and the kit's own `VolumeRestrictionsEnable`
  (kube-scheduler's VolumeRestrictions, which Volcano does not run);
- `volumebinding.bindTimeoutSeconds` (600, at least 0: how long PreBind waits for the PV controller),
  `volumebinding.weight` (1; the plugin scores nothing, as kube-scheduler's without its storage
  capacity scoring gate) and `volumebinding.shape` (accepted; capacity scoring is not done here),
  Volcano's keys of its predicates plugin;
- Volcano's predicate-level GPU sharing (`GPUSharingEnable`, `GPUNumberEnable`, `VGPUEnable`) is
  not part of this plugin: false is accepted, true refused. `DynamicResourceAllocationEnable` true
  turns on the `dynamicresources` plugin; the conf builder takes it out before this plugin sees it
  (`known_names.IMPLIED_PLUGINS`), so here only a value that is not true or false is refused;
  `dynamicresources.filterTimeoutSeconds` (Volcano's, 10, at least 0: how long kube's DRA filter may
  search one node) is accepted: the device search here is bounded by a number of steps, not a clock,
  so a node is judged the same however busy the scheduler's machine is.
Any other key is refused by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runtimekit.scheduler.framework.arguments import ArgumentError, Arguments

PREFIX = "predicate."
VOLUME_BINDING = "volumebinding."
DRA_FILTER_TIMEOUT = "dynamicresources.filterTimeoutSeconds"
SWITCHES = {
    "NodeAffinityEnable": "node_affinity",
    "NodePortsEnable": "node_ports",
    "TaintTolerationEnable": "taint_toleration",
    "PodAffinityEnable": "pod_affinity",
    "PodTopologySpreadEnable": "pod_topology_spread",
    "ProportionalEnable": "proportional",
    "CacheEnable": "cache",
    "NodeVolumeLimitsEnable": "node_volume_limits",
    "VolumeZoneEnable": "volume_zone",
    "VolumeBindingEnable": "volume_binding",
    "VolumeRestrictionsEnable": "volume_restrictions",
}
NOT_HERE = {
    "DynamicResourceAllocationEnable": "dynamic resource allocation is the dynamicresources plugin here",
    "GPUSharingEnable": "GPU sharing is the gpushare plugin's here",
    "GPUNumberEnable": "GPU sharing is the gpushare plugin's here",
    "VGPUEnable": "GPU sharing is the gpushare plugin's here",
}


@dataclass(frozen=True)
class PredicatesArgs:
    node_affinity: bool = True
    node_ports: bool = True
    taint_toleration: bool = True
    pod_affinity: bool = True
    pod_topology_spread: bool = True
    proportional: bool = False
    cache: bool = False
    resources: tuple[str, ...] = ()
    rates: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # name -> (cpu, memory GB)
    gpu_resource: str = ""  # the kit's whole-GPU resource name (its idle count is whole free GPUs)
    node_volume_limits: bool = True
    volume_zone: bool = True
    volume_binding: bool = True
    volume_restrictions: bool = True
    bind_timeout_seconds: int = 600
    volume_binding_weight: int = 1
    volume_shape: bool = False  # `volumebinding.shape` was given (capacity scoring: not done here)


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ArgumentError(f"predicates: argument {key!r} must be true or false, got {value!r}")


def _rate(key: str, value: Any) -> float:
    try:
        rate = float(value)
    except (TypeError, ValueError):
        raise ArgumentError(f"predicates: argument {key!r} must be a number, got {value!r}") from None
    if isinstance(value, bool) or rate < 0:
        raise ArgumentError(f"predicates: argument {key!r} must be a number >= 0, got {value!r}")
    return rate


def _whole(key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ArgumentError(f"predicates: argument {key!r} must be a whole number, got {value!r}")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ArgumentError(f"predicates: argument {key!r} must be a whole number, got {value!r}") from None
    return number


def _volume_binding(key: str, value: Any) -> dict[str, Any]:
    """Volcano's `volumebinding.*` keys of its predicates plugin."""
    short = key[len(VOLUME_BINDING) :]
    if short == "bindTimeoutSeconds":
        seconds = _whole(key, value)
        if seconds < 0:
            raise ArgumentError(f"predicates: {key}: invalid BindTimeoutSeconds, should not be a negative value")
        return {"bind_timeout_seconds": seconds}
    if short == "weight":
        return {"volume_binding_weight": _whole(key, value)}
    if short == "shape":
        if not isinstance(value, list):
            raise ArgumentError(f"predicates: argument {key!r} must be a list of utilization and score points")
        return {"volume_shape": True}
    raise ArgumentError(
        f"predicates: unknown argument {key!r}; known: {VOLUME_BINDING}bindTimeoutSeconds, "
        f"{VOLUME_BINDING}shape, {VOLUME_BINDING}weight"
    )


def parse_predicates_args(arguments: Arguments, gpu_resource: str = "") -> PredicatesArgs:
    """Validate Volcano's predicate arguments; raises ArgumentError naming the first bad key."""
    values: dict[str, Any] = {"gpu_resource": gpu_resource}
    rate_keys: dict[str, Any] = {}
    for key, value in arguments.items():
        short = key[len(PREFIX) :] if key.startswith(PREFIX) else None
        if short in SWITCHES:
            values[SWITCHES[short]] = _bool(key, value)
        elif short in NOT_HERE:
            if _bool(key, value):
                raise ArgumentError(f"predicates: {key}: true is not supported: {NOT_HERE[short]}")
        elif short == "resources":
            names = value.split(",") if isinstance(value, str) else value
            if not isinstance(names, list | tuple):
                raise ArgumentError(f"predicates: argument {key!r} must be resource names, got {value!r}")
            values["resources"] = tuple(str(n).strip() for n in names if str(n).strip())
        elif short is not None and short.startswith("resources.") and short.endswith((".cpu", ".memory")):
            rate_keys[key] = value
        elif key.startswith(VOLUME_BINDING):
            values.update(_volume_binding(key, value))
        elif key == DRA_FILTER_TIMEOUT:
            if _whole(key, value) < 0:
                raise ArgumentError(f"predicates: {key} must not be negative, got {value!r}")
        else:
            known = sorted(PREFIX + k for k in (*SWITCHES, *NOT_HERE, "resources")) + [
                VOLUME_BINDING + k for k in ("bindTimeoutSeconds", "shape", "weight")
            ]
            known.append(DRA_FILTER_TIMEOUT)
            raise ArgumentError(f"predicates: unknown argument {key!r}; known: {', '.join(known)}")
    resources = values.get("resources", ())
    rates: dict[str, list[float]] = {name: [1.0, 1.0] for name in resources}
    for key, value in rate_keys.items():
        name, _, kind = key[len(PREFIX + "resources.") :].rpartition(".")
        if name not in rates:
            raise ArgumentError(f"predicates: {key}: {name!r} is not one of predicate.resources")
        rates[name][0 if kind == "cpu" else 1] = _rate(key, value)
    values["rates"] = {name: (cpu, memory) for name, (cpu, memory) in rates.items()}
    return PredicatesArgs(**values)
