"""The exporter's configuration file (etc/exporter.yaml is the documented template).

Every key has a default; an unknown key or a bad value raises `ConfigError` naming it."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

DEFAULT_IGNORED_XIDS = (13, 31, 43, 45, 68, 109)  # application errors, as NVIDIA's device plugin ignores them


class ConfigError(ValueError):
    """A bad exporter configuration; the message names the key."""


@dataclass(frozen=True)
class HealthConfig:
    enabled: bool = True
    interval_seconds: float = 5.0
    ignored_xids: tuple[int, ...] = DEFAULT_IGNORED_XIDS
    temperature_celsius: float = 90.0  # at or above: unhealthy
    temperature_hysteresis_celsius: float = 5.0  # healthy again below threshold - hysteresis
    recovery_seconds: float = 300.0  # healthy again after this long without a critical XID or ECC error


@dataclass(frozen=True)
class ExporterConfig:
    runtime_timeout_seconds: float = 2.0
    node_name: str = ""  # default: what the runtime reports
    collectors: tuple[str, ...] = ()  # extra collectors: entry-point names or file.py:factory
    health: HealthConfig = field(default_factory=HealthConfig)


def _typed(where: str, key: str, value: Any, default: Any) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}{key} must be true or false, got {value!r}")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ConfigError(f"{where}{key} must be a non-negative number, got {value!r}")
        return float(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise ConfigError(f"{where}{key} must be a string, got {value!r}")
        return value
    if isinstance(default, tuple):
        if not isinstance(value, list) or not all(
            isinstance(v, type(default[0]) if default else (int, str)) and not isinstance(v, bool) for v in value
        ):
            raise ConfigError(f"{where}{key} must be a list, got {value!r}")
        return tuple(value)
    raise ConfigError(f"{where}{key}: unsupported value {value!r}")


def _build(cls: type[Any], data: dict[str, Any], where: str) -> Any:
    known = {f.name.replace("_", ""): f for f in fields(cls)}
    defaults = cls()
    values: dict[str, Any] = {}
    for key, value in data.items():
        f = known.get(str(key).replace("_", "").lower().replace("-", ""))
        if f is None:
            raise ConfigError(f"{where}unknown key {key!r}; known: {', '.join(x.name for x in fields(cls))}")
        default = getattr(defaults, f.name)
        if isinstance(default, HealthConfig):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}{key} must be a mapping")
            values[f.name] = _build(HealthConfig, value, f"{where}{key}.")
        else:
            values[f.name] = _typed(where, str(key), value, default)
    return cls(**values)


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
    config: ExporterConfig = _build(ExporterConfig, data, f"{path}: ")
    return config
