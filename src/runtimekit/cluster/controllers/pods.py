"""What the workload controllers need to know about pods and owners, as plain functions.

- state: `phase`, `is_active` (not finished, not being deleted), `is_ready`, `is_available` (ready for
  `minReadySeconds`), `is_terminating`;
- making: `owner_ref` (a controller reference), `pod_from_template` (labels, annotations, finalizers
  and spec of a template, an owner, a name or generateName);
- `template_hash`: the `pod-template-hash` / revision hash of a template: FNV-1a (32 bit) of its
  canonical JSON and the collision count, written in the alphabet kube's `SafeEncodeString` uses
  (values differ from kube's, which hashes Go structs);
- `deletion_order`: the order kube's ReplicaSet controller deletes pods in on scale down
  (unscheduled, pending, not ready, doubled up on a node, ready for the shortest time, restarted the
  most, newest first).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from runtimekit.base.timestamps import parse_rfc3339
from runtimekit.kube.objects import JsonObject

FINISHED = frozenset({"Succeeded", "Failed"})
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def key_of(obj: Mapping[str, Any]) -> str:
    return f"{meta(obj).get('namespace', '')}/{meta(obj).get('name', '')}"


def phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def is_terminating(obj: Mapping[str, Any]) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def is_active(pod: Mapping[str, Any]) -> bool:
    """kube's FilterActivePods: not Succeeded or Failed, and not being deleted."""
    return phase(pod) not in FINISHED and not is_terminating(pod)


def _ready_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition  # type: ignore[no-any-return]
    return None


def is_ready(pod: Mapping[str, Any]) -> bool:
    condition = _ready_condition(pod)
    return condition is not None and condition.get("status") == "True"


def is_running_and_ready(pod: Mapping[str, Any]) -> bool:
    return phase(pod) == "Running" and is_ready(pod)


def ready_since(pod: Mapping[str, Any]) -> float | None:
    condition = _ready_condition(pod)
    if condition is None or condition.get("status") != "True":
        return None
    return parse_rfc3339(condition.get("lastTransitionTime"))


def is_available(pod: Mapping[str, Any], min_ready_s: int, now: float) -> bool:
    """Ready, and (with minReadySeconds) ready for at least that long."""
    if not is_ready(pod):
        return False
    if min_ready_s <= 0:
        return True
    since = ready_since(pod)
    return since is not None and since + min_ready_s <= now


def owner_key(obj: Mapping[str, Any], kind: str) -> str:
    """`namespace/name` of the object's controlling owner when it is of this kind, else ""."""
    for ref in meta(obj).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == kind:
            return f"{meta(obj).get('namespace', '')}/{ref.get('name', '')}"
    return ""


def owner_ref(owner: Mapping[str, Any], api_version: str, kind: str) -> JsonObject:
    """The controller reference a controller puts on what it creates (blockOwnerDeletion too)."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta(owner).get("name", ""),
        "uid": meta(owner).get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_from_template(
    template: Mapping[str, Any], owner: JsonObject, namespace: str, *, name: str = "", generate_name: str = ""
) -> JsonObject:
    """A pod from a PodTemplateSpec: its labels, annotations, finalizers and spec, owned by `owner`."""
    template_meta = template.get("metadata") or {}
    pod_meta: JsonObject = {
        "namespace": namespace,
        "labels": dict(template_meta.get("labels") or {}),
        "annotations": dict(template_meta.get("annotations") or {}),
        "ownerReferences": [owner],
    }
    if template_meta.get("finalizers"):
        pod_meta["finalizers"] = list(template_meta["finalizers"])
    if name:
        pod_meta["name"] = name
    else:
        pod_meta["generateName"] = generate_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": copy.deepcopy(template.get("spec") or {})}


def semantic(value: Any) -> Any:
    """A value as kube's semantic equality sees it: nulls, empty maps and empty lists are absent
    (`kubectl rollout undo` sends a template with `creationTimestamp: null`)."""
    if isinstance(value, Mapping):
        cleaned = {k: semantic(v) for k, v in value.items()}
        return {k: v for k, v in cleaned.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [semantic(v) for v in value]
    return value


def fnv32a(data: bytes) -> int:
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def safe_encode(text: str) -> str:
    """kube's `rand.SafeEncodeString`: each character mapped into an alphabet without vowels."""
    return "".join(SAFE_ALPHABET[ord(c) % len(SAFE_ALPHABET)] for c in text)


def template_hash(template: Mapping[str, Any], collision_count: int = 0) -> str:
    """The hash naming a template's ReplicaSet or revision (see the module docstring)."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += str(collision_count).encode()
    return safe_encode(str(fnv32a(data)))


def _restarts(pod: Mapping[str, Any]) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return max((int(s.get("restartCount") or 0) for s in statuses), default=0)


def deletion_order(pods: Sequence[JsonObject]) -> list[JsonObject]:
    """The pods, the first to delete first (kube's ActivePodsWithRanks, ranks from the same node)."""
    per_node = Counter(str((p.get("spec") or {}).get("nodeName") or "") for p in pods)

    def rank(pod: JsonObject) -> tuple[float, ...]:
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        since = ready_since(pod)
        created = parse_rfc3339(meta(pod).get("creationTimestamp"))
        return (
            1 if node else 0,
            _PHASE_RANK.get(phase(pod), 0),
            1 if is_ready(pod) else 0,
            -per_node[node] if node else 0,
            0 if since is None else 1,
            -(since or 0.0),
            -_restarts(pod),
            0 if created is None else 1,
            -(created or 0.0),
        )

    return sorted(pods, key=rank)
