"""Load, validate and compare `protocol.yaml` files.

The file is a YAML mapping of dotted keys (`resources.gpu: aliyun.com/gpu`); nested mappings are
accepted and mean the same dotted keys. Every key has a built-in default, so an empty file is the
default protocol. The mapping goes through the kit's one typed configuration path
(`runtimekit.base.config`) into frozen structs, then each name is checked by its validator;
unknown keys and bad values raise `ProtocolError` naming the key. Values are names, so strings,
except the few counts, numbers and switches (`resources.gpuReplicas`, `resources.memoryAdvertised`,
`rules.memoryScaling`, `rules.defaultMemory`, `rules.defaultCores`); a name
list (`aliases.*`, `schedulerAliases`) is a YAML list or one comma-separated string.
The file may say which protocol version it is written for (`version: 3`); a component refuses a
file newer than `PROTOCOL_VERSION` with a message saying so, rather than failing on its new keys.
Callers: every component at start-up, `runtimekit protocol show|check|preset`, and tests.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import msgspec
import yaml

from runtimekit.base import config as typed
from runtimekit.base.textfiles import TextError, load_yaml, load_yaml_all, read_text, yaml_problem
from runtimekit.kube.semantics.names import check_dns_subdomain, check_qualified_name
from runtimekit.protocol.checks import alias_problem, distinct_problem, read_version
from runtimekit.protocol.names import (
    check_default_cores,
    check_default_memory,
    check_extended_resource_name,
    check_memory_unit,
    check_mig_prefix,
    check_replicas,
    check_scaling,
    check_socket_path,
    list_of,
    memory_unit_mib,
    optional,
    split_names,
)

Validator = Callable[[str], str | None]

# The protocol's version: which keys a component knows. A key is only ever added (with a default, so
# older files keep loading); each addition raises the version, so `runtimekit --version` tells which
# protocol files a component can read (those written for this version or an older one). A file may name
# the version it needs (`version: 3`); a component refuses a newer one with a clear message.
# 2: labels.memoryUnit
# 3: resources.memoryPercent, resources.gpuReplicas, resources.memoryAdvertised, aliases.*, rules.*,
#    annotations.gpuModelsExcluded, .gpuUuids, .gpuUuidsExcluded, .nodePolicy, .gpuPolicy,
#    schedulerAliases (what the peers' presets need: runtimekit.protocol.presets)
# 4: rules.memoryScaling, rules.defaultMemory, rules.defaultCores (HAMi's device-plugin knobs),
#    annotations.gpusCordoned
PROTOCOL_VERSION: Final = 4
# Keys added after version 1. Left at their defaults they do not enter the fingerprint, so components
# of different versions that agree on every name they share show the same fingerprint.
ADDED_KEYS: Final = {
    "labels.memoryUnit": 2,
    "resources.memoryPercent": 3,
    "resources.gpuReplicas": 3,
    "resources.memoryAdvertised": 3,
    "aliases.gpu": 3,
    "aliases.core": 3,
    "aliases.memory": 3,
    "aliases.memoryPercent": 3,
    "rules.memoryDefault": 3,
    "rules.modelMatch": 3,
    "annotations.gpuModelsExcluded": 3,
    "annotations.gpuUuids": 3,
    "annotations.gpuUuidsExcluded": 3,
    "annotations.nodePolicy": 3,
    "annotations.gpuPolicy": 3,
    "schedulerAliases": 3,
    "rules.memoryScaling": 4,
    "rules.defaultMemory": 4,
    "rules.defaultCores": 4,
    "annotations.gpusCordoned": 4,
}


class ProtocolError(typed.ConfigError):
    """A protocol file is unreadable, has an unknown key, or a bad value (the key is named)."""


# The groups of names, with their defaults; field order is the order `protocol show` prints.
class Resources(msgspec.Struct, frozen=True, rename="camel"):
    gpu: str = "aliyun.com/gpu"
    core: str = "aliyun.com/gpu-core.percentage"
    memory: str = "aliyun.com/gpu-memory"
    mig_prefix: str = "aliyun.com/mig-"
    memory_percent: str = ""  # v3: percent of one GPU's memory ("": no such resource)
    gpu_replicas: int = 1  # v3: devices per GPU the device plugin advertises under `gpu`
    memory_advertised: bool = True  # v3: whether the device plugin registers `memory` with kubelet

    def manages(self, resource: str) -> bool:
        """True for the kit's own GPU resources (whole GPUs, shares, MIG slices) under their first
        names; `KitProtocol.manages` adds the aliases."""
        return resource in (self.gpu, self.core, self.memory) or resource.startswith(self.mig_prefix)


class Aliases(msgspec.Struct, frozen=True, rename="camel"):
    """v3: more names for a resource, comma-separated; a pod may use any one of them (never two)."""

    gpu: str = ""
    core: str = ""
    memory: str = ""
    memory_percent: str = ""


class Rules(msgspec.Struct, frozen=True, rename="camel"):
    """v3: how a request and the GPU-model annotations are read; v4: what a GPU offers and what a share
    that names no memory or compute gets (HAMi's device-plugin knobs)."""

    # the memory of a share that names none: in proportion to its compute, or all of the GPU's
    memory_default: Literal["proportional", "whole"] = "proportional"
    # GPU models in the model annotations: the exact model name, or any part of the model or
    # product name without regard to case ("A100" matches "NVIDIA A100-SXM4-80GB", as HAMi matches)
    model_match: Literal["exact", "contains"] = "exact"
    # v4: a GPU (not in MIG mode) offers its memory times this (HAMi's deviceMemoryScaling; above 1 its
    # memory is oversubscribed, and HAMi-core is told so)
    memory_scaling: float = 1.0
    # v4: memory units of a share that names no memory (HAMi's defaultMemory; 0: `memory_default` rules)
    default_memory: int = 0
    # v4: compute percent of a share that names no compute (HAMi's defaultCores; 0: no compute share)
    default_cores: int = 0


class Labels(msgspec.Struct, frozen=True, rename="camel"):
    enable: str = "lj_runtimekit_enable"
    state: str = "lj_runtimekit_state"
    gpu_model: str = "aliyun.com/gpu-model"
    gpu_count: str = "aliyun.com/gpu-count"
    mig_mode: str = "aliyun.com/gpu-mig-mode"
    memory_unit: str = "aliyun.com/gpu-memory-unit"  # protocol version 2


class Annotations(msgspec.Struct, frozen=True, rename="camel"):
    node_devices: str = "runtimekit.aliyun.com/devices"
    assignment: str = "runtimekit.aliyun.com/gpu-assignment"
    assignment_signature: str = "runtimekit.aliyun.com/gpu-assignment-signature"
    assume_time: str = "runtimekit.aliyun.com/assume-time"
    allocated: str = "runtimekit.aliyun.com/allocated"
    policy: str = "runtimekit.aliyun.com/placement-policy"
    gpu_models: str = "runtimekit.aliyun.com/gpu-models"
    simulated_runtime: str = "runtimekit.aliyun.com/simulated-runtime"
    gpu_models_excluded: str = ""  # v3: pod: GPU models not to use ("": no such annotation)
    gpu_uuids: str = ""  # v3: pod: the only GPUs (UUIDs) to use
    gpu_uuids_excluded: str = ""  # v3: pod: GPUs (UUIDs) not to use
    node_policy: str = ""  # v3: pod: how to choose the node (a policy name), with gpu_policy below
    gpu_policy: str = ""  # v3: pod: how to choose the GPUs on it
    gpus_cordoned: str = ""  # v4: node: GPUs (UUIDs, comma-separated) that take no new pods


class Sockets(msgspec.Struct, frozen=True, rename="camel"):
    runtime: str = "/run/lj-runtimekit/runtime.sock"

    @property
    def exporter(self) -> str:
        """The runtime's exporter socket, `exporter/` beside `runtime`: the read-only part of its
        API plus health marks (what the exporter needs, and all it can reach)."""
        parent, _, name = self.runtime.rpartition("/")
        return f"{parent}/exporter/{name}"


class _File(msgspec.Struct, frozen=True, rename="camel"):
    """Everything a protocol file may say."""

    resources: Resources = Resources()
    memory_unit: str = "1Gi"
    scheduler_name: str = "lj-runtimekit-scheduler"
    labels: Labels = Labels()
    annotations: Annotations = Annotations()
    sockets: Sockets = Sockets()
    aliases: Aliases = Aliases()
    rules: Rules = Rules()
    scheduler_aliases: str = ""  # v3: more schedulerName values the scheduler answers to


def _dotted(
    data: Mapping[Any, Any], source: str, prefix: str = "", out: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A nested mapping as one mapping of dotted keys; a key that is not a string, or one given
    twice (`resources.gpu` and `resources: {gpu}`), is an error naming it."""
    out = {} if out is None else out
    for raw_key, value in data.items():
        if not isinstance(raw_key, str):
            raise ProtocolError(f"{source}: key {raw_key!r} is not a string")
        key = f"{prefix}{raw_key}"
        if isinstance(value, Mapping):
            _dotted(value, source, f"{key}.", out)
        elif key in out:
            raise ProtocolError(f"{source}: key {key!r} is given twice")
        else:
            out[key] = value
    return out


def _text(value: object) -> str:
    """A value as the flat view holds it: names as they are, switches as `true`/`false`, counts in digits."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _flat(parsed: _File, source: str) -> dict[str, str]:
    return {key: _text(value) for key, value in _dotted(msgspec.to_builtins(parsed), source).items()}


def _typed(value: str) -> str | None:
    """The typed conversion already checked the value (a switch, or one of a few words)."""
    del value
    return None


DEFAULTS: Mapping[str, str] = _flat(_File(), "<defaults>")
_CHECKS: Mapping[str, Validator] = {
    "resources.gpu": check_extended_resource_name,
    "resources.core": check_extended_resource_name,
    "resources.memory": check_extended_resource_name,
    "resources.migPrefix": check_mig_prefix,
    "memoryUnit": check_memory_unit,
    "schedulerName": check_dns_subdomain,
    "labels.enable": check_qualified_name,
    "labels.state": check_qualified_name,
    "labels.gpuModel": check_qualified_name,
    "labels.gpuCount": check_qualified_name,
    "labels.migMode": check_qualified_name,
    "labels.memoryUnit": check_qualified_name,
    "annotations.nodeDevices": check_qualified_name,
    "annotations.assignment": check_qualified_name,
    "annotations.assignmentSignature": check_qualified_name,
    "annotations.assumeTime": check_qualified_name,
    "annotations.allocated": check_qualified_name,
    "annotations.policy": check_qualified_name,
    "annotations.gpuModels": check_qualified_name,
    "annotations.simulatedRuntime": check_qualified_name,
    "sockets.runtime": check_socket_path,
    "resources.memoryPercent": optional(check_extended_resource_name),
    "resources.gpuReplicas": check_replicas,
    "resources.memoryAdvertised": _typed,
    "aliases.gpu": list_of(check_extended_resource_name),
    "aliases.core": list_of(check_extended_resource_name),
    "aliases.memory": list_of(check_extended_resource_name),
    "aliases.memoryPercent": list_of(check_extended_resource_name),
    "rules.memoryDefault": _typed,
    "rules.modelMatch": _typed,
    "rules.memoryScaling": check_scaling,
    "rules.defaultMemory": check_default_memory,
    "rules.defaultCores": check_default_cores,
    "annotations.gpuModelsExcluded": optional(check_qualified_name),
    "annotations.gpuUuids": optional(check_qualified_name),
    "annotations.gpuUuidsExcluded": optional(check_qualified_name),
    "annotations.nodePolicy": optional(check_qualified_name),
    "annotations.gpuPolicy": optional(check_qualified_name),
    "annotations.gpusCordoned": optional(check_qualified_name),
    "schedulerAliases": list_of(check_dns_subdomain),
}
# counts, numbers and a switch
_UNQUOTED = frozenset(
    {
        "resources.gpuReplicas",
        "resources.memoryAdvertised",
        "rules.memoryScaling",
        "rules.defaultMemory",
        "rules.defaultCores",
    }
)
RESOURCE_KINDS: Final = ("gpu", "core", "memory", "memoryPercent")  # the resources that may have aliases


@dataclass(frozen=True)
class KitProtocol:
    """The effective protocol: typed groups plus the flat dotted-key view it was built from.
    `version` is what the file said it was written for (1 when it did not say)."""

    values: Mapping[str, str]
    resources: Resources
    labels: Labels
    annotations: Annotations
    sockets: Sockets
    memory_unit: str
    memory_unit_mib: int
    scheduler_name: str
    aliases: Aliases
    rules: Rules
    scheduler_aliases: tuple[str, ...] = ()
    version: int = field(default=1, compare=False)

    def names(self, kind: str) -> tuple[str, ...]:
        """Every name of one resource (`gpu`, `core`, `memory`, `memoryPercent`): the first name, then
        its aliases; empty for a resource the protocol does not have."""
        return self._names[kind]

    @functools.cached_property
    def _names(self) -> Mapping[str, tuple[str, ...]]:  # read for every container of every pod
        first = {
            "gpu": self.resources.gpu,
            "core": self.resources.core,
            "memory": self.resources.memory,
            "memoryPercent": self.resources.memory_percent,
        }
        return {
            kind: tuple(n for n in (name, *split_names(self.values[f"aliases.{kind}"])) if n)
            for kind, name in first.items()
        }

    def manages(self, resource: str) -> bool:
        """True for the kit's own GPU resources (whole GPUs, shares, MIG slices) under any of their
        names, which the GPU plugins account; any other resource is a scalar the fit check compares
        with allocatable."""
        return resource in self._managed or resource.startswith(self.resources.mig_prefix)

    @functools.cached_property
    def _managed(self) -> frozenset[str]:
        return frozenset(n for kind in RESOURCE_KINDS for n in self.names(kind))

    @property
    def fingerprint(self) -> str:
        """A short hash of every effective value; equal protocols have equal fingerprints. Keys added
        after version 1 count only when they differ from their defaults (see ADDED_KEYS)."""
        counted = {k: v for k, v in self.values.items() if k not in ADDED_KEYS or v != DEFAULTS[k]}
        canonical = json.dumps(dict(sorted(counted.items())), separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]

    def to_yaml(self) -> str:
        """The protocol as a file of dotted keys, every key, under this version's number."""
        lines = [f"version: {PROTOCOL_VERSION}\n"]
        lines += [f"{key}: {value if key in _UNQUOTED else _quote(value)}\n" for key, value in self.values.items()]
        return "".join(lines)

    @classmethod
    def default(cls) -> KitProtocol:
        return parse_protocol_mapping({}, source="<defaults>")


def _quote(value: str) -> str:
    dumped = yaml.safe_dump(value, default_flow_style=True, width=1 << 16).strip()
    return dumped.removesuffix("\n...").strip()


def _lists_allowed(dotted: str) -> bool:
    parts = [typed.canonical(part) for part in dotted.split(".")]
    return parts[:1] == ["aliases"] or parts == ["scheduleraliases"]


def _nested(data: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Dotted keys as nested mappings (`resources.gpu: x` as `resources: {gpu: x}`), nested ones as
    they are; a key given both ways, or twice, is an error naming it. A list of names, where a key
    takes several, becomes their comma-separated form."""
    out: dict[str, Any] = {}
    for dotted, given in _dotted(data, source).items():
        value = given
        if isinstance(given, list) and _lists_allowed(dotted):
            if not all(isinstance(item, str) for item in given):
                raise ProtocolError(f"{source}: key {dotted!r} must be a list of names, got {given!r}")
            value = ",".join(given)
        if isinstance(value, str) and _lists_allowed(dotted):
            value = ",".join(split_names(value))  # one spelling, so equal lists compare equal
        if not dotted or any(not part for part in dotted.split(".")):
            raise ProtocolError(f"{source}: key {dotted!r} is not a dotted name")
        *groups, last = dotted.split(".")
        level = out
        for group in groups:
            level = level.setdefault(group, {})
            if not isinstance(level, dict):
                raise ProtocolError(f"{source}: key {dotted!r} is given twice")
        if last in level:
            raise ProtocolError(f"{source}: key {dotted!r} is given twice")
        level[last] = value
    return out


def _version(nested: dict[str, Any], source: str) -> int:
    """The version the file says it is written for (1 when it does not say); a newer one than this
    component knows is refused here, before its keys could be reported as unknown."""
    found = [key for key in nested if typed.canonical(key) == "version"]
    if len(found) > 1:
        raise ProtocolError(f"{source}: key 'version' is given twice")
    version, problem = read_version(nested.pop(found[0]) if found else None, PROTOCOL_VERSION)
    if problem:
        raise ProtocolError(f"{source}: {problem}")
    return version


def parse_protocol_mapping(data: Mapping[str, Any], source: str) -> KitProtocol:
    """Validate a mapping of dotted (or nested) keys and build the effective protocol."""
    nested = _nested(data, source)
    version = _version(nested, source)
    parsed = typed.convert(_File, nested, where=f"{source}: ", error=ProtocolError)
    values = _flat(parsed, source)
    for key, check in _CHECKS.items():
        problem = check(values[key])
        if problem:
            raise ProtocolError(f"{source}: key {key!r} has a bad value {values[key]!r}: {problem}")
    problem = alias_problem(values, RESOURCE_KINDS)
    if problem:
        raise ProtocolError(f"{source}: {problem}")
    problem = distinct_problem(values, RESOURCE_KINDS)
    if problem:
        raise ProtocolError(f"{source}: {problem}")
    return KitProtocol(
        values=values,
        resources=parsed.resources,
        labels=parsed.labels,
        annotations=parsed.annotations,
        sockets=parsed.sockets,
        memory_unit=parsed.memory_unit,
        memory_unit_mib=memory_unit_mib(parsed.memory_unit),
        scheduler_name=parsed.scheduler_name,
        aliases=parsed.aliases,
        rules=parsed.rules,
        scheduler_aliases=split_names(parsed.scheduler_aliases),
        version=version,
    )


def parse_protocol_text(text: str, source: str = "<text>") -> KitProtocol:
    """Parse the text of a `protocol.yaml`. Empty text is the default protocol."""
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ProtocolError(f"{source}: not valid YAML: {yaml_problem(exc)}") from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ProtocolError(f"{source}: expected a mapping of dotted keys, got {type(data).__name__}")
    return parse_protocol_mapping(data, source)


def load_protocol(path: str | Path | None = None) -> KitProtocol:
    """Load a protocol file, or the defaults when `path` is None."""
    if path is None:
        return KitProtocol.default()
    return _single(load_protocol_sources(path), str(path))


def _single(found: list[tuple[str, KitProtocol]], source: str) -> KitProtocol:
    if len(found) != 1:
        raise ProtocolError(f"{source}: holds {len(found)} protocols; give a file with exactly one")
    return found[0][1]


def load_protocol_sources(path: str | Path) -> list[tuple[str, KitProtocol]]:
    """Read a protocol file or a manifest file of ConfigMaps holding a `protocol.yaml` key.

    Returns (label, protocol) pairs: one for a plain protocol file, one per matching ConfigMap
    (labelled `file:namespace/name`). A manifest with no such ConfigMap is an error.
    """
    source = str(path)
    try:
        text = read_text(path)
    except TextError as exc:
        raise ProtocolError(str(exc)) from None
    try:
        docs = [doc for doc in load_yaml_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        raise ProtocolError(f"{source}: not valid YAML: {yaml_problem(exc)}") from None
    if not docs:
        return [(source, KitProtocol.default())]
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


def compare_protocols(protocols: Iterable[tuple[str, KitProtocol]]) -> list[Difference]:
    """Every key whose effective value is not the same in all the given protocols."""
    items = list(protocols)
    diffs: list[Difference] = []
    for key in DEFAULTS:
        seen = {label: proto.values[key] for label, proto in items}
        if len(set(seen.values())) > 1:
            diffs.append(Difference(key, seen))
    return diffs
