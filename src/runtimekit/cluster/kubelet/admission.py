"""kubelet's resource fit check at pod admission, as pure functions.

kubelet admits a pod only when its requests fit what the node has left (`lifecycle/predicate.go`,
which reuses the scheduler's `noderesources.Fits`): the pod count, then `cpu`, `memory` and every
other resource the pod asks for, where requested + used by the node's active pods must not exceed
the node's allocatable. A pod that does not fit is rejected with reason `OutOf<resource>` and the
message `Node didn't have enough resource: <name>, requested: R, used: U, capacity: C` (cpu in
milli-cores, memory in bytes, other resources as counts). As kubelet does
(`removeMissingExtendedResources`), an extended resource the node does not advertise at all is left
out of the check: such resources are a scheduler's to account (HAMi's `nvidia.com/gpumem`, or the
kit's GPU memory under `resources.memoryAdvertised: false`), and the scheduler's own fit check keeps
pods asking for unknown ones off every node.
Callers: `SimulatedKubelet`, before the device manager allocates devices.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from runtimekit.cluster.kubelet.devicemanager import AdmissionError
from runtimekit.kube.objects import Container, Pod
from runtimekit.kube.semantics.names import is_extended_resource_name
from runtimekit.kube.semantics.quantity import parse_quantity
from runtimekit.kube.semantics.resources import pod_amounts

CPU, MEMORY, PODS = "cpu", "memory", "pods"
REJECTED = "Pod was rejected: "  # kubelet's prefix for the status message of a rejected pod


def base_units(name: str, value: object) -> int:
    """A quantity in kubelet's units for the resource: milli-cores for cpu, else the value rounded up."""
    amount = parse_quantity(value) * (1000 if name == CPU else 1)
    return math.ceil(amount)


def container_requests(container: Container) -> dict[str, int]:
    """Requests of one container; a resource with only a limit requests its limit (API server defaulting)."""
    resources = container.get("resources") or {}
    amounts = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {str(name): base_units(str(name), value) for name, value in amounts.items()}


def _add(total: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + value


def pod_requests(pod: Pod) -> dict[str, int]:
    """The pod's effective requests as Kubernetes' PodRequests computes them (app containers and
    sidecars summed, at least each init container with the sidecars before it, plus the pod
    overhead). Raises ValueError for a bad quantity."""
    spec = pod.get("spec") or {}
    overhead = spec.get("overhead") or {}
    total = pod_amounts(
        spec.get("containers") or [],
        spec.get("initContainers") or [],
        container_requests,
        _sum,
        _peak,
        {},
        overhead={str(n): base_units(str(n), v) for n, v in overhead.items()},
    )
    return {name: value for name, value in total.items() if value > 0}


def _sum(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {name: a.get(name, 0) + b.get(name, 0) for name in {**a, **b}}


def _peak(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {name: max(a.get(name, 0), b.get(name, 0)) for name in {**a, **b}}


def used_by(pods: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for requests in pods:
        _add(total, requests)
    return total


def _ordered(names: Iterable[str]) -> list[str]:
    rest = sorted(set(names) - {CPU, MEMORY})
    return [n for n in (CPU, MEMORY) if n in set(names)] + rest


def check_fit(
    requests: Mapping[str, int], allocatable: Mapping[str, int], used: Mapping[str, int], active_pods: int
) -> AdmissionError | None:
    """Why the pod does not fit (kubelet's reason and message, without the `Pod was rejected: ` prefix), or None."""
    pod_capacity = allocatable.get(PODS, 110)
    if active_pods + 1 > pod_capacity:
        return _insufficient(PODS, 1, active_pods, pod_capacity)
    for name in _ordered(requests):
        wanted = requests[name]
        if name == PODS or wanted <= 0 or (is_extended_resource_name(name) and name not in allocatable):
            continue
        capacity, taken = allocatable.get(name, 0), used.get(name, 0)
        if wanted > capacity - taken:
            return _insufficient(name, wanted, taken, capacity)
    return None


def _insufficient(name: str, requested: int, used: int, capacity: int) -> AdmissionError:
    return AdmissionError(
        f"OutOf{name}",
        f"Node didn't have enough resource: {name}, requested: {requested}, used: {used}, capacity: {capacity}",
    )
