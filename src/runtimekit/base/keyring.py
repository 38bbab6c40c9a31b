"""HMAC-SHA256 signatures with a small key ring read from a folder (a mounted Secret), rotated in two phases.

A key folder holds up to three files, one key each (its bytes with surrounding whitespace removed, at
least `MIN_KEY_BYTES` long):
- `current` (required) signs, and verifies;
- `next` verifies only: a key being rolled out, so that every verifier holds it before anyone signs
  with it;
- `previous` verifies only: the key `current` replaced, so that what was signed with it before the
  rotation still verifies.
A rotation is three edits of the Secret (docs/security.md#rotation): stage a new key as `next`;
promote it (`current` becomes `previous`, `next` becomes `current`); retire `previous`. Any two
neighbouring states of that sequence accept each other's signatures, so a signer and a verifier that
see the Secret at different times (kubelet refreshes each mount on its own schedule) never disagree,
as long as each edit reaches every mount before the next edit is made. A folder with only `current`
(and `previous`) is the format of earlier releases and reads as before.
A signature names the key that made it (`v1.<key id>.<hex HMAC>`, the key id being the first 16 hex
digits of the key's SHA-256), so the verifier picks that key. The folder is read again when one of
its files changes (checked at most every `reload_s`, and at once when a signature names a key the
ring does not hold); a Secret volume is read through its `..data` link, which kubelet swaps in one
step, so the ring never sees half of an update. A folder that turns unreadable keeps the keys last
read and says so in the log. `KeyRingError` is raised at construction when the folder has no usable
`current` key: a component that must sign or verify refuses to start rather than accept everything.
Callers: the scheduler (signs pod assignments at binding) and the device plugin (verifies them).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CURRENT, PREVIOUS, NEXT = "current", "previous", "next"
MIN_KEY_BYTES = 32
SCHEME = "v1"
DATA_LINK = "..data"  # kubelet's Secret volumes: the files link into the folder this names, swapped at once
_FILES = (CURRENT, PREVIOUS, NEXT)


class KeyRingError(ValueError):
    """No usable key: the message says which file and why."""


@dataclass(frozen=True)
class Key:
    """One key and its public id."""

    id: str
    secret: bytes = b""

    @classmethod
    def of(cls, secret: bytes, where: str = "key") -> Key:
        if len(secret) < MIN_KEY_BYTES:
            raise KeyRingError(f"{where} is {len(secret)} bytes long; a key needs at least {MIN_KEY_BYTES}")
        return cls(hashlib.sha256(secret).hexdigest()[:16], secret)

    def mac(self, message: bytes) -> str:
        return hmac.new(self.secret, message, hashlib.sha256).hexdigest()

    def __repr__(self) -> str:  # never print the secret
        return f"Key({self.id})"


@dataclass(frozen=True)
class KeySet:
    """The keys of one state of a rotation: `current` signs; all three verify."""

    current: Key
    previous: Key | None = None
    next: Key | None = None

    @property
    def verifying(self) -> tuple[Key, ...]:
        return tuple(k for k in (self.current, self.previous, self.next) if k is not None)

    def find(self, key_id: str) -> Key | None:
        return next((k for k in self.verifying if k.id == key_id), None)

    def describe(self) -> str:
        """`current <id>, previous <id>, next <id>` (the ids only: they are public)."""
        named = ((CURRENT, self.current), (PREVIOUS, self.previous), (NEXT, self.next))
        return ", ".join(f"{role} {key.id}" for role, key in named if key is not None)


class KeyRing:
    """See the module docstring. Thread-safe."""

    def __init__(
        self,
        keys: KeySet,
        folder: Path | None = None,
        reload_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._keys = keys
        self._folder, self._reload_s, self._clock = folder, reload_s, clock
        self._stamp: tuple[object, ...] = ()  # of the files `keys` were read from (set by from_folder)
        self._checked = clock()
        self._lock = threading.Lock()
        self._generation = 0

    @classmethod
    def from_secrets(cls, current: bytes, previous: bytes | None = None, next_: bytes | None = None) -> KeyRing:
        """A fixed ring (tests, benchmarks): `current` signs, all verify."""
        return cls(
            KeySet(
                Key.of(current),
                Key.of(previous) if previous is not None else None,
                Key.of(next_) if next_ is not None else None,
            )
        )

    @classmethod
    def from_folder(
        cls, folder: str | os.PathLike[str], reload_s: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> KeyRing:
        """The ring of a folder (`current`, optional `previous` and `next`). Raises KeyRingError naming the
        problem."""
        path = Path(folder)
        source = _data_folder(path)
        stamp = _stamp(source)  # before reading: a change made meanwhile is read again at the next check
        ring = cls(_read_folder(path, source), path, reload_s, clock)
        ring._stamp = stamp
        return ring

    @property
    def keys(self) -> KeySet:
        """The keys now (the folder is looked at again first, at most every `reload_s`)."""
        return self._current()

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The ids of the keys that verify, the signing one first."""
        return tuple(k.id for k in self._current().verifying)

    @property
    def generation(self) -> int:
        """Grows whenever the keys change: callers key caches of verdicts on it."""
        self._current()
        return self._generation

    def sign(self, message: bytes) -> str:
        """`v1.<key id>.<hex HMAC-SHA256>` of `message` with the current key."""
        key = self._current().current
        return f"{SCHEME}.{key.id}.{key.mac(message)}"

    def verify(self, message: bytes, signature: str) -> str:
        """Why `signature` is not a valid signature of `message` by a key of the ring, or "" when it is."""
        scheme, _, rest = signature.partition(".")
        key_id, _, mac = rest.partition(".")
        if scheme != SCHEME or not key_id or not mac:
            return f"malformed signature (expected {SCHEME}.<key id>.<hex>)"
        keys = self._current()
        key = keys.find(key_id)
        if key is None and self._folder is not None:
            keys = self._current(now=True)  # a key just staged may not have been read yet
            key = keys.find(key_id)
        if key is None:
            return f"signed with key {key_id}, which is not one of the keys held ({keys.describe()})"
        if not hmac.compare_digest(key.mac(message), mac):
            return f"signature does not match (key {key_id})"
        return ""

    def _current(self, now: bool = False) -> KeySet:
        if self._folder is None:
            return self._keys
        if not now and self._clock() - self._checked < self._reload_s:
            return self._keys  # not due: no lock (the keys are replaced whole, before `_checked` moves)
        with self._lock:
            at = self._clock()
            if now or at - self._checked >= self._reload_s:
                self._reload(self._folder)
                self._checked = at  # only now: a caller meanwhile waits for the lock, not for the old keys
            return self._keys

    def _reload(self, folder: Path) -> None:
        source = _data_folder(folder)
        stamp = _stamp(source)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            keys = _read_folder(folder, source)
        except (KeyRingError, OSError) as exc:
            log.error("assignment keys in %s unreadable, keeping the keys read before: %s", folder, exc)
            return
        if keys != self._keys:
            log.warning("keys in %s changed: now %s", folder, keys.describe())
            self._keys = keys
            self._generation += 1


def _data_folder(folder: Path) -> Path:
    """Where the key files are: a Secret volume's `..data` target (one whole version of the Secret;
    the visible files are links into it, made or removed only after the swap), else the folder."""
    try:
        return folder / os.readlink(folder / DATA_LINK)
    except OSError:  # no such link: a plain folder
        return folder


def key_id_of(signature: str) -> str:
    """The key id a signature names (`v1.<key id>.<hex>`), "" when it is not of that form."""
    scheme, _, rest = signature.partition(".")
    key_id, _, mac = rest.partition(".")
    return key_id if scheme == SCHEME and key_id and mac else ""


def _stamp(folder: Path) -> tuple[object, ...]:
    """What changes when a key file is replaced (a mounted Secret swaps `..data` to a new folder)."""
    out: list[object] = [str(folder)]
    for name in _FILES:
        try:
            st = os.stat(folder / name)
        except OSError:
            out.append((0, 0, 0))
        else:
            out.append((st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(out)


def _read_folder(folder: Path, source: Path) -> KeySet:
    """The keys of `folder`, read from `source` (its data folder); errors name `folder`'s files."""
    found: dict[str, Key] = {}
    for name in _FILES:
        try:
            secret = (source / name).read_bytes().strip()
        except FileNotFoundError:
            if name == CURRENT:
                raise KeyRingError(f"no key file {folder / name}") from None
            continue
        except OSError as exc:
            raise KeyRingError(f"cannot read {folder / name}: {exc.strerror or exc}") from None
        found[name] = Key.of(secret, str(folder / name))
    return KeySet(found[CURRENT], found.get(PREVIOUS), found.get(NEXT))


def ensure_key_folder(folder: str | os.PathLike[str]) -> Path:
    """Make `folder/current` with a fresh random key unless it exists (mode 0600); returns the folder.
    For the embedded cluster, which has no Secret to mount."""
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    current = path / CURRENT
    if not current.exists():
        fd = os.open(current, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(48) + "\n")
    return path
