"""Names other GPU-sharing systems give their pods, and whether the active protocol reads them.

A pod written for HAMi, Aliyun gpushare, Volcano or the NVIDIA device plugin may carry resources and
annotations the active protocol does not read: a HAMi model annotation would then be ignored without
a word, a HAMi memory resource would keep the pod Pending as an extended resource no node has.
`foreign_names(pod, protocol)` finds them, each with the presets that would read it
(runtimekit.protocol.presets), so the scheduler can put a Warning Event on the pod naming both.

The names are every resource and annotation some preset reads (derived from `PRESETS`) but the kit's
own default protocol does not, plus the few the peers document that no preset reads (`UNREAD`: HAMi's
`nvidia.com/vgpu-mode`, Volcano's `volcano.sh/vgpu-mode`, ...). A resource some node offers is not
reported: the scheduler then counts it as any extended resource, as kube-scheduler would (NVIDIA's
`nvidia.com/gpu` on a node running NVIDIA's device plugin). Pure functions over pod manifests.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from runtimekit.kube.objects import Pod, annotations_of
from runtimekit.protocol.loader import RESOURCE_KINDS, KitProtocol
from runtimekit.protocol.memo import PerProtocol
from runtimekit.protocol.presets import PRESETS, passed_resources, preset_protocol

RESOURCE, ANNOTATION = "resource", "annotation"

# Names the peers document that no preset reads: (kind, name, system, what it does there).
UNREAD: tuple[tuple[str, str, str, str], ...] = (
    (ANNOTATION, "nvidia.com/vgpu-mode", "HAMi", "sharing mode (hami-core, mig, mps)"),
    (ANNOTATION, "nvidia.com/numa-bind", "HAMi", "GPUs of one NUMA node"),
    (ANNOTATION, "hami.io/device-scoring-weights", "HAMi", "GPU scoring weights"),
    (ANNOTATION, "volcano.sh/vgpu-mode", "Volcano", "vGPU mode (hami-core, mig)"),
    (ANNOTATION, "volcano.sh/vgpu-podgroup-policy", "Volcano", "vGPU spread within a PodGroup"),
)
_ANNOTATION_KEYS = ("gpuModels", "gpuModelsExcluded", "gpuUuids", "gpuUuidsExcluded", "nodePolicy", "gpuPolicy")


@dataclass(frozen=True)
class Finding:
    """A peer's name on a pod that the active protocol does not read."""

    kind: str  # RESOURCE or ANNOTATION
    name: str
    presets: tuple[str, ...]  # the presets that read it (empty: none does)
    note: str = ""  # what it does in its system, for names no preset reads

    def message(self) -> str:
        if self.kind == RESOURCE:
            what = (
                f"resource {self.name} is not a GPU resource of this cluster's protocol: it counts as an extended "
                "resource, which no node offers"
            )
        else:
            what = f"annotation {self.name} is not read by this cluster's protocol, so it has no effect"
        if self.presets:
            which = " or ".join(f"the {p!r} preset" for p in self.presets)
            return f"{what}; {which} reads it (runtimekit protocol preset {self.presets[0]})"
        return f"{what}; no protocol preset reads it ({self.note})"


@dataclass(frozen=True)
class _Read:
    """What one protocol reads: resource names, MIG prefix, pod annotation keys."""

    resources: frozenset[str]
    mig_prefix: str
    annotations: frozenset[str]

    def reads(self, kind: str, name: str) -> bool:
        if kind == RESOURCE:
            return name in self.resources or name.startswith(self.mig_prefix)
        return name in self.annotations


def _read(protocol: KitProtocol) -> _Read:
    resources = frozenset(n for kind in RESOURCE_KINDS for n in protocol.names(kind)) | passed_resources(protocol)
    annotations = frozenset(
        protocol.values[f"annotations.{key}"] for key in _ANNOTATION_KEYS if protocol.values[f"annotations.{key}"]
    )
    return _Read(resources, protocol.resources.mig_prefix, annotations | {protocol.annotations.policy})


_UNREAD_BY_NAME = {(kind, name): (system, note) for kind, name, system, note in UNREAD}
_READ_BY: PerProtocol[None, _Read] = PerProtocol(16)  # what a protocol reads (asked for every new pod)
# what is found among a pod's names, before `offered` (pods made from one template carry the same)
_FOUND: PerProtocol[tuple[tuple[str, str], ...], tuple[Finding, ...]] = PerProtocol(4096)


@functools.cache
def _presets_read() -> Mapping[str, _Read]:
    return {name: _read(preset_protocol(name)) for name in PRESETS}


@functools.cache
def _known() -> tuple[frozenset[str], tuple[str, ...], frozenset[str]]:
    """Every resource name, MIG prefix and annotation key some preset reads and the kit's own
    default protocol does not."""
    read = _presets_read().values()
    own = _read(KitProtocol.default())
    return (
        frozenset(n for r in read for n in r.resources) - own.resources,
        tuple(sorted({r.mig_prefix for r in read} - {own.mig_prefix})),
        frozenset(n for r in read for n in r.annotations) - own.annotations,
    )


def _readers(kind: str, name: str) -> tuple[str, ...]:
    return tuple(p for p, read in _presets_read().items() if read.reads(kind, name))


def is_peer_name(kind: str, name: str) -> bool:
    resources, prefixes, annotations = _known()
    if kind == RESOURCE:
        return name in resources or name.startswith(prefixes)
    return name in annotations


def foreign_names(pod: Pod, protocol: KitProtocol, offered: Collection[str] = ()) -> list[Finding]:
    """The peers' resources (in any container's limits or requests) and annotations on `pod` that
    `protocol` does not read, in the order found, each once; resources in `offered` (some node has
    them) are not reported."""
    names = tuple(_names(pod))
    found = _FOUND.get(protocol, names, lambda: _findings(names, _read_by(protocol)))
    return [f for f in found if not (f.kind == RESOURCE and f.name in offered)]


def _read_by(protocol: KitProtocol) -> _Read:
    return _READ_BY.get(protocol, None, lambda: _read(protocol))


def _findings(names: tuple[tuple[str, str], ...], active: _Read) -> tuple[Finding, ...]:
    unread = _UNREAD_BY_NAME
    seen: dict[tuple[str, str], Finding] = {}
    for kind, name in names:
        if (kind, name) in seen or active.reads(kind, name):
            continue
        if is_peer_name(kind, name):
            seen[(kind, name)] = Finding(kind, name, _readers(kind, name))
        elif (kind, name) in unread:
            system, note = unread[(kind, name)]
            seen[(kind, name)] = Finding(kind, name, (), f"{system}: {note}")
    return tuple(seen.values())


def _names(pod: Pod) -> list[tuple[str, str]]:
    annotations = annotations_of(pod)
    out = [(ANNOTATION, str(key)) for key in annotations] if isinstance(annotations, Mapping) else []
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return out
    for group in (spec.get("containers"), spec.get("initContainers")):
        for container in group or []:
            resources = container.get("resources") if isinstance(container, Mapping) else None
            if not isinstance(resources, Mapping):
                continue
            for part in ("limits", "requests"):
                amounts = resources.get(part)
                if isinstance(amounts, Mapping):
                    out += [(RESOURCE, str(name)) for name in amounts]
    return out


def presets_answering(scheduler_name: str) -> tuple[str, ...]:
    """The presets whose scheduler answers to `scheduler_name` (`hami-scheduler`: hami)."""
    return tuple(p for p in PRESETS if scheduler_name in preset_protocol(p).scheduler_aliases)
