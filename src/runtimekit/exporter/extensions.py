"""Custom metrics: extra collectors the operator adds without changing the exporter.

A collector factory takes an `ExtensionContext` (the runtime client, the protocol, the config) and
returns a `prometheus_client` Collector whose `collect()` yields metric families at scrape time.
Factories come from the entry-point group `runtimekit.exporter.collectors` (by name) or from a file
(`path/to/file.py:factory`), as listed under `collectors:` in the exporter's config.
`examples/exporter/allocation_age.py` is an example.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import cast

from prometheus_client.registry import Collector

from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.exporter.config import ExporterConfig
from runtimekit.protocol import KitProtocol

GROUP = "runtimekit.exporter.collectors"


class ExtensionError(ValueError):
    """A collector that cannot be loaded; the message names it."""


@dataclass(frozen=True)
class ExtensionContext:
    client: RuntimeClient
    protocol: KitProtocol
    config: ExporterConfig
    node_name: str


Factory = Callable[[ExtensionContext], Collector]


def load_factory(name: str) -> Factory:
    if ".py:" in name:
        path, _, attribute = name.rpartition(":")
        spec = importlib.util.spec_from_file_location(f"runtimekit_collector_{abs(hash(path))}", path)
        if spec is None or spec.loader is None:
            raise ExtensionError(f"collector {name!r}: cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise ExtensionError(f"collector {name!r}: import failed: {exc}") from exc
        factory: object = getattr(module, attribute, None)
    else:
        found = [ep for ep in entry_points(group=GROUP) if ep.name == name]
        if not found:
            raise ExtensionError(f"collector {name!r}: no entry point of that name in group {GROUP}")
        factory = found[0].load()
    if not callable(factory):
        raise ExtensionError(f"collector {name!r} is not a factory")
    return cast(Factory, factory)  # the operator names it as one; a signature is not checked before a call


def load_collectors(context: ExtensionContext) -> list[Collector]:
    return [load_factory(name)(context) for name in context.config.collectors]
