"""The simulated backend's usage model: what each container uses, so per-container metrics exist without a GPU.

By default a container uses a fixed part of what it was granted on each grant: `DEFAULT_CORE_FRACTION`
of its compute share (as SM utilisation, % of the GPU) and `DEFAULT_MEMORY_FRACTION` of its memory
(a grant of the whole GPU, core 0, counts as 100 %). Two pod annotations override this, named in the
domain of the protocol's `annotations.simulatedRuntime` (`runtimekit.aliyun.com/` by default):
- `<domain>/simulated-usage-core`: SM utilisation in % of the GPU (`70`, may be above the share);
- `<domain>/simulated-usage-memory`: GPU memory used, a Kubernetes quantity (`12Gi`, `500Mi`).
Either holds one value for every container of the pod, or `name=value` pairs for some of them
(`main=12Gi,sidecar=1Gi`; a container not named keeps the default). A value that does not parse is
ignored (with a log line once per pod), so a typo never stops the node's metrics. The model is
deterministic: the same pods and allocations give the same usage. The runtime feeds the usage's sums
per GPU to `SimulatedBackend.sample`, whose GPU readings are then the containers' usage plus the
driver's reservation, so the "unattributed" remainder of a simulated GPU is that reservation.
Caller: `service.NodeRuntime` (with `--backend simulated`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from runtimekit.kube.objects import Pod, annotations_of
from runtimekit.kube.semantics.quantity import parse_quantity
from runtimekit.runtime.allocations import Allocation, Grant
from runtimekit.runtime.usage import ContainerUsage, grant_usage

log = logging.getLogger(__name__)

DEFAULT_CORE_FRACTION = 0.6
DEFAULT_MEMORY_FRACTION = 0.7
CORE_SUFFIX = "simulated-usage-core"
MEMORY_SUFFIX = "simulated-usage-memory"
_MIB = 1 << 20
_Parser = Callable[[str], float]


def usage_annotations(simulated_runtime: str) -> tuple[str, str]:
    """The core and memory annotations in the domain of the protocol's `annotations.simulatedRuntime`."""
    domain, slash, _ = simulated_runtime.rpartition("/")
    prefix = f"{domain}/" if slash else ""
    return prefix + CORE_SUFFIX, prefix + MEMORY_SUFFIX


def per_container(text: str, container: str) -> str | None:
    """The value for `container` in `70` or `main=70,side=10`; None when the annotation does not name it."""
    text = text.strip()
    if "=" not in text:
        return text or None
    for part in text.split(","):
        name, _, value = part.partition("=")
        if name.strip() == container:
            return value.strip()
    return None


class SimulatedUsage:
    """See the module docstring. `annotations`: the (core, memory) annotation names (`usage_annotations`)."""

    name = "simulated"

    def __init__(self, annotations: tuple[str, str]) -> None:
        self._core_key, self._memory_key = annotations
        self._warned: set[str] = set()

    def containers(self, allocations: Sequence[Allocation], pods: Mapping[str, Pod]) -> list[ContainerUsage]:
        """The usage of every grant of every allocation (`pods`: the node's pods by uid; one missing
        uses the defaults)."""
        out: list[ContainerUsage] = []
        for allocation in allocations:
            notes = annotations_of(pods[allocation.pod.uid]) if allocation.pod.uid in pods else {}
            core = self._value(notes, self._core_key, allocation, _percent)
            memory = self._value(notes, self._memory_key, allocation, _mib)
            out.extend(_usage(allocation, grant, core, memory) for grant in allocation.grants if grant.uuid)
        return out

    def _value(self, notes: Mapping[str, str], key: str, allocation: Allocation, parse: _Parser) -> float | None:
        text = notes.get(key)
        value = per_container(text, allocation.container) if text is not None else None
        if value is None:
            return None
        try:
            return parse(value)
        except ValueError as exc:
            if allocation.pod.uid not in self._warned:
                self._warned.add(allocation.pod.uid)
                log.warning("pod %s: annotation %s=%r ignored: %s", allocation.pod, key, text, exc)
            return None


def _percent(value: str) -> float:
    number = float(value)
    if not 0.0 <= number <= 100.0:
        raise ValueError(f"{value} is not a percentage 0-100")
    return number


def _mib(value: str) -> float:
    number = parse_quantity(value)
    if number < 0:
        raise ValueError(f"{value} is negative")
    return float(number) / _MIB


def _usage(allocation: Allocation, grant: Grant, core: float | None, memory: float | None) -> ContainerUsage:
    share = grant.core_milli / 10.0 if grant.core_milli > 0 else 100.0
    sm = core if core is not None else round(share * DEFAULT_CORE_FRACTION, 1)
    used = int(memory) if memory is not None else int(grant.memory_mib * DEFAULT_MEMORY_FRACTION)
    return grant_usage(allocation, grant, used, sm)
