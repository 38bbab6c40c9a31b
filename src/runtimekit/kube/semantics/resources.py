"""A pod's resources from its containers', with the formula of Kubernetes' `resource.PodRequests`
(and `PodLimits`), written once for every kind of amounts a caller counts in.

The pod needs the sum over its app containers and its sidecars (init containers with
`restartPolicy: Always`, which keep running beside them), and at least, for each ordinary init
container, that container plus the sidecars started before it (init containers run one at a time,
in order); then the pod overhead is added. `pod_amounts` is generic in the amounts: the caller says
how to read one container (requests defaulted from limits, limits, parsed quantities, ...), how to
add two amounts and how to take their element-wise maximum.

Pure; callers: the kit's pod requests (`model.request`), the scheduler's ResourceQuota usage
(`scheduler.cache.policy`), the embedded kubelet's admission.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from runtimekit.kube.objects import Container

A = TypeVar("A")
SIDECAR_RESTART_POLICY = "Always"


def is_sidecar(container: Container) -> bool:
    """An init container that keeps running beside the app containers (`restartPolicy: Always`)."""
    return container.get("restartPolicy") == SIDECAR_RESTART_POLICY


def pod_amounts(
    containers: Sequence[Container],
    init_containers: Sequence[Container],
    read: Callable[[Container], A],
    add: Callable[[A, A], A],
    peak: Callable[[A, A], A],
    zero: A,
    *,
    read_init: Callable[[Container], A] | None = None,
    overhead: A | None = None,
) -> A:
    """What the pod needs: `read` of each app container summed, sidecars added, at least each ordinary
    init container plus the sidecars before it, plus `overhead`. `read_init` reads init containers
    (default `read`); nothing is read twice, and without init containers no maximum is taken."""
    total = zero
    for container in containers:
        total = add(total, read(container))
    if init_containers:
        read_init = read_init or read
        sidecars = init_peak = zero
        for container in init_containers:
            amounts = read_init(container)
            if is_sidecar(container):  # runs beside the app containers from its start on
                total = add(total, amounts)
                sidecars = add(sidecars, amounts)
                init_peak = peak(init_peak, sidecars)
            else:
                init_peak = peak(init_peak, add(amounts, sidecars))
        total = peak(total, init_peak)
    return total if overhead is None else add(total, overhead)
