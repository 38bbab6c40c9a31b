"""When a node's runtime should be switched: an extension point.

A trigger looks at a Node and answers `enable`, `disable` or None (no opinion: leave it alone).
The default, `LabelTrigger`, reads the protocol's enable label (`true`/`false`). Another trigger is
named on the command line as `module:attribute` or `path/to/file.py:attribute` (a class or factory
taking the protocol), e.g. `--trigger examples/controller/gpu_nodes.py:GpuNodesTrigger`.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import Protocol

from runtimekit.kube.objects import Node, labels_of
from runtimekit.protocol import KitProtocol


class Trigger(Protocol):
    def desired(self, node: Node) -> str | None:
        """ "enable", "disable", or None to leave the node alone."""


class LabelTrigger:
    def __init__(self, protocol: KitProtocol) -> None:
        self.label = protocol.labels.enable

    def desired(self, node: Node) -> str | None:
        value = str(labels_of(node).get(self.label, "")).strip().lower()
        return {"true": "enable", "false": "disable"}.get(value)


def load_trigger(spec: str, protocol: KitProtocol) -> Trigger:
    """Import `module:attribute` and build the trigger with the protocol."""
    module_name, _, attribute = spec.rpartition(":")
    if not module_name or not attribute:
        raise ValueError(f"--trigger must look like module:attribute or file.py:attribute, got {spec!r}")
    try:
        if module_name.endswith(".py"):
            loader = importlib.util.spec_from_file_location(f"runtimekit_trigger_{abs(hash(module_name))}", module_name)
            if loader is None or loader.loader is None:
                raise ImportError(f"cannot import {module_name}")
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
        factory: Callable[[KitProtocol], Trigger] = getattr(module, attribute)
    except (ImportError, AttributeError, OSError) as exc:
        raise ValueError(f"cannot load trigger {spec!r}: {exc}") from exc
    trigger = factory(protocol)
    if not callable(getattr(trigger, "desired", None)):
        raise ValueError(f"trigger {spec!r} has no desired(node) method")
    return trigger
