"""Opaque per-claim configuration the plugin accepts, and what it does to a request's share.

NVIDIA's k8s-dra-driver-gpu configs (`resource.nvidia.com/v1beta1`, kinds `GpuConfig` and
`MigDeviceConfig`) mean here what they mean there, where the kit has the same thing:
- `sharing.strategy: MPS` with `mpsConfig.defaultActiveThreadPercentage` caps the share's compute
  (percent) and `defaultPinnedDeviceMemoryLimit` its memory: the kit's MPS isolation enforces both
  per container, as NVIDIA's MPS control daemon does per claim; a per-device limit map is refused
  (the kit has one limit per share);
- `sharing.strategy: TimeSlicing` leaves the share as allocated (several claims on one GPU are
  time-sliced by the GPU); its `interval` is a node-wide setting of the GPU the kit does not change,
  so any value is accepted and noted.
Anything else for this plugin's driver (another apiVersion or kind, an unknown strategy or field) is
refused with a message that says what is accepted; configs for other drivers are not ours and are
skipped. Class configs apply first, claim configs after (a later one wins), as kube orders them in
the allocation. Called by `service.py` for each request it prepares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runtimekit.kube.objects.dra import DeviceAllocationConfiguration
from runtimekit.kube.semantics.quantity import memory_mib

NVIDIA_API = "resource.nvidia.com/v1beta1"
KINDS = ("GpuConfig", "MigDeviceConfig")
STRATEGIES = ("TimeSlicing", "MPS")
INTERVALS = ("Default", "Short", "Medium", "Long")
_MPS_FIELDS = {"defaultActiveThreadPercentage", "defaultPinnedDeviceMemoryLimit", "defaultPerDevicePinnedMemoryLimit"}


class ConfigError(ValueError):
    """A config for this driver the plugin cannot honour; the message says why and what is accepted."""


@dataclass(frozen=True)
class Sharing:
    """The sharing a request's configs ask for: a strategy and the MPS caps (0: none)."""

    strategy: str = ""
    core_percent: int = 0
    memory_mib: int = 0
    notes: tuple[str, ...] = ()


def sharing_for(request: str, configs: Sequence[DeviceAllocationConfiguration], driver: str) -> Sharing:
    """The sharing of one request (its top-level name). Raises ConfigError."""
    ordered = sorted(configs, key=lambda c: 0 if c.get("source") == "FromClass" else 1)  # stable: kube's order kept
    sharing = Sharing()
    for config in ordered:
        opaque = config.get("opaque")
        if opaque is None or opaque.get("driver") != driver:
            continue
        requests = config.get("requests") or []
        if requests and request not in {r.split("/")[0] for r in requests}:
            continue
        sharing = _parse(opaque.get("parameters") or {})
    return sharing


def _parse(parameters: object) -> Sharing:
    if not isinstance(parameters, dict):
        raise ConfigError("opaque parameters must be an object with apiVersion and kind")
    api, kind = parameters.get("apiVersion"), parameters.get("kind")
    if api != NVIDIA_API or kind not in KINDS:
        raise ConfigError(
            f"unsupported opaque config {api}/{kind}: this driver accepts {NVIDIA_API} {' or '.join(KINDS)}"
        )
    unknown = sorted(set(parameters) - {"apiVersion", "kind", "sharing"})
    if unknown:
        raise ConfigError(f"unknown field(s) in {kind}: {', '.join(unknown)}")
    sharing = parameters.get("sharing")
    if sharing is None:
        return Sharing()
    if not isinstance(sharing, dict):
        raise ConfigError(f"{kind}.sharing must be an object")
    strategy = sharing.get("strategy")
    if strategy not in STRATEGIES:
        raise ConfigError(f"{kind}.sharing.strategy {strategy!r}: accepted are {', '.join(STRATEGIES)}")
    if strategy == "TimeSlicing":
        return _time_slicing(kind, sharing)
    return _mps(kind, sharing)


def _time_slicing(kind: str, sharing: dict[str, object]) -> Sharing:
    if "mpsConfig" in sharing:
        raise ConfigError("cannot use mpsConfig with the 'TimeSlicing' strategy")
    if kind == "MigDeviceConfig":
        raise ConfigError("MigDeviceConfig accepts the 'MPS' strategy only (MIG devices are not time-sliced)")
    config = sharing.get("timeSlicingConfig") or {}
    interval = config.get("interval", "Default") if isinstance(config, dict) else None
    if interval not in INTERVALS:
        raise ConfigError(f"timeSlicingConfig.interval {interval!r}: accepted are {', '.join(INTERVALS)}")
    notes = () if interval == "Default" else (f"time-slice interval {interval} is the GPU's setting: left as is",)
    return Sharing("TimeSlicing", notes=notes)


def _mps(kind: str, sharing: dict[str, object]) -> Sharing:
    if "timeSlicingConfig" in sharing:
        raise ConfigError("cannot use timeSlicingConfig with the 'MPS' strategy")
    config = sharing.get("mpsConfig") or {}
    if not isinstance(config, dict):
        raise ConfigError(f"{kind}.sharing.mpsConfig must be an object")
    unknown = sorted(set(config) - _MPS_FIELDS)
    if unknown:
        raise ConfigError(f"unknown field(s) in mpsConfig: {', '.join(unknown)}")
    if config.get("defaultPerDevicePinnedMemoryLimit"):
        raise ConfigError("mpsConfig.defaultPerDevicePinnedMemoryLimit is not supported: one limit per share here")
    percent = config.get("defaultActiveThreadPercentage", 0)
    if not isinstance(percent, int) or isinstance(percent, bool) or not 0 <= percent <= 100:
        raise ConfigError(f"mpsConfig.defaultActiveThreadPercentage {percent!r}: a whole number from 0 to 100")
    limit = config.get("defaultPinnedDeviceMemoryLimit")
    try:
        mib = memory_mib(limit) if limit is not None else 0
    except ValueError:
        raise ConfigError(f"mpsConfig.defaultPinnedDeviceMemoryLimit {limit!r} is not a quantity") from None
    return Sharing("MPS", percent, mib)
