"""Protocol presets: the names, units and annotations of another GPU-sharing system, so that its pod
manifests run unchanged on this kit (docs/user-guide/coming-from-*.md).

`PRESETS` maps a preset's name to the keys it sets (every other key keeps its default);
`preset_protocol(name)` is the effective protocol and `preset_text(name)` the `protocol.yaml` that
`runtimekit protocol preset NAME` writes. The facts come from each system's own documentation and
example manifests:

- `hami` — Project-HAMi: `nvidia.com/gpu` (GPUs, each node offering 10 per card),
  `nvidia.com/gpucores` (percent), `nvidia.com/gpumem` (MiB), `nvidia.com/gpumem-percentage`; a
  share without memory gets the whole card's; `nvidia.com/use-gputype` / `nouse-gputype` (any part of
  the card's type, any case) and `use-gpuuuid` / `nouse-gpuuuid`; scheduler `hami-scheduler`;
  `hami.io/node-scheduler-policy` and `hami.io/gpu-scheduler-policy` (binpack, spread); the node
  annotation `hami.io/device-cordon` (GPUs that take no new pods).
- `gpushare` — Aliyun's gpushare scheduler extender and device plugin: `aliyun.com/gpu-mem` (GiB, one
  card per pod) and `aliyun.com/gpu-count` (whole cards).
- `volcano-vgpu` — Volcano's vGPU (Project-HAMi/volcano-vgpu-device-plugin): `volcano.sh/vgpu-number`,
  `volcano.sh/vgpu-cores`, `volcano.sh/vgpu-memory` (MiB), `volcano.sh/vgpu-memory-percentage`, the
  older `volcano.sh/gpu-memory` / `volcano.sh/gpu-number` of Volcano's GPU sharing, HAMi's model
  annotations and `volcano.sh/vgpu-use-gpuuuid` / `vgpu-nouse-gpuuuid`; scheduler `volcano`.
- `nvidia` — NVIDIA's device plugin: `nvidia.com/gpu` (whole GPUs) and `nvidia.com/mig-<profile>`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from runtimekit.protocol.loader import (
    PROTOCOL_VERSION,
    KitProtocol,
    ProtocolError,
    Resources,
    parse_protocol_mapping,
)


@dataclass(frozen=True)
class Preset:
    name: str
    system: str  # the system whose manifests it runs, as its users call it
    keys: Mapping[str, str]  # dotted keys it sets; the rest keep their defaults


_HAMI_MODELS = {
    "rules.modelMatch": "contains",
    "annotations.gpuModels": "nvidia.com/use-gputype",
    "annotations.gpuModelsExcluded": "nvidia.com/nouse-gputype",
}

PRESETS: Mapping[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "hami",
            "HAMi",
            {
                "resources.gpu": "nvidia.com/gpu",
                "resources.core": "nvidia.com/gpucores",
                "resources.memory": "nvidia.com/gpumem",
                "resources.memoryPercent": "nvidia.com/gpumem-percentage",
                "resources.migPrefix": "nvidia.com/mig-",
                "resources.gpuReplicas": "10",
                "resources.memoryAdvertised": "false",
                "memoryUnit": "1Mi",
                "rules.memoryDefault": "whole",
                **_HAMI_MODELS,
                "annotations.gpuUuids": "nvidia.com/use-gpuuuid",
                "annotations.gpuUuidsExcluded": "nvidia.com/nouse-gpuuuid",
                "annotations.nodePolicy": "hami.io/node-scheduler-policy",
                "annotations.gpuPolicy": "hami.io/gpu-scheduler-policy",
                "annotations.gpusCordoned": "hami.io/device-cordon",
                "schedulerAliases": "hami-scheduler",
            },
        ),
        Preset(
            "gpushare",
            "Aliyun gpushare",
            {
                "resources.gpu": "aliyun.com/gpu-count",
                "resources.memory": "aliyun.com/gpu-mem",
                "memoryUnit": "1Gi",
            },
        ),
        Preset(
            "volcano-vgpu",
            "Volcano vGPU",
            {
                "resources.gpu": "volcano.sh/vgpu-number",
                "resources.core": "volcano.sh/vgpu-cores",
                "resources.memory": "volcano.sh/vgpu-memory",
                "resources.memoryPercent": "volcano.sh/vgpu-memory-percentage",
                "resources.migPrefix": "nvidia.com/mig-",
                "resources.gpuReplicas": "10",
                "resources.memoryAdvertised": "false",
                "aliases.gpu": "volcano.sh/gpu-number",
                "aliases.memory": "volcano.sh/gpu-memory",
                "memoryUnit": "1Mi",
                "rules.memoryDefault": "whole",
                **_HAMI_MODELS,
                "annotations.gpuUuids": "volcano.sh/vgpu-use-gpuuuid",
                "annotations.gpuUuidsExcluded": "volcano.sh/vgpu-nouse-gpuuuid",
                "schedulerAliases": "volcano",
            },
        ),
        Preset(
            "nvidia",
            "the NVIDIA device plugin",
            {
                "resources.gpu": "nvidia.com/gpu",
                "resources.migPrefix": "nvidia.com/mig-",
            },
        ),
    )
}


def preset(name: str) -> Preset:
    """A preset by name; ProtocolError lists the known ones."""
    found = PRESETS.get(name)
    if found is None:
        raise ProtocolError(f"unknown protocol preset {name!r}; known presets: {', '.join(PRESETS)}")
    return found


def preset_protocol(name: str) -> KitProtocol:
    """The effective protocol of a preset."""
    return parse_protocol_mapping({"version": str(PROTOCOL_VERSION), **preset(name).keys}, f"preset {name}")


HAMI_PRIORITY = "nvidia.com/priority"  # HAMi's task priority (its chart's resourcePriority)
HAMI_PRIORITY_ENV = "CUDA_TASK_PRIORITY"  # what HAMi's webhook makes of it, for HAMi-core


def passed_resources(protocol: KitProtocol) -> frozenset[str]:
    """Resources a pod may name that no node offers and no scheduler counts (HAMi's
    `ignoredByScheduler`): HAMi's task priority under HAMi's names, which its webhook turns into the
    container's `CUDA_TASK_PRIORITY`."""
    return _HAMI_PASSED if speaks_hami(protocol) else frozenset()


_HAMI_PASSED = frozenset({HAMI_PRIORITY})


def speaks_hami(protocol: KitProtocol) -> bool:
    """Whether the protocol has HAMi's resource names (the `hami` preset, or a file copied from it), so
    that HAMi's own readings apply where they differ from Volcano vGPU's (`gpucores` above 100)."""
    return _hami_resources(protocol.resources)


@functools.cache
def _hami_resources(resources: Resources) -> bool:
    return resources == preset_protocol("hami").resources


def metrics_compat(protocol: KitProtocol) -> tuple[str, ...]:
    """The peer's metric names the exporter also writes by default under a preset's protocol: HAMi's
    under `hami`, dcgm-exporter's under `nvidia` (a file copied from the preset counts as the preset)."""
    if speaks_hami(protocol):
        return ("hami",)
    if _nvidia_resources(protocol.resources):
        return ("dcgm",)
    return ()


@functools.cache
def _nvidia_resources(resources: Resources) -> bool:
    return resources == preset_protocol("nvidia").resources


def preset_text(name: str) -> str:
    """The `protocol.yaml` of a preset: a comment naming it, then every key (as `protocol show` prints)."""
    found = preset(name)
    header = (
        f"# protocol.yaml of the {found.name!r} preset: {found.system}'s manifests run unchanged\n"
        f"# (written by `runtimekit protocol preset {found.name}`; docs/user-guide/coming-from-*.md)\n"
    )
    return header + preset_protocol(name).to_yaml()
