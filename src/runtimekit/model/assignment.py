"""The assignment record: which GPUs, with which shares, the scheduler chose for each container.

The scheduler writes it as JSON in the pod annotation named by `protocol.annotations.assignment`
before binding; the device plugin reads it in Allocate and the runtime enforces it. Codec and
validation live here so that all three agree.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from runtimekit.model.gpu import GpuUUID, NodeName


class ShareJson(TypedDict):
    """One GPU share in the assignment annotation (the MIG fields only for a MIG device)."""

    uuid: str
    index: int
    coreMilli: int
    memoryMiB: int
    migProfile: NotRequired[str]
    parentUUID: NotRequired[str | None]
    migStart: NotRequired[int]


class AssignmentJson(TypedDict):
    """The assignment annotation's JSON (`Assignment.to_annotation`)."""

    version: int
    node: str
    policy: str
    containers: dict[str, list[ShareJson]]


class AssignmentError(ValueError):
    """An assignment annotation that cannot be read; the message names the field."""


@dataclass(frozen=True)
class GpuShare:
    """A share of one GPU (or one MIG device) given to a container."""

    uuid: GpuUUID
    index: int
    core_milli: int
    memory_mib: int
    mig_profile: str = ""
    parent_uuid: GpuUUID | None = None  # the physical GPU of a MIG device
    mig_start: int = -1  # first memory slice of a MIG device

    def __post_init__(self) -> None:
        if self.index < 0:
            raise AssignmentError(f"GPU index must not be negative, got {self.index}")
        if not 0 <= self.core_milli <= 1000:
            raise AssignmentError(f"core milli must be 0-1000, got {self.core_milli}")
        if self.memory_mib < 0:
            raise AssignmentError(f"memory must not be negative, got {self.memory_mib}")

    def to_json(self) -> ShareJson:
        out: ShareJson = {
            "uuid": self.uuid,
            "index": self.index,
            "coreMilli": self.core_milli,
            "memoryMiB": self.memory_mib,
        }
        if self.mig_profile:
            out |= {"migProfile": self.mig_profile, "parentUUID": self.parent_uuid, "migStart": self.mig_start}
        return out


@dataclass(frozen=True)
class Assignment:
    """Per container, the GPU shares chosen for a pod on `node`."""

    node: NodeName
    containers: Mapping[str, tuple[GpuShare, ...]]
    policy: str = ""
    extra: Mapping[str, str] = field(default_factory=dict)

    def shares(self) -> Iterable[GpuShare]:
        for shares in self.containers.values():
            yield from shares

    def to_annotation(self) -> str:
        body: AssignmentJson = {
            "version": 1,
            "node": self.node,
            "policy": self.policy,
            "containers": {name: [s.to_json() for s in shares] for name, shares in self.containers.items()},
        }
        return json.dumps(body, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_annotation(cls, text: str) -> Assignment:
        try:
            data = json.loads(text)
        except (TypeError, json.JSONDecodeError) as exc:
            raise AssignmentError(f"assignment annotation is not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise AssignmentError("assignment annotation must be an object")
        node = data.get("node")
        containers = data.get("containers")
        if not isinstance(node, str) or not node:
            raise AssignmentError("assignment annotation lacks 'node'")
        if not isinstance(containers, dict):
            raise AssignmentError("assignment annotation lacks a 'containers' object")
        parsed = {
            str(name): tuple(_share(f"containers.{name}[{i}]", item) for i, item in enumerate(_list(name, shares)))
            for name, shares in containers.items()
        }
        return cls(NodeName(node), parsed, str(data.get("policy", "")))


def _list(name: str, value: object) -> list[Any]:
    if not isinstance(value, list):
        raise AssignmentError(f"containers.{name} must be a list")
    return value


def _int(where: str, item: Mapping[str, object], key: str, default: int | None = None) -> int:
    value = item.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise AssignmentError(f"{where}.{key} must be an integer")
    return value


def _share(where: str, item: object) -> GpuShare:
    if not isinstance(item, dict):
        raise AssignmentError(f"{where} must be an object")
    uuid = item.get("uuid")
    if not isinstance(uuid, str) or not (uuid or item.get("migProfile")):
        raise AssignmentError(f"{where}.uuid must be a non-empty string")
    try:
        return GpuShare(
            GpuUUID(uuid),
            _int(where, item, "index"),
            _int(where, item, "coreMilli"),
            _int(where, item, "memoryMiB"),
            str(item.get("migProfile", "")),
            GpuUUID(str(item["parentUUID"])) if item.get("parentUUID") else None,
            _int(where, item, "migStart", -1),
        )
    except AssignmentError as exc:
        raise AssignmentError(f"{where}: {exc}") from None
