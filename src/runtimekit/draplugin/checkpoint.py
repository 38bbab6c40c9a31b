"""The plugin's record of the claims it prepared, so NodePrepareResources is idempotent across restarts.

kubelet calls NodePrepareResources again for a claim it already prepared (after its own restart, or
the plugin's), and NodeUnprepareResources for a claim the plugin may not remember; the record answers
a repeat with the same devices without asking the API server or the runtime again, and tells an
unprepare which claim it was. One JSON file, replaced atomically (fsync, rename) on every change; a
file that cannot be read is set aside (`.corrupt`) and the plugin starts empty: kubelet's next
prepare then prepares again through the runtime, whose Allocate is idempotent per claim and request.
Called by `service.py` under its lock.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger(__name__)
VERSION = 1


@dataclass(frozen=True)
class PreparedDevice:
    request: str
    pool: str
    device: str
    cdi_ids: tuple[str, ...]


@dataclass(frozen=True)
class PreparedClaim:
    namespace: str
    name: str
    uid: str
    devices: tuple[PreparedDevice, ...]


class Checkpoint:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._claims: dict[str, PreparedClaim] = self._load()

    def _load(self) -> dict[str, PreparedClaim]:
        try:
            data = json.loads(self.path.read_text())
            claims = {}
            for uid, entry in data["claims"].items():
                devices = tuple(
                    PreparedDevice(d["request"], d["pool"], d["device"], tuple(d["cdi_ids"])) for d in entry["devices"]
                )
                claims[uid] = PreparedClaim(entry["namespace"], entry["name"], uid, devices)
            return claims
        except FileNotFoundError:
            return {}
        except (ValueError, KeyError, TypeError) as exc:
            aside = self.path.with_suffix(".corrupt")
            os.replace(self.path, aside)
            log.error(
                "checkpoint %s unreadable (%s): set aside as %s; claims are prepared again", self.path, exc, aside
            )
            return {}

    def get(self, uid: str) -> PreparedClaim | None:
        return self._claims.get(uid)

    def __iter__(self) -> Iterator[PreparedClaim]:
        return iter(list(self._claims.values()))

    def add(self, claim: PreparedClaim) -> None:
        self._claims[claim.uid] = claim
        self._save()

    def remove(self, uid: str) -> None:
        if self._claims.pop(uid, None) is not None:
            self._save()

    def _save(self) -> None:
        claims = {uid: {k: v for k, v in asdict(c).items() if k != "uid"} for uid, c in sorted(self._claims.items())}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "w") as out:
                json.dump({"version": VERSION, "claims": claims}, out, sort_keys=True)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
