"""The exporter's configuration file (etc/exporter.yaml is the documented template).

Every key has a default. Keys and values follow the kit's one configuration rule
(`runtimekit.base.config`: any spelling of a key, numbers and booleans also as strings, a list
also as a comma-separated string); an unknown key or a bad value raises `ConfigError` naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec
import yaml

from runtimekit.base import config as typed

DEFAULT_IGNORED_XIDS = (13, 31, 43, 45, 68, 109)  # application errors, as NVIDIA's device plugin ignores them
COMPAT_MODES = ("dcgm", "hami")  # peers whose metric names the exporter can write (compat_dcgm, compat_hami)
PRESET = "preset"  # metricsCompat's default: what the protocol's preset implies
NonNegative = Annotated[float, msgspec.Meta(ge=0, description="a non-negative number")]


class ConfigError(typed.ConfigError):
    """A bad exporter configuration; the message names the key."""


class HealthConfig(msgspec.Struct, frozen=True, rename="camel"):
    enabled: bool = True
    interval_seconds: NonNegative = 5.0
    ignored_xids: tuple[int, ...] = DEFAULT_IGNORED_XIDS
    temperature_celsius: NonNegative = 90.0  # at or above: unhealthy
    temperature_hysteresis_celsius: NonNegative = 5.0  # healthy again below threshold - hysteresis
    recovery_seconds: NonNegative = 300.0  # healthy again after this long without a critical XID or ECC error


class ExporterConfig(msgspec.Struct, frozen=True, rename="camel"):
    runtime_timeout_seconds: NonNegative = 2.0
    node_name: str = ""  # default: what the runtime reports
    collectors: tuple[str, ...] = ()  # extra collectors: entry-point names or file.py:factory
    max_container_series: Annotated[int, msgspec.Meta(ge=0)] = 512  # containers' usage series per node
    health: HealthConfig = HealthConfig()
    # Peers' metric names written besides the kit's: dcgm, hami; `preset`: what the protocol's preset
    # implies (`nvidia`: dcgm, `hami`: hami, else none); [] none.
    metrics_compat: tuple[str, ...] = (PRESET,)

    def __post_init__(self) -> None:
        unknown = [m for m in self.metrics_compat if m not in (*COMPAT_MODES, PRESET)]
        if unknown:
            raise ValueError(f"metricsCompat: unknown {unknown[0]!r}; known: {', '.join(COMPAT_MODES)}, {PRESET}")


def load_config(path: str | Path | None) -> ExporterConfig:
    if path is None:
        return ExporterConfig()
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping")
    return typed.convert(ExporterConfig, data, where=f"{path}: ", error=ConfigError)
