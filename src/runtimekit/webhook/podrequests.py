"""Requests for the kit's GPU resources that no node could ever satisfy, each naming its field.

Per container, with the protocol's names (aliases and MIG profiles included), reading limits before
requests as kubelet and the scheduler do:
- an init container asking for GPUs (only app containers get them);
- a compute share above 100 % of one GPU (but under HAMi's names, where it counts as 100 %, as HAMi
  reads it), or a memory share above 100 %;
- GPU memory above the largest GPU of every node (in each node's own memory unit), and more GPUs than
  any node has (both only once some node is known: a cluster being installed refuses nothing);
- a MIG profile no GPU model has and no node shows;
- whatever else the kit's request rules refuse (`runtimekit.model.request`: two names of one resource,
  a MIG slice mixed with shares, memory alone where kubelet would not allocate it, shares of 0), at
  the container's `resources`;
- and a pod placed by hand (`spec.nodeName` at create) although it asks for GPUs: only the kit's
  scheduler gives it the assignment its GPUs come from.
Pure.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from runtimekit.kube.objects import Container, Pod
from runtimekit.model.mig import MIG_GEOMETRY
from runtimekit.model.request import RequestError, parse_container_gpu
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import speaks_hami
from runtimekit.webhook.fleet import Fleet
from runtimekit.webhook.review import Problem, forbidden, invalid

KNOWN_MIG_PROFILES = frozenset(name for geometry in MIG_GEOMETRY.values() for name in geometry.names)


@dataclass(frozen=True)
class Amount:
    """One resource a container gives, where it gives it (limits first, as kubelet reads them)."""

    name: str
    value: object
    path: str

    @property
    def number(self) -> int | None:
        """The amount as a plain integer; None for any other spelling (the request rules judge those)."""
        if isinstance(self.value, bool):
            return None
        if isinstance(self.value, int):
            return self.value
        text = str(self.value).strip()
        return int(text) if text.isdigit() else None


def kit_amounts(container: Container, path: str, protocol: KitProtocol) -> dict[str, Amount]:
    """The container's amounts of the kit's resources, by name."""
    resources = container.get("resources") or {}
    found: dict[str, Amount] = {}
    given: tuple[tuple[str, Mapping[str, Any]], ...] = (
        ("requests", resources.get("requests") or {}),
        ("limits", resources.get("limits") or {}),  # limits win, as kubelet reads extended resources
    )
    for where, values in given:
        for name, value in values.items():
            if protocol.manages(name):
                found[name] = Amount(name, value, f"{path}.resources.{where}[{name}]")
    return found


def _named(amounts: Mapping[str, Amount], protocol: KitProtocol, kind: str) -> Amount | None:
    return next((amounts[n] for n in protocol.names(kind) if n in amounts), None)


def _share_problems(amounts: Mapping[str, Amount], protocol: KitProtocol) -> Iterator[Problem]:
    core = _named(amounts, protocol, "core")
    if core is not None and (core.number or 0) > 100 and not speaks_hami(protocol):  # HAMi: 100 (model.request)
        gpu = protocol.resources.gpu
        yield invalid(
            core.path,
            core.value,
            f"above 100 % of one GPU; ask for whole GPUs with {gpu}, or {gpu}: N with a per-GPU share",
        )
    percent = _named(amounts, protocol, "memoryPercent")
    if percent is not None and (percent.number or 0) > 100:
        yield invalid(percent.path, percent.value, "above 100 % of one GPU's memory")


def _fleet_problems(amounts: Mapping[str, Amount], protocol: KitProtocol, fleet: Fleet) -> Iterator[Problem]:
    if not fleet.known:
        return
    memory = _named(amounts, protocol, "memory")
    if memory is not None and (memory.number or 0) > fleet.most_memory_units:
        why = f"more GPU memory than any node's largest GPU has (at most {fleet.most_memory_units} of its memory units)"
        yield invalid(memory.path, memory.value, why)
    count = _named(amounts, protocol, "gpu")
    if count is not None and (count.number or 0) > fleet.most_gpus:
        yield invalid(count.path, count.value, f"more GPUs than any node has (at most {fleet.most_gpus})")


def _mig_problems(amounts: Mapping[str, Amount], protocol: KitProtocol, fleet: Fleet) -> Iterator[Problem]:
    prefix = protocol.resources.mig_prefix
    known = KNOWN_MIG_PROFILES | fleet.mig_profiles
    for name, amount in amounts.items():
        profile = name[len(prefix) :] if name.startswith(prefix) else ""
        if profile and profile not in known:
            yield invalid(
                amount.path, amount.value, f"no GPU has the MIG profile {profile!r} (known: {', '.join(sorted(known))})"
            )


def container_problems(container: Container, path: str, protocol: KitProtocol, fleet: Fleet) -> list[Problem]:
    amounts = kit_amounts(container, path, protocol)
    if not amounts:
        return []
    problems = [
        *_share_problems(amounts, protocol),
        *_fleet_problems(amounts, protocol, fleet),
        *_mig_problems(amounts, protocol, fleet),
    ]
    if problems:
        return problems
    try:
        parse_container_gpu(container, protocol)
    except RequestError as exc:
        return [invalid(f"{path}.resources", sorted(amounts), str(exc))]
    return []


def privileged_problems(pod: Pod) -> list[Problem]:
    """HAMi's rule for a pod asking for GPUs: no privileged container (it would see every GPU)."""
    spec = pod.get("spec") or {}
    return [
        forbidden(f"spec.{kind}[{i}].securityContext.privileged", f"container {c.get('name', '')} is privileged")
        for kind, listed in (("initContainers", spec.get("initContainers")), ("containers", spec.get("containers")))
        for i, c in enumerate(listed or [])
        if ((c.get("securityContext") or {}).get("privileged")) is True
    ]


def pod_problems(pod: Pod, protocol: KitProtocol, fleet: Fleet, created: bool) -> list[Problem]:
    """Everything wrong with what the pod asks for (empty when a node could give it)."""
    spec = pod.get("spec") or {}
    problems: list[Problem] = []
    for index, container in enumerate(spec.get("initContainers") or ()):
        path = f"spec.initContainers[{index}]"
        for amount in kit_amounts(container, path, protocol).values():
            problems.append(forbidden(amount.path, "init containers do not get GPUs; ask for them in an app container"))
    asks = False
    for index, container in enumerate(spec.get("containers") or ()):
        path = f"spec.containers[{index}]"
        asks = asks or bool(kit_amounts(container, path, protocol))
        problems += container_problems(container, path, protocol, fleet)
    if created and asks and spec.get("nodeName"):
        why = "a pod asking for GPUs is placed by the kit's scheduler, which gives it its GPU assignment"
        problems.append(forbidden("spec.nodeName", why))
    return problems
