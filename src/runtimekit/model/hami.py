"""HAMi's own pod annotations and label, written beside the kit's signed assignment under HAMi's names
(`speaks_hami`), so that HAMi's tools find a scheduled pod where they look for one.

HAMi's scheduler writes, when it places a pod (pkg/scheduler/scheduler.go, pkg/util/types.go):
- `hami.io/vgpu-node` (annotation and label; HAMi's vGPU monitor lists a node's pods by the label),
  `hami.io/vgpu-time` (unix seconds);
- `hami.io/vgpu-devices-allocated`: the devices, `EncodePodSingleDevice` (pkg/device/devices.go): one
  entry per container, init containers first, each its devices as `UUID,NVIDIA,<MiB>,<cores %>:`
  and then `;` (a container without GPUs is a lone `;`);
- `hami.io/bind-phase: allocating` and `hami.io/bind-time` when it binds; its device plugin sets
  `hami.io/bind-phase: success` once the pod's devices are allocated.

The kit never reads these back: the signed assignment stays the only record it books and enforces.
Callers: the scheduler's binder (`placed`) and the device plugin (`allocated`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from runtimekit.kube.objects import Pod
from runtimekit.model.assignment import Assignment, GpuShare

NODE: Final = "hami.io/vgpu-node"  # annotation and label
TIME: Final = "hami.io/vgpu-time"
DEVICES: Final = "hami.io/vgpu-devices-allocated"
BIND_PHASE: Final = "hami.io/bind-phase"
BIND_TIME: Final = "hami.io/bind-time"
ALLOCATING: Final = "allocating"
SUCCESS: Final = "success"
BINDING_ANNOTATIONS: Final = frozenset({NODE, TIME, DEVICES, BIND_PHASE, BIND_TIME})  # what `placed` writes
DEVICE_TYPE: Final = "NVIDIA"  # HAMi's NvidiaGPUDevice, the type of every NVIDIA card's entry


def _device(share: GpuShare) -> str:
    # a MIG device is its GPU's entry with the slice's memory, as HAMi books a MIG share on the card
    uuid = (share.parent_uuid or share.uuid) if share.mig_profile else share.uuid
    return f"{uuid},{DEVICE_TYPE},{share.memory_mib},{share.core_milli // 10}:"


def encode_devices(containers: Iterable[str], assignment: Assignment) -> str:
    """HAMi's `EncodePodSingleDevice` of `assignment` over the pod's containers, in order."""
    return "".join("".join(_device(s) for s in assignment.containers.get(name, ())) + ";" for name in containers)


def _container_names(pod: Pod) -> list[str]:
    spec = pod.get("spec") or {}
    every = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    return [str(c.get("name", "")) for c in every if isinstance(c, Mapping)]


def placed(pod: Pod, assignment: Assignment, now_s: int) -> dict[str, str]:
    """The annotations HAMi's scheduler writes on a pod it placed and binds (`hami.io/vgpu-node` is also
    its label: `node_label`)."""
    return {
        NODE: assignment.node,
        TIME: str(now_s),
        DEVICES: encode_devices(_container_names(pod), assignment),
        BIND_PHASE: ALLOCATING,
        BIND_TIME: str(now_s),
    }


def node_label(assignment: Assignment) -> dict[str, str]:
    """The label HAMi's vGPU monitor lists a node's pods by."""
    return {NODE: assignment.node}


def allocated() -> dict[str, str]:
    """What HAMi's device plugin writes once the pod's devices are allocated."""
    return {BIND_PHASE: SUCCESS}
