"""JSON for the Kubernetes API, both sides of it: msgspec (8x faster to encode and 2.5x faster to
decode than the standard library, compact output as the real server writes). The embedded API
server stores and serves every object through it; `KubeHttp` encodes request bodies and decodes
responses and watch events with it. `loads_event_lean` decodes a watch event of a pod or a node
without its `metadata.managedFields`, for informers that never read them.
"""

from __future__ import annotations

from typing import Any, TypedDict

import msgspec

_decode = msgspec.json.decode


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes (no spaces)."""
    return msgspec.json.encode(obj)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON; malformed input raises ValueError."""
    try:
        return _decode(data)
    except msgspec.DecodeError as exc:
        raise ValueError(str(exc)) from None


class _ObjectMeta(TypedDict, total=False):
    """ObjectMeta's every field but `managedFields` (a field not named here is not decoded)."""

    name: Any
    generateName: Any
    namespace: Any
    selfLink: Any
    uid: Any
    resourceVersion: Any
    generation: Any
    creationTimestamp: Any
    deletionTimestamp: Any
    deletionGracePeriodSeconds: Any
    labels: Any
    annotations: Any
    ownerReferences: Any
    finalizers: Any


class _SpecStatusObject(TypedDict, total=False):
    """An object of a kind whose fields are its metadata, spec and status (a Pod, a Node), or the
    Status of an ERROR event: every top-level field either has."""

    apiVersion: Any
    kind: Any
    metadata: _ObjectMeta | None
    spec: Any
    status: Any
    code: Any
    reason: Any
    message: Any
    details: Any


class _LeanEvent(TypedDict, total=False):
    type: Any
    object: _SpecStatusObject | None


_lean_event = msgspec.json.Decoder(_LeanEvent).decode


def loads_event_lean(data: bytes | bytearray | memoryview | str) -> Any:
    """A watch event of Pods or Nodes, parsed without `metadata.managedFields`: about half of what
    server-side apply leaves on a pod, skipped without being built (2-2.5x faster than `loads`). An
    event that is not a JSON object, or whose object or metadata is not one, raises ValueError."""
    try:
        return _lean_event(data)
    except msgspec.DecodeError as exc:
        raise ValueError(str(exc)) from None
