"""Crash-safe files in the runtime's state dir: the allocation checkpoint and the on/off switch.

Both are JSON written atomically (temp file in the same folder, fsync, rename, fsync the folder), so
a crash leaves the old file or the new one, never a mix. The checkpoint carries a SHA-256 of its
body: a truncated, edited or bit-flipped file is reported as `CheckpointCorrupt` with the reason,
never read as "no allocations". A MIG grant records its profile, start slice and whether the
runtime made the device (dynamic MIG), so a restart finds, keeps or destroys exactly those devices.
Callers: the runtime service at start and after every change.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtimekit.runtime.allocations import Allocation, Grant, PodRef

CHECKPOINT_FILE = "checkpoint.json"
CONFIG_FILE = "config.json"
_KIND = "RuntimeCheckpoint"
_VERSION = 1


class CheckpointCorrupt(Exception):
    """The checkpoint exists but cannot be trusted; the message says why."""


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new content."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _canonical(body: Mapping[str, Any]) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def _checksum(canonical: str) -> str:
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


@functools.lru_cache(maxsize=8192)
def _allocation_text(allocation: Allocation) -> str:
    """One allocation's canonical JSON (cached: an allocation is written again on every later change)."""
    return _canonical(_allocation_json(allocation))


def encode_checkpoint(node: str, allocations: Iterable[Allocation]) -> bytes:
    """The file's bytes: the body is serialised once, canonically, and its checksum is of those bytes.

    The body is assembled from per-allocation texts; it equals `_canonical` of the whole body
    ("allocations" sorts before "node"), which is what `decode_checkpoint` checks.
    """
    body = f'{{"allocations":[{",".join(_allocation_text(a) for a in allocations)}],"node":{json.dumps(node)}}}'
    head = json.dumps({"kind": _KIND, "version": _VERSION, "checksum": _checksum(body)}, separators=(",", ":"))
    return f'{head[:-1]},"data":{body}}}'.encode()


def decode_checkpoint(raw: bytes) -> tuple[str, list[Allocation]]:
    """(node, allocations) of a checkpoint file's bytes. Raises CheckpointCorrupt with the reason."""
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointCorrupt(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("kind") != _KIND:
        raise CheckpointCorrupt(f"not a {_KIND}")
    if doc.get("version") != _VERSION:
        raise CheckpointCorrupt(f"unsupported version {doc.get('version')!r}")
    body = doc.get("data")
    if not isinstance(body, dict) or doc.get("checksum") != _checksum(_canonical(body)):
        raise CheckpointCorrupt("checksum mismatch (the file was truncated or changed)")
    try:
        return str(body["node"]), [_allocation_from(item) for item in body["allocations"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointCorrupt(f"malformed allocation: {exc!r}") from None


def _allocation_json(a: Allocation) -> dict[str, Any]:
    return {
        "pod": {"namespace": a.pod.namespace, "name": a.pod.name, "uid": a.pod.uid},
        "container": a.container,
        "grants": [_grant_json(g) for g in a.grants],
        "createdUnixMs": a.created_unix_ms,
        "deviceIDs": list(a.device_ids),
        "resourceNames": list(a.resource_names),
    }


def _grant_json(g: Grant) -> dict[str, Any]:
    out: dict[str, Any] = {
        "uuid": g.uuid,
        "index": g.index,
        "coreMilli": g.core_milli,
        "memoryMiB": g.memory_mib,
        "parent": g.parent_uuid,
    }
    if g.mig_profile:  # MIG slot; a dynamic one is a device the runtime made and must destroy
        out |= {"migProfile": g.mig_profile, "migStart": g.mig_start, "migDynamic": g.mig_dynamic}
    return out


def _grant_from(g: Mapping[str, Any]) -> Grant:
    return Grant(
        str(g["uuid"]),
        int(g["index"]),
        int(g["coreMilli"]),
        int(g["memoryMiB"]),
        str(g.get("parent", "")),
        str(g.get("migProfile", "")),
        int(g.get("migStart", -1)),
        bool(g.get("migDynamic", False)),
    )


def _allocation_from(item: Mapping[str, Any]) -> Allocation:
    pod = item["pod"]
    grants = tuple(_grant_from(g) for g in item["grants"])
    return Allocation(
        PodRef(str(pod["namespace"]), str(pod["name"]), str(pod["uid"])),
        str(item["container"]),
        grants,
        int(item["createdUnixMs"]),
        tuple(str(i) for i in item.get("deviceIDs", ())),
        tuple(str(n) for n in item.get("resourceNames", ())),
    )


@dataclass(frozen=True)
class ConfigState:
    """The node switch. A fresh node (no file) is enabled."""

    enabled: bool = True
    reason: str = ""
    changed_unix_ms: int = 0


class StateDir:
    """The runtime's state folder and the two files in it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.checkpoint = path / CHECKPOINT_FILE
        self.config = path / CONFIG_FILE

    def load_allocations(self) -> tuple[str, list[Allocation]] | None:
        """The checkpoint, or None when there is none yet. Raises CheckpointCorrupt."""
        try:
            raw = self.checkpoint.read_bytes()
        except FileNotFoundError:
            return None
        return decode_checkpoint(raw)

    def save_allocations(self, node: str, allocations: Iterable[Allocation]) -> None:
        write_atomic(self.checkpoint, encode_checkpoint(node, allocations))

    def set_aside_checkpoint(self, stamp_ms: int) -> Path:
        """Move a corrupt checkpoint out of the way (kept for a post-mortem); returns where it went."""
        target = self.checkpoint.with_name(f"{CHECKPOINT_FILE}.corrupt-{stamp_ms}")
        os.replace(self.checkpoint, target)
        return target

    def load_config(self) -> ConfigState:
        """The switch; a missing file is enabled. Raises CheckpointCorrupt for an unreadable one."""
        try:
            raw = self.config.read_bytes()
        except FileNotFoundError:
            return ConfigState()
        try:
            doc = json.loads(raw)
            return ConfigState(bool(doc["enabled"]), str(doc.get("reason", "")), int(doc.get("changedUnixMs", 0)))
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise CheckpointCorrupt(f"{self.config}: {exc!r}") from None

    def save_config(self, state: ConfigState) -> None:
        doc = {"enabled": state.enabled, "reason": state.reason, "changedUnixMs": state.changed_unix_ms}
        write_atomic(self.config, json.dumps(doc, sort_keys=True).encode())
