"""Crash-safe files in the runtime's state dir: the allocation checkpoint and the on/off switch.

Both are JSON written atomically (temp file in the same folder, fsync, rename, fsync the folder), so
a crash leaves the old file or the new one, never a mix. The checkpoint carries a SHA-256 of its
body: a truncated, edited or bit-flipped file is reported as `CheckpointCorrupt` with the reason,
never read as "no allocations". A MIG grant records its profile, start slice and whether the
runtime made the device (dynamic MIG), so a restart finds, keeps or destroys exactly those devices.

Between full rewrites, changes go to a journal (`checkpoint.journal`): one line per added, changed
or removed allocation, each with its own SHA-256 and a sequence number, appended and made durable
with one fdatasync, which costs a third of a rewrite (no temp file, rename or folder fsync). The
checkpoint records the last sequence number it contains, so journal lines it already holds are
skipped. After `COMPACT_EVERY` lines, and on the first change after a start, the checkpoint is
rewritten whole and the journal emptied. Reading: the checkpoint, then the journal's lines in order;
an incomplete last line (a write cut short by a crash, or a file cut short on disk) cannot be read
and is left out, but never silently: `StateDir.torn_bytes` says how long it was, and the runtime
reports it and compares its allocations with the node's pods; any other bad line makes the whole
state `CheckpointCorrupt`.
Callers: the runtime service at start and after every change.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict

from runtimekit.base.files import fsync_folder, write_atomic
from runtimekit.runtime.allocations import Allocation, Grant, PodRef

CHECKPOINT_FILE = "checkpoint.json"
JOURNAL_FILE = "checkpoint.journal"
CONFIG_FILE = "config.json"
COMPACT_EVERY = 256  # journal lines before the checkpoint is rewritten whole
log = logging.getLogger(__name__)

_KIND = "RuntimeCheckpoint"
_VERSION = 2  # 2: the checkpoint has a journal; a runtime that only knows 1 refuses it and rebuilds from pods
_READABLE = (1, 2)


class CheckpointCorrupt(Exception):
    """The checkpoint exists but cannot be trusted; the message says why."""


def _canonical(body: Mapping[str, object]) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def _checksum(canonical: str) -> str:
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


@functools.lru_cache(maxsize=8192)
def _allocation_text(allocation: Allocation) -> str:
    """One allocation's canonical JSON (cached: an allocation is written again on every later change)."""
    return _canonical(_allocation_json(allocation))


def encode_checkpoint(node: str, allocations: Iterable[Allocation], seq: int = 0) -> bytes:
    """The file's bytes: the body is serialised once, canonically, and its checksum is of those bytes.

    The body is assembled from per-allocation texts; it equals `_canonical` of the whole body
    ("allocations" < "node" < "seq"), which is what `decode_checkpoint` checks. `seq`: the last
    journal line the checkpoint contains (absent, read as 0, in files written before the journal).
    """
    texts = ",".join(_allocation_text(a) for a in allocations)
    tail = f',"seq":{seq}' if seq else ""
    body = f'{{"allocations":[{texts}],"node":{json.dumps(node)}{tail}}}'
    head = json.dumps({"kind": _KIND, "version": _VERSION, "checksum": _checksum(body)}, separators=(",", ":"))
    return f'{head[:-1]},"data":{body}}}'.encode()


def decode_checkpoint(raw: bytes) -> tuple[str, list[Allocation]]:
    """(node, allocations) of a checkpoint file's bytes. Raises CheckpointCorrupt with the reason."""
    node, allocations, _ = _decode(raw)
    return node, allocations


def _decode(raw: bytes) -> tuple[str, list[Allocation], int]:
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointCorrupt(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("kind") != _KIND:
        raise CheckpointCorrupt(f"not a {_KIND}")
    if doc.get("version") not in _READABLE:
        raise CheckpointCorrupt(f"unsupported version {doc.get('version')!r}")
    body = doc.get("data")
    if not isinstance(body, dict) or doc.get("checksum") != _checksum(_canonical(body)):
        raise CheckpointCorrupt("checksum mismatch (the file was truncated or changed)")
    try:
        return str(body["node"]), [_allocation_from(item) for item in body["allocations"]], int(body.get("seq", 0))
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointCorrupt(f"malformed allocation: {exc!r}") from None


# -- the journal ---------------------------------------------------------------------------------
Key = tuple[str, str]  # (pod uid, container)


def journal_line(seq: int, key: Key, text: str | None) -> str:
    """One journal line: `<sha256 hex> <json>` where the JSON is {"seq", "uid", "container"} plus
    "put": the allocation, or "del": true."""
    change = f'"put":{text}' if text is not None else '"del":true'
    body = f'{{"container":{json.dumps(key[1])},{change},"seq":{seq},"uid":{json.dumps(key[0])}}}'
    return f"{hashlib.sha256(body.encode()).hexdigest()} {body}\n"


def replay_journal(raw: bytes, allocations: list[Allocation], seq: int) -> tuple[list[Allocation], int]:
    """The allocations after applying the journal's lines past `seq`, and the last sequence number.
    Raises CheckpointCorrupt for a bad line that is not an incomplete last one."""
    book: dict[Key, Allocation] = {(a.pod.uid, a.container): a for a in allocations}
    lines = raw.split(b"\n")
    for number, line in enumerate(lines[:-1], start=1):  # lines[-1]: what follows the last newline
        digest, _, body = line.partition(b" ")
        if hashlib.sha256(body).hexdigest().encode() != digest:
            raise CheckpointCorrupt(f"journal line {number}: checksum mismatch")
        try:
            doc = json.loads(body)
            line_seq, key = int(doc["seq"]), (str(doc["uid"]), str(doc["container"]))
            if line_seq <= seq:
                continue  # already in the checkpoint (it was rewritten after this line)
            if "put" in doc:
                book[key] = _allocation_from(doc["put"])
            else:
                book.pop(key, None)
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise CheckpointCorrupt(f"journal line {number}: malformed: {exc!r}") from None
        seq = line_seq
    return list(book.values()), seq


class PodRecord(TypedDict):
    namespace: str
    name: str
    uid: str


class GrantRecord(TypedDict):
    """A grant as the checkpoint and the journal hold it (files older than a field may lack it)."""

    uuid: str
    index: int
    coreMilli: int
    memoryMiB: int
    parent: NotRequired[str]
    migProfile: NotRequired[str]  # a MIG slot only
    migStart: NotRequired[int]
    migDynamic: NotRequired[bool]


class AllocationRecord(TypedDict):
    """An allocation as the checkpoint and the journal hold it."""

    pod: PodRecord
    container: str
    grants: list[GrantRecord]
    createdUnixMs: int
    deviceIDs: NotRequired[list[str]]
    resourceNames: NotRequired[list[str]]


def _allocation_json(a: Allocation) -> AllocationRecord:
    return {
        "pod": {"namespace": a.pod.namespace, "name": a.pod.name, "uid": a.pod.uid},
        "container": a.container,
        "grants": [_grant_json(g) for g in a.grants],
        "createdUnixMs": a.created_unix_ms,
        "deviceIDs": list(a.device_ids),
        "resourceNames": list(a.resource_names),
    }


def _grant_json(g: Grant) -> GrantRecord:
    out: GrantRecord = {
        "uuid": g.uuid,
        "index": g.index,
        "coreMilli": g.core_milli,
        "memoryMiB": g.memory_mib,
        "parent": g.parent_uuid,
    }
    if g.mig_profile:  # MIG slot; a dynamic one is a device the runtime made and must destroy
        out |= {"migProfile": g.mig_profile, "migStart": g.mig_start, "migDynamic": g.mig_dynamic}
    return out


def _grant_from(g: GrantRecord) -> Grant:
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


def _allocation_from(item: AllocationRecord) -> Allocation:
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
    """The runtime's state folder and the files in it. Not thread-safe: the service holds its lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.checkpoint = path / CHECKPOINT_FILE
        self.journal = path / JOURNAL_FILE
        self.config = path / CONFIG_FILE
        self._seq = 0  # the last journal line written or read
        self._saved: dict[Key, str] | None = None  # what the files hold; None: unknown, rewrite next time
        self._node = ""
        self._lines = 0  # journal lines since the checkpoint was rewritten
        self._fd: int | None = None
        self._current: list[Allocation] = []
        self.torn_bytes = 0  # length of the incomplete last journal line found by the last load (0: none)

    def load_allocations(self) -> tuple[str, list[Allocation]] | None:
        """The checkpoint and its journal, or None when there is none yet. Raises CheckpointCorrupt."""
        self._forget()
        self.torn_bytes = 0
        try:
            raw = self.checkpoint.read_bytes()
        except FileNotFoundError:
            if self.journal.exists() and self.journal.stat().st_size:
                raise CheckpointCorrupt(f"{JOURNAL_FILE} without {CHECKPOINT_FILE}") from None
            return None
        node, allocations, seq = _decode(raw)
        try:
            journal = self.journal.read_bytes()
        except FileNotFoundError:
            journal = b""
        allocations, self._seq = replay_journal(journal, allocations, seq)
        self.torn_bytes = len(journal.rsplit(b"\n", 1)[-1])
        return node, allocations

    def save_allocations(self, node: str, allocations: Iterable[Allocation]) -> None:
        """Make `allocations` durable: journal lines for what changed since the last save, or the
        whole checkpoint when it is time to compact. On an error the next save rewrites it whole."""
        current = list(allocations)
        texts = {(a.pod.uid, a.container): _allocation_text(a) for a in current}
        try:
            if self._saved is None or node != self._node or self._lines >= COMPACT_EVERY:
                self._rewrite(node, current)
            else:
                self._append(texts)
        except BaseException:
            self._forget()
            raise
        self._saved, self._node, self._current = texts, node, current

    def _append(self, texts: dict[Key, str]) -> None:
        saved = self._saved
        assert saved is not None
        changes: list[tuple[Key, str | None]] = [(k, t) for k, t in texts.items() if saved.get(k) != t]
        changes += [(k, None) for k in saved.keys() - texts.keys()]
        if not changes:
            return
        first = self._seq + 1
        # Numbers are taken before writing: if the write fails after reaching the disk, the whole
        # rewrite that follows is numbered past these lines, so they are never replayed over it.
        self._seq += len(changes)
        data = "".join(journal_line(first + i, key, text) for i, (key, text) in enumerate(changes)).encode()
        fd = self._journal_fd()
        while data:
            data = data[os.write(fd, data) :]
        os.fdatasync(fd)
        self._lines += len(changes)

    def _rewrite(self, node: str, allocations: list[Allocation]) -> None:
        write_atomic(self.checkpoint, encode_checkpoint(node, allocations, self._seq))
        fd = self._journal_fd()
        os.ftruncate(fd, 0)
        os.fsync(fd)
        self._lines = 0

    def _journal_fd(self) -> int:
        if self._fd is None:
            created = not self.journal.exists()
            self._fd = os.open(self.journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            if created:
                fsync_folder(self.path)
        return self._fd

    def _forget(self) -> None:
        self._saved = None
        self._close_journal()

    def close(self) -> None:
        """Fold the journal into the checkpoint (so a stopped runtime leaves one file), then close it.
        A failure to rewrite is logged; the journal still holds every change."""
        if self._saved is not None and self._lines:
            try:
                self._rewrite(self._node, self._current)
            except OSError as exc:
                log.warning("could not fold the journal into %s on close: %s", self.checkpoint, exc)
        self._close_journal()

    def _close_journal(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def set_aside_checkpoint(self, stamp_ms: int) -> Path:
        """Move a corrupt checkpoint and its journal out of the way (kept for a post-mortem); returns
        where the checkpoint went."""
        self._forget()
        target = self.checkpoint.with_name(f"{CHECKPOINT_FILE}.corrupt-{stamp_ms}")
        if self.journal.exists():
            os.replace(self.journal, self.journal.with_name(f"{JOURNAL_FILE}.corrupt-{stamp_ms}"))
        if self.checkpoint.exists():
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
