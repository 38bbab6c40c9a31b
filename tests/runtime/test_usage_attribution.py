"""`usage.attribute` and `usage.remainders`: processes joined with the allocations by owner and device,
a process whose container is unknown going to the pod's one container granted its device, and the
GPU's remainder never below zero."""

from __future__ import annotations

from runtimekit.model import GpuUUID
from runtimekit.runtime.allocations import Allocation, Grant, PodRef
from runtimekit.runtime.usage import GpuProcess, GpuRemainder, ProcessOwner, attribute, remainders

G0, G1 = GpuUUID("GPU-0"), GpuUUID("GPU-1")
POD = PodRef("ml", "two", "uid-two")
ALLOCATIONS = [
    Allocation(POD, "a", (Grant(G0, 0, 500, 4096),), 0),
    Allocation(POD, "b", (Grant(G1, 1, 500, 4096), Grant(G0, 0, 200, 1024)), 0),
]
OWNERS = {
    1: ProcessOwner("uid-two", "a"),
    2: ProcessOwner("uid-two", ""),  # container not known: only b holds GPU-1
    3: ProcessOwner("uid-two", ""),  # container not known: a and b both hold GPU-0, so no one's
    4: ProcessOwner("uid-other", "main"),  # a pod the runtime granted nothing
    5: ProcessOwner("uid-two", "a"),  # a's process on a GPU a was not granted
}


def test_attribute_by_owner_and_device() -> None:
    processes = [
        GpuProcess(1, G0, G0, 1000, 20.0),
        GpuProcess(2, G1, G1, 500, None),
        GpuProcess(3, G0, G0, 300, 5.0),
        GpuProcess(4, G0, G0, 200, 1.0),
        GpuProcess(5, G1, G1, 100, 1.0),
        GpuProcess(6, G0, G0, 50, 1.0),  # outside any pod
    ]
    found, leftover = attribute(processes, OWNERS.get, ALLOCATIONS)
    got = {(u.container, u.device_uuid): (u.memory_used_mib, u.sm_percent, u.pids) for u in found}
    assert got == {
        ("a", G0): (1000, 20.0, (1,)),
        ("b", G1): (500, None, (2,)),
        ("b", G0): (0, None, ()),
    }
    assert [p.pid for p in leftover] == [3, 4, 5, 6]
    assert remainders({G0: (1500, 30.0), G1: (400, None)}, found) == [
        GpuRemainder(G0, 500, 10.0),
        GpuRemainder(G1, 0, None),  # never below zero; no utilisation reading, none left over
    ]
