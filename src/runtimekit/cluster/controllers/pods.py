"""What the workload controllers need to know about pods and owners, as plain functions.

- state: `phase`, `is_active` (not finished, not being deleted), `is_ready`, `is_available` (ready for
  `minReadySeconds`), `is_terminating`;
- of objects of any kind: `name_of`, `is_terminating`, `owner_key` (`namespace/name` of the controller);
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
from runtimekit.kube.objects import Condition, ObjectMeta, OwnerReference, Pod, PodTemplateSpec, meta

FINISHED = frozenset({"Succeeded", "Failed"})
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}


def name_of(obj: Mapping[str, Any]) -> str:
    """An object's name, of any kind ("" when it has none)."""
    return meta(obj).get("name", "")


def phase(pod: Pod) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def is_terminating(obj: Mapping[str, Any]) -> bool:
    """Whether the object, of any kind, is being deleted."""
    return bool(meta(obj).get("deletionTimestamp"))


def is_active(pod: Pod) -> bool:
    """kube's FilterActivePods: not Succeeded or Failed, and not being deleted."""
    return phase(pod) not in FINISHED and not is_terminating(pod)


def _ready_condition(pod: Pod) -> Condition | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition
    return None


def is_ready(pod: Pod) -> bool:
    condition = _ready_condition(pod)
    return condition is not None and condition.get("status") == "True"


def is_running_and_ready(pod: Pod) -> bool:
    return phase(pod) == "Running" and is_ready(pod)


def ready_since(pod: Pod) -> float | None:
    condition = _ready_condition(pod)
    if condition is None or condition.get("status") != "True":
        return None
    return parse_rfc3339(condition.get("lastTransitionTime"))


def is_available(pod: Pod, min_ready_s: int, now: float) -> bool:
    """Ready, and (with minReadySeconds) ready for at least that long."""
    if not is_ready(pod):
        return False
    if min_ready_s <= 0:
        return True
    since = ready_since(pod)
    return since is not None and since + min_ready_s <= now


def owner_key(obj: Mapping[str, Any], kind: str) -> str:
    """`namespace/name` of the controlling owner of an object (of any kind) when the owner is of
    this kind, else ""."""
    for ref in meta(obj).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == kind:
            return f"{meta(obj).get('namespace', '')}/{ref.get('name', '')}"
    return ""


def owner_ref(owner: Mapping[str, Any], api_version: str, kind: str) -> OwnerReference:
    """The controller reference a controller puts on what it creates (blockOwnerDeletion too); the
    owner is of any kind."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta(owner).get("name", ""),
        "uid": meta(owner).get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_from_template(
    template: PodTemplateSpec, owner: OwnerReference, namespace: str, *, name: str = "", generate_name: str = ""
) -> Pod:
    """A pod from a PodTemplateSpec: its labels, annotations, finalizers and spec, owned by `owner`."""
    template_meta = template.get("metadata") or {}
    pod_meta: ObjectMeta = {
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
    """The hash naming a template's ReplicaSet or revision (see the module docstring); `template` is
    a pod template or a revision's data, any JSON object."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += str(collision_count).encode()
    return safe_encode(str(fnv32a(data)))


def _restarts(pod: Pod) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return max((int(s.get("restartCount") or 0) for s in statuses), default=0)


def deletion_order(pods: Sequence[Pod]) -> list[Pod]:
    """The pods, the first to delete first (kube's ActivePodsWithRanks, ranks from the same node)."""
    per_node = Counter(str((p.get("spec") or {}).get("nodeName") or "") for p in pods)

    def rank(pod: Pod) -> tuple[float, ...]:
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
