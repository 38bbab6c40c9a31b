"""The kit's GPU selection annotations that no GPU could satisfy, or that are not what they name.

Models and UUIDs to use or avoid (`annotations.gpuModels`, `gpuModelsExcluded`, `gpuUuids`,
`gpuUuidsExcluded`, HAMi's `nvidia.com/use-gputype` and friends under its preset) are read as the
scheduler reads them (`runtimekit.model.selector`: comma lists, blanks ignored, avoid wins; models
matched exactly, or as a part of the name in any case under `rules.modelMatch: contains`). Refused:
- a use list every entry of which the avoid list rules out (no GPU could ever be chosen);
- a UUID entry that is not a GPU or MIG UUID as `nvidia-smi -L` prints them (`GPU-…`, `MIG-…`).
Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from runtimekit.protocol import KitProtocol
from runtimekit.webhook.review import Problem, invalid

_UUID = re.compile(r"^(GPU|MIG)-[0-9A-Za-z][0-9A-Za-z/_-]*$")


def _entries(text: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (text or "").split(",") if part.strip())


def _path(key: str) -> str:
    return f"metadata.annotations[{key}]"


def _model_avoided(entry: str, avoided: tuple[str, ...], contains: bool) -> bool:
    """Whether every GPU the use entry could match is ruled out by an avoid entry."""
    if not contains:
        return entry in avoided
    return any(a.upper() in entry.upper() for a in avoided)


def _contradiction(
    use_key: str, avoid_key: str, annotations: Mapping[str, str], what: str, contains: bool
) -> list[Problem]:
    if not use_key or not avoid_key:
        return []
    used, avoided = _entries(annotations.get(use_key)), _entries(annotations.get(avoid_key))
    if not used or not avoided or not all(_model_avoided(u, avoided, contains) for u in used):
        return []
    why = f"every {what} it names is also avoided by {_path(avoid_key)} ({', '.join(avoided)}), so no GPU could be used"
    return [invalid(_path(use_key), annotations[use_key], why)]


def _malformed_uuids(key: str, annotations: Mapping[str, str]) -> list[Problem]:
    bad = [entry for entry in _entries(annotations.get(key)) if not _UUID.match(entry)] if key else []
    if not bad:
        return []
    why = f"{', '.join(bad)}: not a GPU UUID (GPU-… or MIG-…, as nvidia-smi -L prints them)"
    return [invalid(_path(key), annotations[key], why)]


def annotation_problems(annotations: Mapping[str, str], protocol: KitProtocol) -> list[Problem]:
    names = protocol.annotations
    contains = protocol.rules.model_match == "contains"
    return [
        *_contradiction(names.gpu_models, names.gpu_models_excluded, annotations, "model", contains),
        *_contradiction(names.gpu_uuids, names.gpu_uuids_excluded, annotations, "UUID", False),
        *_malformed_uuids(names.gpu_uuids, annotations),
        *_malformed_uuids(names.gpu_uuids_excluded, annotations),
    ]
