"""kube-scheduler's HTTP extender messages (`k8s.io/kube-scheduler/extender/v1`), read and written as
kube-scheduler's `HTTPExtender` sends and reads them. Callers: the extender's HTTP handler (`http.py`).

Those Go types carry no JSON tags in any kube-scheduler from 1.28 to 1.35 (the file is the same in
every one), so kube-scheduler writes Go's field names (`Pod`, `NodeNames`, `PodUID`, ...) and reads
answers with Go's `encoding/json`, which matches a key to a field in any case. So the extender reads
the API's own fields in any case (a later key wins, as in Go) and answers with exactly the names
kube-scheduler's types marshal to, `null` where Go writes a nil pointer. The Kubernetes objects inside
(`Pod`, `NodeList`, `Node`) carry JSON tags and are read as the API writes them: their keys are not
folded, since their maps (labels, annotations, resources) are case-sensitive.

`NodeNames` is what kube-scheduler sends to an extender with `nodeCacheCapable: true`, `Nodes` (whole
Node objects) otherwise; a filter answer comes back in the form of its request, with the Node objects
of the nodes that pass copied byte for byte. A body kube-scheduler would not send raises `WireError`
(the handler answers 400 with its message).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import msgspec

from runtimekit.kube.objects import Pod

__all__ = [
    "BindingArgs",
    "ExtenderArgs",
    "FilterAnswer",
    "MetaVictims",
    "NodeEntry",
    "PreemptionArgs",
    "WireError",
    "decode_args",
    "decode_binding",
    "decode_preemption",
    "encode_binding",
    "encode_filter",
    "encode_filter_error",
    "encode_preemption",
    "encode_priorities",
]

MAX_EXTENDER_PRIORITY = 10  # extenderv1.MaxExtenderPriority; kube-scheduler multiplies by weight x 10


class WireError(ValueError):
    """A request body kube-scheduler would not send; the message says what is wrong."""


# -- what kube-scheduler sends ------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class NodeEntry:
    """A Node of `ExtenderArgs.Nodes`: its name, and the object as sent (answered as it came)."""

    name: str
    raw: msgspec.Raw


@dataclass(frozen=True)
class ExtenderArgs:
    """`ExtenderArgs`, the body of filter and prioritize: the pod, and the candidate nodes by name
    (`node_names`, nodeCacheCapable) or as objects (`nodes`)."""

    pod: Pod
    node_names: tuple[str, ...] | None = None
    nodes: tuple[NodeEntry, ...] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The candidate nodes' names, in the order sent."""
        if self.node_names is not None:
            return self.node_names
        return tuple(n.name for n in self.nodes or ())


@dataclass(frozen=True)
class BindingArgs:
    """`ExtenderBindingArgs`: the pod (name, namespace, UID) and the node kube-scheduler chose."""

    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str


@dataclass(frozen=True)
class MetaVictims:
    """`MetaVictims`: the pods (by UID) kube-scheduler would evict on a node, and how many PDBs that breaks."""

    uids: tuple[str, ...]
    num_pdb_violations: int = 0


@dataclass(frozen=True)
class PreemptionArgs:
    """`ExtenderPreemptionArgs`: the pod and, per candidate node, its victims (`NodeNameToMetaVictims`
    from a nodeCacheCapable extender's scheduler, else `NodeNameToVictims` with whole pods, read here
    down to their UIDs)."""

    pod: Pod
    victims: dict[str, MetaVictims]


# Go's field names, by their case-folded spelling (encoding/json matches keys without regard to case).
_ARGS = {"pod": "pod", "nodes": "nodes", "nodenames": "node_names"}
_BINDING = {"podname": "pod_name", "podnamespace": "pod_namespace", "poduid": "pod_uid", "node": "node"}
_PREEMPTION = {"pod": "pod", "nodenametovictims": "victims", "nodenametometavictims": "meta_victims"}
_GO_BINDING = {"pod_name": "PodName", "pod_namespace": "PodNamespace", "pod_uid": "PodUID", "node": "Node"}
_VICTIMS = {"pods": "pods", "numpdbviolations": "num_pdb_violations"}
_META_POD = {"uid": "uid"}

_OBJECT = msgspec.json.Decoder(dict[str, msgspec.Raw] | None)
_NAMES = msgspec.json.Decoder(list[str] | None)
_RAWS = msgspec.json.Decoder(list[msgspec.Raw] | None)
_ANY = msgspec.json.Decoder()


class _Meta(msgspec.Struct):
    name: str = ""
    uid: str = ""


class _Head(msgspec.Struct):
    """The part of a Node or Pod object the extender reads (the rest is skipped unparsed)."""

    metadata: _Meta = msgspec.field(default_factory=_Meta)


class _NodeList(msgspec.Struct):
    items: list[msgspec.Raw] | None = None


_HEAD = msgspec.json.Decoder(_Head)
_NODE_LIST = msgspec.json.Decoder(_NodeList | None)


def _decode(decoder: msgspec.json.Decoder[Any], raw: bytes | msgspec.Raw, what: str) -> Any:
    try:
        return decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise WireError(f"{what}: {exc}") from None


def _fields(raw: bytes | msgspec.Raw, names: Mapping[str, str], what: str) -> dict[str, msgspec.Raw]:
    """A JSON object's members by field, keys matched without regard to case (a later one wins);
    unknown keys are ignored, as Go ignores them. A `null` object has no members."""
    members = _decode(_OBJECT, raw, what)
    if members is None:
        return {}
    found: dict[str, msgspec.Raw] = {}
    for key, value in members.items():
        name = names.get(key.casefold())
        if name is not None:
            found[name] = value
    return found


def _pod(raw: msgspec.Raw | None, what: str) -> Pod:
    pod = _decode(_ANY, raw, what) if raw is not None else None
    if not isinstance(pod, dict):
        raise WireError(f"{what}: the pod is missing (expected a Pod object)")
    return cast(Pod, pod)


def _string(raw: msgspec.Raw | None, what: str) -> str:
    value = _decode(_ANY, raw, what) if raw is not None else None
    if value is None:
        return ""
    if not isinstance(value, str):
        raise WireError(f"{what}: expected a string, got {type(value).__name__}")
    return value


def _count(raw: msgspec.Raw | None, what: str) -> int:
    value = _decode(_ANY, raw, what) if raw is not None else None
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool):
        raise WireError(f"{what}: expected an integer, got {type(value).__name__}")
    return value


def decode_args(body: bytes) -> ExtenderArgs:
    """The body of a filter or prioritize call."""
    fields = _fields(body, _ARGS, "ExtenderArgs")
    pod = _pod(fields.get("pod"), "ExtenderArgs.Pod")
    names = _decode(_NAMES, fields["node_names"], "ExtenderArgs.NodeNames") if "node_names" in fields else None
    nodes: tuple[NodeEntry, ...] | None = None
    listed = _decode(_NODE_LIST, fields["nodes"], "ExtenderArgs.Nodes") if "nodes" in fields else None
    if listed is not None:
        nodes = tuple(NodeEntry(_name(item), item) for item in listed.items or ())
    if names is None and nodes is None:
        raise WireError("ExtenderArgs: neither NodeNames nor Nodes is given")
    return ExtenderArgs(pod, tuple(names) if names is not None else None, nodes)


def _name(item: msgspec.Raw) -> str:
    name = _decode(_HEAD, item, "ExtenderArgs.Nodes.items").metadata.name
    if not name:
        raise WireError("ExtenderArgs.Nodes.items: a node without metadata.name")
    return str(name)


def decode_binding(body: bytes) -> BindingArgs:
    """The body of a bind call."""
    fields = _fields(body, _BINDING, "ExtenderBindingArgs")
    args = BindingArgs(*(_string(fields.get(f), f"ExtenderBindingArgs.{go}") for f, go in _GO_BINDING.items()))
    if not args.pod_name or not args.node:
        raise WireError("ExtenderBindingArgs: PodName and Node are required")
    return args


def decode_preemption(body: bytes) -> PreemptionArgs:
    """The body of a preempt call; victims by UID whichever form they came in."""
    fields = _fields(body, _PREEMPTION, "ExtenderPreemptionArgs")
    pod = _pod(fields.get("pod"), "ExtenderPreemptionArgs.Pod")
    victims: dict[str, MetaVictims] = {}
    for name, go, read in (
        ("victims", "NodeNameToVictims", _pod_uid),
        ("meta_victims", "NodeNameToMetaVictims", _meta_uid),
    ):
        per_node = _decode(_OBJECT, fields[name], f"ExtenderPreemptionArgs.{go}") if name in fields else None
        for node, raw in (per_node or {}).items():
            victims[node] = _victims(raw, read, f"ExtenderPreemptionArgs.{go}[{node}]")
    return PreemptionArgs(pod, victims)


def _victims(raw: msgspec.Raw, uid_of: Any, what: str) -> MetaVictims:
    fields = _fields(raw, _VICTIMS, what)
    pods = _decode(_RAWS, fields["pods"], f"{what}.Pods") if "pods" in fields else None
    uids = tuple(uid_of(p, f"{what}.Pods") for p in pods or ())
    return MetaVictims(uids, _count(fields.get("num_pdb_violations"), f"{what}.NumPDBViolations"))


def _pod_uid(raw: msgspec.Raw, what: str) -> str:
    return str(_decode(_HEAD, raw, what).metadata.uid)


def _meta_uid(raw: msgspec.Raw, what: str) -> str:
    return _string(_fields(raw, _META_POD, what).get("uid"), f"{what}.UID")


# -- what the extender answers ------------------------------------------------------------------
@dataclass(frozen=True)
class FilterAnswer:
    """A filter's outcome: the nodes that pass (in the order asked), the others with why, those no
    eviction helps apart (`FailedAndUnresolvableNodes`), or an error that fails the attempt."""

    passed: tuple[str, ...] = ()
    failed: Mapping[str, str] = field(default_factory=dict)
    unresolvable: Mapping[str, str] = field(default_factory=dict)
    error: str = ""


class _NodeListOut(msgspec.Struct):
    metadata: dict[str, Any]
    items: list[msgspec.Raw]


class _FilterResult(msgspec.Struct, rename={
    "nodes": "Nodes",
    "node_names": "NodeNames",
    "failed_nodes": "FailedNodes",
    "failed_and_unresolvable_nodes": "FailedAndUnresolvableNodes",
    "error": "Error",
}):  # fmt: skip
    nodes: _NodeListOut | None
    node_names: list[str] | None
    failed_nodes: Mapping[str, str]
    failed_and_unresolvable_nodes: Mapping[str, str]
    error: str


class _HostPriority(msgspec.Struct, rename={"host": "Host", "score": "Score"}, gc=False):
    host: str
    score: int


class _BindingResult(msgspec.Struct, rename={"error": "Error"}):
    error: str


class _MetaPod(msgspec.Struct, rename={"uid": "UID"}):
    uid: str


class _MetaVictims(msgspec.Struct, rename={"pods": "Pods", "num_pdb_violations": "NumPDBViolations"}):
    pods: list[_MetaPod]
    num_pdb_violations: int


class _PreemptionResult(msgspec.Struct, rename={"victims": "NodeNameToMetaVictims"}):
    victims: dict[str, _MetaVictims]


_ENCODER = msgspec.json.Encoder()


def encode_filter(args: ExtenderArgs, answer: FilterAnswer) -> bytes:
    """`ExtenderFilterResult` in the form of the request: `NodeNames` for names, `Nodes` (the passing
    Node objects as they came) for objects."""
    nodes: _NodeListOut | None = None
    if args.nodes is not None:
        kept = set(answer.passed)
        nodes = _NodeListOut({}, [n.raw for n in args.nodes if n.name in kept])
    names = list(answer.passed) if args.node_names is not None else None
    return _ENCODER.encode(_FilterResult(nodes, names, answer.failed, answer.unresolvable, answer.error))


def encode_filter_error(message: str) -> bytes:
    """A filter answer that fails the scheduling attempt with `message`."""
    return _ENCODER.encode(_FilterResult(None, None, {}, {}, message))


def encode_priorities(hosts: Sequence[str], scores: Sequence[int]) -> bytes:
    """`HostPriorityList`: each host's score, from 0 to MAX_EXTENDER_PRIORITY."""
    return _ENCODER.encode(list(map(_HostPriority, hosts, scores)))  # thousands: no per-node Python loop


def encode_binding(error: str | None) -> bytes:
    """`ExtenderBindingResult`: an empty `Error` when the pod is bound."""
    return _ENCODER.encode(_BindingResult(error or ""))


def encode_preemption(victims: Mapping[str, MetaVictims]) -> bytes:
    """`ExtenderPreemptionResult`: the nodes where preemption would help, with their victims."""
    out = {node: _MetaVictims([_MetaPod(uid) for uid in v.uids], v.num_pdb_violations) for node, v in victims.items()}
    return _ENCODER.encode(_PreemptionResult(out))
