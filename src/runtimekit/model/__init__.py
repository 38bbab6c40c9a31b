"""Pure value types shared by every component: GPUs, node inventories, pod requests,
assignments, and the GPU ledger. No I/O, no Kubernetes client."""

from runtimekit.model.assignment import Assignment, AssignmentError, GpuShare
from runtimekit.model.gpu import (
    GPU_MODELS,
    Gpu,
    GpuModelSpec,
    GpuUUID,
    InventoryError,
    MigMode,
    NodeInventory,
    NodeName,
    gpu_model,
    simulated_uuid,
)
from runtimekit.model.ledger import Ledger
from runtimekit.model.nodetable import NodeTable
from runtimekit.model.placement import (
    MILLI,
    LedgerError,
    NodeCapacity,
    Placement,
    PodKey,
    Slot,
    placement_from_assignment,
    shares_for,
)
from runtimekit.model.request import (
    ContainerGpuRequest,
    GpuKind,
    GpuRequest,
    PodRequest,
    RequestError,
    parse_container_gpu,
    parse_pod_request,
)
from runtimekit.model.selector import GpuSelector, selector_from_annotations

__all__ = [
    "GPU_MODELS",
    "MILLI",
    "Assignment",
    "AssignmentError",
    "ContainerGpuRequest",
    "Gpu",
    "GpuKind",
    "GpuModelSpec",
    "GpuRequest",
    "GpuSelector",
    "GpuShare",
    "GpuUUID",
    "InventoryError",
    "Ledger",
    "LedgerError",
    "MigMode",
    "NodeCapacity",
    "NodeInventory",
    "NodeName",
    "NodeTable",
    "Placement",
    "PodKey",
    "PodRequest",
    "RequestError",
    "Slot",
    "gpu_model",
    "parse_container_gpu",
    "parse_pod_request",
    "placement_from_assignment",
    "selector_from_annotations",
    "shares_for",
    "simulated_uuid",
]
