"""An example controller trigger: act on the enable label only for nodes that report GPUs (the
protocol's gpu-count label), so a label set by mistake on a CPU node does nothing.

    runtimekit controller --trigger examples/controller/gpu_nodes.py:GpuNodesTrigger
"""

from __future__ import annotations

from runtimekit.controller.trigger import LabelTrigger
from runtimekit.kube.objects import Node, labels_of
from runtimekit.protocol import KitProtocol


class GpuNodesTrigger:
    def __init__(self, protocol: KitProtocol) -> None:
        self.labels = LabelTrigger(protocol)
        self.count_label = protocol.labels.gpu_count

    def desired(self, node: Node) -> str | None:
        if str(labels_of(node).get(self.count_label, "0")) in ("", "0"):
            return None
        return self.labels.desired(node)
