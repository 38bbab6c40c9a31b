"""What a pod asks for: CPU, memory and, per container, GPUs (whole, shares or a MIG slice).

`parse_pod_request` reads a pod manifest (a dict as the API server returns it) with the protocol's
resource names and returns a `PodRequest`, or raises `RequestError` with a reason a user can act on.
Rules (docs/user-guide/requests.md):
- `resources.gpu: N` alone: N whole GPUs.
- `resources.core: P` and/or `resources.memory: M` (memory units) and/or `resources.memoryPercent: Q`:
  one shared GPU with P % of its compute and M units (or Q % of the chosen GPU's memory; M wins when
  both are given, as HAMi has it). With `resources.gpu: N` as well: N GPUs, each with P % and M.
  Core missing means no compute share (memory-only); memory missing means memory in proportion
  to the compute share (P % of the chosen GPU's memory, rounded down), or all of it when
  `rules.memoryDefault` is `whole` (HAMi's and Volcano's rule; there a memory amount of 0 counts as
  none, and all of the memory without a compute share is a whole GPU). Under HAMi's names a compute
  share above 100 % is 100 %, as HAMi's Fit clamps it; elsewhere it is refused.
- `rules.defaultMemory` / `rules.defaultCores` (HAMi's device-plugin `defaultMemory`, `defaultCores`),
  when set, are the memory units and the compute percent of a GPU request that names none (so
  `resources.gpu: 1` alone is then a share, not a whole GPU).
- Each resource may be asked for under any one of its names (`KitProtocol.names`: the first, then
  `aliases.*`), never under two.
- `<migPrefix><profile>: N`: N MIG slices of that profile. It cannot be mixed with the others.
- A container must ask for some resource the device plugin registers with kubelet, or kubelet never
  calls Allocate for it: with `resources.memoryAdvertised: false`, memory alone is refused.
- Any other resource (an extended resource such as `example.com/foo`, `ephemeral-storage`,
  `hugepages-2Mi`) is a scalar the scheduler checks against the node's allocatable, as
  kube-scheduler's NodeResourcesFit does.
Pod-level amounts follow Kubernetes' PodRequests (`kube.semantics.resources`): the sum over app
containers and restartable init containers (sidecars), at least the largest ordinary init container
(plus the sidecars started before it), plus the pod overhead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import cast

from runtimekit.kube.objects import Container, Pod, PodSpec, ResourceList
from runtimekit.kube.semantics.quantity import cpu_milli, memory_bytes, whole_number
from runtimekit.kube.semantics.resources import pod_amounts
from runtimekit.model.scalars import LIMIT, Scalars, combine, peak, scalar_amount, scalars_of
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.memo import PerProtocol
from runtimekit.protocol.presets import passed_resources, speaks_hami

MILLI_PER_GPU = 1000
# No node has more GPUs, or more memory units on one GPU: larger amounts are refused as beyond any
# node rather than carried into arithmetic (a count of 1e30 once overflowed every later decision).
MAX_GPU_AMOUNT = 1 << 20


class RequestError(ValueError):
    """A pod's resource request cannot be honoured as written; the message says why."""


class GpuKind(StrEnum):
    WHOLE = "whole"
    SHARE = "share"
    MIG = "mig"


@dataclass(frozen=True)
class GpuRequest:
    """The GPU demand of one container. Amounts are per GPU."""

    kind: GpuKind
    count: int
    core_milli: int = MILLI_PER_GPU
    memory_mib: int | None = None  # None: whole GPU memory (whole), memory_percent, or in proportion to core
    mig_profile: str = ""
    resource: str = ""  # the resource name a MIG request was made with (e.g. aliyun.com/mig-1g.10gb)
    memory_percent: int | None = None  # percent of the chosen GPU's memory, when memory_mib is None

    def __post_init__(self) -> None:
        if self.count < 1:
            raise RequestError(f"GPU count must be at least 1, got {self.count}")
        if not 0 <= self.core_milli <= MILLI_PER_GPU:
            raise RequestError(f"a GPU share must be 0-100 %, got {self.core_milli / 10:g} %")
        if self.memory_mib is not None and self.memory_mib < 0:
            raise RequestError(f"GPU memory must not be negative, got {self.memory_mib} MiB")
        if self.memory_percent is not None and not 0 <= self.memory_percent <= 100:
            raise RequestError(f"a GPU memory share must be 0-100 %, got {self.memory_percent} %")
        if self.kind is GpuKind.MIG and not self.mig_profile:
            raise RequestError("a MIG request needs a profile")

    @property
    def is_whole(self) -> bool:
        return self.kind is GpuKind.WHOLE

    def memory_on(self, gpu_memory_mib: int) -> int:
        """MiB this request takes on a GPU with `gpu_memory_mib` of memory: the one rule every fit
        check and every assignment uses (`memory_per_gpu` is the same over arrays)."""
        if self.kind is GpuKind.WHOLE:
            return gpu_memory_mib
        if self.memory_mib is not None:
            return self.memory_mib
        if self.memory_percent is not None:
            return self.memory_percent * gpu_memory_mib // 100
        return self.core_milli * gpu_memory_mib // MILLI_PER_GPU

    @property
    def fixed_memory(self) -> bool:
        """Whether the memory is the same on every GPU (an amount), not a share of the GPU's memory."""
        return self.kind is GpuKind.SHARE and self.memory_mib is not None

    @property
    def total_milli(self) -> int:
        return self.count * self.core_milli if self.kind is not GpuKind.MIG else 0


@dataclass(frozen=True)
class ContainerGpuRequest:
    container: str
    gpu: GpuRequest


@dataclass(frozen=True)
class PodRequest:
    """A pod's effective request, as the scheduler accounts it."""

    cpu_milli: int
    memory_bytes: int  # exact, as kube-scheduler counts it: decimal units add up (1G + 2G + 2G fit 5G)
    gpus: tuple[ContainerGpuRequest, ...] = ()
    scalars: Scalars = ()  # other resources (extended, storage, huge pages), checked per node

    @property
    def gpu_milli(self) -> int:
        return sum(c.gpu.total_milli for c in self.gpus)

    @property
    def uses_gpu(self) -> bool:
        return bool(self.gpus)

    @property
    def is_empty(self) -> bool:
        """Asks for nothing at all, extended resources included (a best-effort pod)."""
        return not (self.cpu_milli or self.memory_bytes or self.gpus or self.scalars)


def _or_empty(value: object) -> object:
    return {} if value is None else value


def _requests_limits(container: Container) -> tuple[ResourceList, ResourceList]:
    resources = _or_empty(container.get("resources"))
    if not isinstance(resources, Mapping):
        raise RequestError(f"container {container.get('name')!r}: resources must be an object")
    requests = _or_empty(resources.get("requests"))
    limits = _or_empty(resources.get("limits"))
    if not isinstance(requests, Mapping) or not isinstance(limits, Mapping):
        raise RequestError(f"container {container.get('name')!r}: requests and limits must be objects")
    return cast(ResourceList, requests), cast(ResourceList, limits)  # checked objects, as the API serves them


def _count(name: str, container: str, value: object) -> int:
    try:
        amount = whole_number(value)
    except ValueError as exc:
        raise RequestError(f"container {container!r}: {name} must be a whole number: {exc}") from None
    if amount < 0:
        raise RequestError(f"container {container!r}: {name} must not be negative, got {amount}")
    if amount > MAX_GPU_AMOUNT:
        raise RequestError(f"container {container!r}: {name} of {value} is beyond any node")
    return amount


def parse_container_gpu(
    container: Container, protocol: KitProtocol, limits: ResourceList | None = None
) -> GpuRequest | None:
    """The GPU request of one container, None when it asks for no GPU."""
    name = str(container.get("name", "?"))
    res = protocol.resources
    amounts = limits if limits is not None else _limits_first(container)  # read, never changed
    if not any(protocol.manages(str(key)) for key in amounts):
        return None  # the usual container: no GPU resource under any of its names
    given: list[str] = []

    def amount(kind: str) -> int | None:
        names = [n for n in protocol.names(kind) if n in amounts]
        if len(names) > 1:
            raise RequestError(f"container {name!r}: {' and '.join(names)} name the same resource; give one of them")
        given.extend(names)
        return _count(names[0], name, amounts[names[0]]) if names else None

    gpus, core, units, percent = amount("gpu"), amount("core"), amount("memory"), amount("memoryPercent")
    migs = {k: v for k, v in amounts.items() if k.startswith(res.mig_prefix)}
    if migs:
        if gpus or core or units or percent:
            raise RequestError(f"container {name!r}: a MIG slice cannot be combined with GPU shares or whole GPUs")
        if len(migs) > 1:
            raise RequestError(f"container {name!r}: ask for one MIG profile per container, got {sorted(migs)}")
        ((key, value),) = migs.items()
        count = _count(key, name, value)
        profile = key[len(res.mig_prefix) :]
        return GpuRequest(GpuKind.MIG, count, 0, None, profile, key) if count else None
    whole_default = protocol.rules.memory_default == "whole"
    if whole_default and units == 0:
        units = None  # HAMi and Volcano read a memory amount of 0 as none given
    if percent is not None and percent > 100:
        raise RequestError(f"container {name!r}: {given[-1]} is {percent}, above 100 % of one GPU's memory")
    if percent == 0:
        percent = None  # as HAMi reads it: no memory share given
    if gpus == 0 and not core and not units and not percent:
        return None
    rules = protocol.rules
    if rules.default_memory and units is None and percent is None:
        units = rules.default_memory  # HAMi's defaultMemory, for a share that names no memory
    if rules.default_cores and core is None:
        core = rules.default_cores  # HAMi's defaultCores, for a share that names no compute
    if core is None and units is None and percent is None:
        return GpuRequest(GpuKind.WHOLE, gpus) if gpus else None
    if core is not None and core > 100 and speaks_hami(protocol):
        core = 100  # HAMi's reading (its Fit clamps it); Volcano's vGPU never fits it, as refused here
    if core is not None and core > 100:
        raise RequestError(
            f"container {name!r}: {res.core} is {core}, above 100 % of one GPU; ask for whole GPUs with "
            f"{res.gpu} instead, or for {res.gpu}: N with a per-GPU share"
        )
    if units is None and percent is None and whole_default:
        percent = 100
    if (core or 0) == 0 and (units or 0) == 0 and (percent or 0) == 0:
        raise RequestError(f"container {name!r}: {res.core} and {res.memory} are both 0")
    _check_allocated_by_kubelet(name, given, protocol)
    if core is None and units is None and percent == 100:
        return GpuRequest(GpuKind.WHOLE, gpus or 1)  # all of the memory and no compute share: the whole GPU
    memory = None if units is None else units * protocol.memory_unit_mib
    percent = None if memory is not None else percent
    return GpuRequest(GpuKind.SHARE, gpus or 1, (core or 0) * 10, memory, memory_percent=percent)


def _check_allocated_by_kubelet(container: str, given: list[str], protocol: KitProtocol) -> None:
    """kubelet calls the device plugin's Allocate only for resources the plugin registers; a container
    asking only for memory the plugin does not register would run without its GPU."""
    if protocol.resources.memory_advertised or not given:
        return
    if all(n in protocol.names("memory") for n in given):
        raise RequestError(
            f"container {container!r}: {given[0]} alone is not allocated by kubelet under this protocol (GPU "
            f"memory is counted by the scheduler only); ask for {protocol.resources.gpu}: 1 as well"
        )


def _limits_first(container: Container) -> ResourceList:
    """Extended resources as kubelet reads them: limits, falling back to requests."""
    requests, limits = _requests_limits(container)
    return {**requests, **limits}


@dataclass(frozen=True)
class _Amounts:
    """CPU milli, memory bytes and scalar resources of a container or a pod."""

    cpu: int = 0
    memory: int = 0
    scalars: Scalars = ()

    def __add__(self, other: _Amounts) -> _Amounts:
        return _Amounts(self.cpu + other.cpu, self.memory + other.memory, combine(self.scalars, other.scalars))

    def peak(self, other: _Amounts) -> _Amounts:
        return _Amounts(max(self.cpu, other.cpu), max(self.memory, other.memory), peak(self.scalars, other.scalars))


_ZERO = _Amounts()


def _container_amounts(container: Container, protocol: KitProtocol, amounts: ResourceList | None = None) -> _Amounts:
    """What a container asks of its node: requests, defaulting to limits (as the API server does);
    `amounts` when the caller has merged them already."""
    if amounts is None:
        amounts = _amounts_requests_first(container)
    name = container.get("name", "?")
    try:
        return _amounts_of(amounts, protocol)
    except ValueError as exc:
        raise RequestError(f"container {name!r}: {exc}") from None


def _amounts_of(amounts: ResourceList, protocol: KitProtocol) -> _Amounts:
    cpu = cpu_milli(amounts["cpu"]) if "cpu" in amounts else 0
    mem = memory_bytes(amounts["memory"]) if "memory" in amounts else 0
    if cpu < 0 or mem < 0:
        raise ValueError("cpu and memory must not be negative")
    if cpu >= LIMIT or mem >= LIMIT:
        raise ValueError("cpu or memory beyond any node")
    scalars: dict[str, int] = {}
    passed = passed_resources(protocol)
    for key, value in amounts.items():
        resource = str(key)
        if resource in ("cpu", "memory") or protocol.manages(resource) or resource in passed:
            continue
        scalars[resource] = scalar_amount(resource, value)
    return _Amounts(cpu, mem, scalars_of(scalars))


def _amounts_requests_first(container: Container) -> ResourceList:
    """Amounts as the scheduler accounts them: requests, defaulting to limits."""
    requests, limits = _requests_limits(container)
    return {**limits, **requests}


# plain pods' requests by their containers' names and resources
_REQUESTS: PerProtocol[tuple[object, ...], PodRequest] = PerProtocol(4096)


def _plain_signature(spec: PodSpec) -> tuple[object, ...] | None:
    """What a pod without init containers or overhead asks for, as a hashable key; None for any
    other pod, or one whose amounts are not all strings (as the API server writes quantities)."""
    if spec.get("initContainers") or spec.get("overhead"):
        return None
    containers = spec.get("containers")
    if not isinstance(containers, list):
        return None
    key: list[object] = []
    for container in containers:
        if not isinstance(container, Mapping):
            return None
        resources, name = container.get("resources"), container.get("name")
        if not isinstance(resources, Mapping) or not isinstance(name, str | None):
            return None
        key.append(name)
        for part in ("limits", "requests"):
            amounts = resources.get(part)
            if amounts is None:
                key.append(None)
            elif isinstance(amounts, Mapping) and all(type(v) is str for v in amounts.values()):
                key.append(tuple(amounts.items()))
            else:  # numbers (1 and True are equal keys) or worse: parsed every time
                return None
    return tuple(key)


def parse_pod_request(pod: Pod, protocol: KitProtocol) -> PodRequest:
    """The effective request of a pod manifest. Raises RequestError with the reason. Pods made from
    one template ask alike: a plain pod's request is parsed once per distinct set of amounts."""
    spec = pod.get("spec")
    signature = _plain_signature(spec) if isinstance(spec, Mapping) else None
    if signature is None:
        return _parse_pod_request(pod, protocol)
    return _REQUESTS.get(protocol, signature, lambda: _parse_pod_request(pod, protocol))  # errors: raised again


def _parse_pod_request(pod: Pod, protocol: KitProtocol) -> PodRequest:
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        raise RequestError("pod has no spec")
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise RequestError("pod has no containers")
    init = spec.get("initContainers") or []
    if not isinstance(init, list):
        raise RequestError("spec.initContainers must be a list")
    gpus: list[ContainerGpuRequest] = []

    def app(container: Container) -> _Amounts:
        if not isinstance(container, Mapping):
            raise RequestError("every container must be an object")
        requests, limits = _requests_limits(container)  # read once for both views
        amounts = _container_amounts(container, protocol, {**limits, **requests})
        gpu = parse_container_gpu(container, protocol, {**requests, **limits})
        if gpu is not None:
            gpus.append(ContainerGpuRequest(str(container.get("name", "")), gpu))
        return amounts

    def init_container(container: Container) -> _Amounts:
        if not isinstance(container, Mapping):
            raise RequestError("every init container must be an object")
        if parse_container_gpu(container, protocol) is not None:
            raise RequestError(f"init container {container.get('name')!r} asks for GPUs; only app containers may")
        return _container_amounts(container, protocol)

    total = pod_amounts(containers, init, app, _Amounts.__add__, _Amounts.peak, _ZERO, read_init=init_container)
    overhead = spec.get("overhead") or {}
    if overhead and isinstance(overhead, Mapping):  # read last, as its errors come after the containers'
        try:
            total += _amounts_of(overhead, protocol)
        except ValueError as exc:
            raise RequestError(f"spec.overhead: {exc}") from None
    return PodRequest(total.cpu, total.memory, tuple(gpus), total.scalars)
