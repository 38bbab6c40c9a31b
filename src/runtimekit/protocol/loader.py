"""Load, validate and compare `protocol.yaml` files.

The file is a YAML mapping of dotted keys (`resources.gpu: aliyun.com/gpu`); nested mappings are
accepted and flattened to the same dotted keys. Every key has a built-in default, so an empty file
is the default protocol. Unknown keys and bad values raise `ProtocolError` naming the key.
Callers: every component at start-up, `runtimekit protocol show|check`, and tests.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from runtimekit.protocol.names import (
    check_absolute_path,
    check_dns_subdomain,
    check_extended_resource_name,
    check_memory_unit,
    check_mig_prefix,
    check_qualified_name,
    memory_unit_mib,
)

Validator = Callable[[str], str | None]

# key -> (default, validator). The order here is the order `protocol show` prints.
_SCHEMA: dict[str, tuple[str, Validator]] = {
    "resources.gpu": ("aliyun.com/gpu", check_extended_resource_name),
    "resources.core": ("aliyun.com/gpu-core.percentage", check_extended_resource_name),
    "resources.memory": ("aliyun.com/gpu-memory", check_extended_resource_name),
    "resources.migPrefix": ("aliyun.com/mig-", check_mig_prefix),
    "memoryUnit": ("1Gi", check_memory_unit),
    "schedulerName": ("lj-runtimekit-scheduler", check_dns_subdomain),
    "labels.enable": ("lj_runtimekit_enable", check_qualified_name),
    "labels.state": ("lj_runtimekit_state", check_qualified_name),
    "labels.gpuModel": ("aliyun.com/gpu-model", check_qualified_name),
    "labels.gpuCount": ("aliyun.com/gpu-count", check_qualified_name),
    "labels.migMode": ("aliyun.com/gpu-mig-mode", check_qualified_name),
    "annotations.nodeDevices": ("runtimekit.aliyun.com/devices", check_qualified_name),
    "annotations.assignment": ("runtimekit.aliyun.com/gpu-assignment", check_qualified_name),
    "annotations.assumeTime": ("runtimekit.aliyun.com/assume-time", check_qualified_name),
    "annotations.allocated": ("runtimekit.aliyun.com/allocated", check_qualified_name),
    "annotations.policy": ("runtimekit.aliyun.com/placement-policy", check_qualified_name),
    "annotations.gpuModels": ("runtimekit.aliyun.com/gpu-models", check_qualified_name),
    "annotations.simulatedRuntime": ("runtimekit.aliyun.com/simulated-runtime", check_qualified_name),
    "sockets.runtime": ("/run/lj-runtimekit/runtime.sock", check_absolute_path),
}

DEFAULTS: Mapping[str, str] = {key: default for key, (default, _) in _SCHEMA.items()}


class ProtocolError(ValueError):
    """A protocol file is unreadable, has an unknown key, or a bad value (the key is named)."""


@dataclass(frozen=True)
class Resources:
    gpu: str
    core: str
    memory: str
    mig_prefix: str

    def manages(self, resource: str) -> bool:
        """True for the kit's own GPU resources (whole GPUs, shares, MIG slices), which the GPU
        plugins account; any other resource is a scalar the fit check compares with allocatable."""
        return resource in (self.gpu, self.core, self.memory) or resource.startswith(self.mig_prefix)


@dataclass(frozen=True)
class Labels:
    enable: str
    state: str
    gpu_model: str
    gpu_count: str
    mig_mode: str


@dataclass(frozen=True)
class Annotations:
    node_devices: str
    assignment: str
    assume_time: str
    allocated: str
    policy: str
    gpu_models: str
    simulated_runtime: str


@dataclass(frozen=True)
class Sockets:
    runtime: str


@dataclass(frozen=True)
class Protocol:
    """The effective protocol: typed groups plus the flat dotted-key view it was built from."""

    values: Mapping[str, str]
    resources: Resources
    labels: Labels
    annotations: Annotations
    sockets: Sockets
    memory_unit: str
    memory_unit_mib: int
    scheduler_name: str

    def manages(self, resource: str) -> bool:
        return self.resources.manages(resource)

    @property
    def fingerprint(self) -> str:
        """A short hash of every effective value; equal protocols have equal fingerprints."""
        canonical = json.dumps(dict(sorted(self.values.items())), separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]

    def to_yaml(self) -> str:
        return "".join(f"{key}: {_quote(value)}\n" for key, value in self.values.items())

    @classmethod
    def default(cls) -> Protocol:
        return parse_protocol_mapping({}, source="<defaults>")


def _quote(value: str) -> str:
    dumped = yaml.safe_dump(value, default_flow_style=True, width=1 << 16).strip()
    return dumped.removesuffix("\n...").strip()


def _flatten(data: Mapping[str, Any], prefix: str, out: dict[str, Any], source: str) -> None:
    for raw_key, value in data.items():
        if not isinstance(raw_key, str):
            raise ProtocolError(f"{source}: key {raw_key!r} is not a string")
        key = f"{prefix}{raw_key}"
        if isinstance(value, Mapping):
            _flatten(value, f"{key}.", out, source)
        elif key in out:
            raise ProtocolError(f"{source}: key {key!r} is given twice")
        else:
            out[key] = value


def parse_protocol_mapping(data: Mapping[str, Any], source: str) -> Protocol:
    """Validate a mapping of dotted (or nested) keys and build the effective protocol."""
    flat: dict[str, Any] = {}
    _flatten(data, "", flat, source)
    unknown = sorted(set(flat) - set(_SCHEMA))
    if unknown:
        raise ProtocolError(
            f"{source}: unknown key {unknown[0]!r}"
            + (f" (and {len(unknown) - 1} more)" if unknown[1:] else "")
            + f"; known keys: {', '.join(_SCHEMA)}"
        )
    values: dict[str, str] = {}
    for key, (default, validate) in _SCHEMA.items():
        raw = flat.get(key, default)
        if not isinstance(raw, str):
            raise ProtocolError(f"{source}: key {key!r} must be a string, got {type(raw).__name__} {raw!r}")
        problem = validate(raw)
        if problem:
            raise ProtocolError(f"{source}: key {key!r} has a bad value {raw!r}: {problem}")
        values[key] = raw
    return Protocol(
        values=values,
        resources=Resources(
            gpu=values["resources.gpu"],
            core=values["resources.core"],
            memory=values["resources.memory"],
            mig_prefix=values["resources.migPrefix"],
        ),
        labels=Labels(
            enable=values["labels.enable"],
            state=values["labels.state"],
            gpu_model=values["labels.gpuModel"],
            gpu_count=values["labels.gpuCount"],
            mig_mode=values["labels.migMode"],
        ),
        annotations=Annotations(
            node_devices=values["annotations.nodeDevices"],
            assignment=values["annotations.assignment"],
            assume_time=values["annotations.assumeTime"],
            allocated=values["annotations.allocated"],
            policy=values["annotations.policy"],
            gpu_models=values["annotations.gpuModels"],
            simulated_runtime=values["annotations.simulatedRuntime"],
        ),
        sockets=Sockets(runtime=values["sockets.runtime"]),
        memory_unit=values["memoryUnit"],
        memory_unit_mib=memory_unit_mib(values["memoryUnit"]),
        scheduler_name=values["schedulerName"],
    )


def parse_protocol_text(text: str, source: str = "<text>") -> Protocol:
    """Parse the text of a `protocol.yaml`. Empty text is the default protocol."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ProtocolError(f"{source}: not valid YAML: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ProtocolError(f"{source}: expected a mapping of dotted keys, got {type(data).__name__}")
    return parse_protocol_mapping(data, source)


def load_protocol(path: str | Path | None = None) -> Protocol:
    """Load a protocol file, or the defaults when `path` is None."""
    if path is None:
        return Protocol.default()
    return _single(load_protocol_sources(path), str(path))


def _single(found: list[tuple[str, Protocol]], source: str) -> Protocol:
    if len(found) != 1:
        raise ProtocolError(f"{source}: holds {len(found)} protocols; give a file with exactly one")
    return found[0][1]


def load_protocol_sources(path: str | Path) -> list[tuple[str, Protocol]]:
    """Read a protocol file or a manifest file of ConfigMaps holding a `protocol.yaml` key.

    Returns (label, protocol) pairs: one for a plain protocol file, one per matching ConfigMap
    (labelled `file:namespace/name`). A manifest with no such ConfigMap is an error.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ProtocolError(f"{source}: cannot read: {exc.strerror or exc}") from exc
    try:
        docs = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        raise ProtocolError(f"{source}: not valid YAML: {exc}") from exc
    if not docs:
        return [(source, Protocol.default())]
    if not any(_is_manifest(doc) for doc in docs):
        if len(docs) != 1 or not isinstance(docs[0], Mapping):
            raise ProtocolError(f"{source}: expected one mapping of dotted keys")
        return [(source, parse_protocol_mapping(docs[0], source))]
    found = [
        (f"{source}:{label}", parse_protocol_text(body, f"{source}:{label}")) for label, body in _configmap_bodies(docs)
    ]
    if not found:
        raise ProtocolError(f"{source}: no ConfigMap with a 'protocol.yaml' key")
    return found


def _is_manifest(doc: object) -> bool:
    return isinstance(doc, Mapping) and "kind" in doc and "apiVersion" in doc


def _configmap_bodies(docs: Iterable[object]) -> Iterable[tuple[str, str]]:
    for doc in docs:
        if not isinstance(doc, Mapping):
            continue
        if doc.get("kind") == "List":
            yield from _configmap_bodies(doc.get("items") or [])
            continue
        data = doc.get("data") or {}
        if doc.get("kind") != "ConfigMap" or "protocol.yaml" not in data:
            continue
        meta = doc.get("metadata") or {}
        label = f"{meta.get('namespace', 'default')}/{meta.get('name', '?')}"
        body = data["protocol.yaml"]
        if not isinstance(body, str):
            raise ProtocolError(f"ConfigMap {label}: data['protocol.yaml'] must be a string")
        yield label, body


@dataclass(frozen=True)
class Difference:
    key: str
    values: Mapping[str, str]  # source label -> value


def compare_protocols(protocols: Iterable[tuple[str, Protocol]]) -> list[Difference]:
    """Every key whose effective value is not the same in all the given protocols."""
    items = list(protocols)
    diffs: list[Difference] = []
    for key in _SCHEMA:
        seen = {label: proto.values[key] for label, proto in items}
        if len(set(seen.values())) > 1:
            diffs.append(Difference(key, seen))
    return diffs
