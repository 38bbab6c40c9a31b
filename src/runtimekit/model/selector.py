"""Which GPUs a pod may use: models and UUIDs to use or to avoid, read from pod annotations whose names
the protocol gives (HAMi's `nvidia.com/use-gputype`, `nouse-gputype`, `use-gpuuuid`, `nouse-gpuuuid`
with the `hami` preset).

The rules are HAMi's (`pkg/device/devices.go` CheckType and CheckUUID), which Volcano's vGPU shares
for UUIDs: a value is a comma-separated list, each entry trimmed, empty entries and an empty value
meaning no constraint; a GPU must match some entry of a use list and no entry of an avoid list (the
avoid list wins when both name it). UUIDs match exactly. Models match exactly (the protocol's
`rules.modelMatch: exact`, the kit's own rule) or, with `contains`, when an entry is part of the GPU's
model or product name in any case (`A100` matches `A100-80GB` and `NVIDIA A100-SXM4-80GB`).
HAMi's `mutex` GPU policy (an entry of `annotations.gpuPolicy`, `hami.io/gpu-scheduler-policy`) adds
that only GPUs nobody uses are taken (its Fit skips a card whose `Used` is above 0); the scheduler
checks that against its table (`unused_only`).
`selector_from_annotations` builds one from a pod's annotations; `allows` and `why_not` are pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from runtimekit.model.gpu import GPU_MODEL_ALIASES, GPU_MODELS, Gpu
from runtimekit.protocol import KitProtocol

MODELS, UUIDS, IN_USE = "model", "uuid", "in-use"
MUTEX = "mutex"  # HAMi's GPU policy entry: only GPUs nobody uses


def _entries(text: object) -> tuple[str, ...]:
    return tuple(part.strip() for part in str(text or "").split(",") if part.strip())


def model_names(model: str) -> tuple[str, ...]:
    """The names a GPU model is known by: the scheduler's short model and, for a known model, its
    product name as NVML reports it (a model the kit does not know is its NVML name); and HAMi's card
    type, that name with `NVIDIA-` before it when it does not start with `NVIDIA` (HAMi's device plugin
    registers a `Tesla T4` as `NVIDIA-Tesla T4`, so `use-gputype: NVIDIA-Tesla` picks it)."""
    spec = GPU_MODELS.get(GPU_MODEL_ALIASES.get(model, model))
    product = spec.product if spec is not None else model
    names = (model, product) if spec is not None else (model,)
    return names if product.startswith("NVIDIA") else (*names, f"NVIDIA-{product}")


@dataclass(frozen=True)
class GpuSelector:
    """Models and UUIDs to use (any of; empty: any) and to avoid, with the annotation names they came
    from (for messages)."""

    models: tuple[str, ...] = ()
    models_avoided: tuple[str, ...] = ()
    uuids: tuple[str, ...] = ()
    uuids_avoided: tuple[str, ...] = ()
    contains: bool = False  # models match as parts of the model or product name, in any case
    model_keys: tuple[str, ...] = ()
    uuid_keys: tuple[str, ...] = ()
    unused_only: bool = False  # HAMi's `mutex`: only GPUs that hold no share
    policy_key: str = ""

    def _model_matches(self, entry: str, model: str) -> bool:
        if not self.contains:
            return entry == model
        wanted = entry.upper()
        return any(wanted in name.upper() for name in model_names(model))

    def model_ok(self, model: str) -> bool:
        if self.models and not any(self._model_matches(e, model) for e in self.models):
            return False
        return not any(self._model_matches(e, model) for e in self.models_avoided)

    def uuid_ok(self, uuid: str) -> bool:
        if self.uuids and uuid not in self.uuids:
            return False
        return uuid not in self.uuids_avoided

    def allows(self, gpu: Gpu) -> bool:
        return self.model_ok(gpu.model) and self.uuid_ok(gpu.uuid)

    def why_not(self, gpu: Gpu) -> str:
        """Which constraint rules the GPU out (MODELS or UUIDS); "" when it is allowed."""
        if not self.model_ok(gpu.model):
            return MODELS
        return "" if self.uuid_ok(gpu.uuid) else UUIDS

    def reason(self, which: str) -> str:
        """The scheduler's reason for nodes without a GPU the constraint allows."""
        if which == MODELS:
            return f"no GPU of the models asked for ({', '.join(self.model_keys)})"
        if which == IN_USE:
            return f"GPUs in use: {MUTEX} ({self.policy_key}) takes only GPUs nobody uses"
        return f"no GPU with the UUIDs asked for ({', '.join(self.uuid_keys)})"


def selector_from_annotations(annotations: Mapping[str, object], protocol: KitProtocol) -> GpuSelector | None:
    """The pod's GPU constraints under the protocol, None when it has none. In the `exact` model rule
    the allowed models (`annotations.gpuModels`) are the task's node-level `gpu_models` instead, as
    they always were; every other constraint is per GPU."""
    names = protocol.annotations
    contains = protocol.rules.model_match == "contains"
    keys = (
        names.gpu_models if contains else "",
        names.gpu_models_excluded,
        names.gpu_uuids,
        names.gpu_uuids_excluded,
        names.gpu_policy,
    )
    if not any(annotations.get(key) for key in keys if key):
        return None  # the usual pod: no constraint annotation (read for every event of every pod)

    def read(key: str) -> tuple[str, ...]:
        return _entries(annotations.get(key)) if key else ()

    models = read(names.gpu_models) if contains else ()
    selector = GpuSelector(
        models=models,
        models_avoided=read(names.gpu_models_excluded),
        uuids=read(names.gpu_uuids),
        uuids_avoided=read(names.gpu_uuids_excluded),
        contains=contains,
        model_keys=tuple(k for k in (names.gpu_models if contains else "", names.gpu_models_excluded) if k),
        uuid_keys=tuple(k for k in (names.gpu_uuids, names.gpu_uuids_excluded) if k),
        unused_only=MUTEX in read(names.gpu_policy),
        policy_key=names.gpu_policy,
    )
    if not (
        selector.models or selector.models_avoided or selector.uuids or selector.uuids_avoided or selector.unused_only
    ):
        return None
    return selector
