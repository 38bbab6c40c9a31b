"""An example controller trigger: act on the enable label only for nodes that report GPUs (the
protocol's gpu-count label), so a label set by mistake on a CPU node does nothing.

    runtimekit controller --trigger examples/controller/gpu_nodes.py:GpuNodesTrigger
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtimekit.controller.trigger import LabelTrigger
from runtimekit.protocol import KitProtocol


class GpuNodesTrigger:
    def __init__(self, protocol: KitProtocol) -> None:
        self.labels = LabelTrigger(protocol)
        self.count_label = protocol.labels.gpu_count

    def desired(self, node: Mapping[str, Any]) -> str | None:
        labels = (node.get("metadata") or {}).get("labels") or {}
        if str(labels.get(self.count_label, "0")) in ("", "0"):
            return None
        return self.labels.desired(node)
