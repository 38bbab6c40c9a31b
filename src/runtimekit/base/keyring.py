"""HMAC-SHA256 signatures with a small key ring: the `current` key signs, `current` and `previous` verify.

A key ring is read from a folder holding the files `current` and, during a rotation, `previous`
(a Kubernetes Secret mounted as a volume is such a folder). Each file holds one key: its bytes with
surrounding whitespace removed, at least `MIN_KEY_BYTES` long. A signature names the key that made
it (`v1.<key id>.<hex HMAC>`, the key id being the first 16 hex digits of the key's SHA-256), so
the verifier picks that key and a rotation needs no flag day. The folder is read again when one
of its files changes (checked at most every `reload_s`), so a rotated Secret takes effect without a
restart; a folder that turns unreadable keeps the keys last read and says so in the log.
`KeyRingError` is raised at construction when the folder has no usable `current` key: a component
that must sign or verify refuses to start rather than accept everything.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CURRENT, PREVIOUS = "current", "previous"
MIN_KEY_BYTES = 32
SCHEME = "v1"
_FILES = (CURRENT, PREVIOUS)


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


class KeyRing:
    """See the module docstring. Thread-safe."""

    def __init__(
        self,
        keys: Sequence[Key],
        folder: Path | None = None,
        reload_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not keys:
            raise KeyRingError("a key ring needs at least one key")
        self._keys = tuple(keys)
        self._folder, self._reload_s, self._clock = folder, reload_s, clock
        self._stamp = _stamp(folder) if folder is not None else ()
        self._checked = clock()
        self._lock = threading.Lock()
        self.generation = 0  # grows whenever the keys change (callers key caches of verdicts on it)

    @classmethod
    def from_secrets(cls, *secrets_: bytes) -> KeyRing:
        """A fixed ring: the first secret signs, all verify."""
        return cls([Key.of(s) for s in secrets_])

    @classmethod
    def from_folder(
        cls, folder: str | os.PathLike[str], reload_s: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> KeyRing:
        """The ring of a folder (`current`, optional `previous`). Raises KeyRingError naming the problem."""
        path = Path(folder)
        return cls(_read_folder(path), path, reload_s, clock)

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(k.id for k in self._current())

    def sign(self, message: bytes) -> str:
        """`v1.<key id>.<hex HMAC-SHA256>` of `message` with the current key."""
        key = self._current()[0]
        return f"{SCHEME}.{key.id}.{key.mac(message)}"

    def verify(self, message: bytes, signature: str) -> str:
        """Why `signature` is not a valid signature of `message` by a key of the ring, or "" when it is."""
        scheme, _, rest = signature.partition(".")
        key_id, _, mac = rest.partition(".")
        if scheme != SCHEME or not key_id or not mac:
            return f"malformed signature (expected {SCHEME}.<key id>.<hex>)"
        key = next((k for k in self._current() if k.id == key_id), None)
        if key is None:
            return f"signed with key {key_id}, which is neither the current nor the previous key"
        if not hmac.compare_digest(key.mac(message), mac):
            return f"signature does not match (key {key_id})"
        return ""

    def _current(self) -> tuple[Key, ...]:
        if self._folder is None:
            return self._keys
        with self._lock:
            now = self._clock()
            if now - self._checked >= self._reload_s:
                self._checked = now
                self._reload()
            return self._keys

    def _reload(self) -> None:
        assert self._folder is not None
        stamp = _stamp(self._folder)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            keys = _read_folder(self._folder)
        except (KeyRingError, OSError) as exc:
            log.error("assignment keys in %s unreadable, keeping the keys read before: %s", self._folder, exc)
            return
        if keys != list(self._keys):
            log.warning("keys in %s changed: now %s", self._folder, ", ".join(k.id for k in keys))
            self._keys = tuple(keys)
            self.generation += 1


def _stamp(folder: Path) -> tuple[tuple[int, int, int], ...]:
    """What changes when a key file is replaced (a mounted Secret swaps a symlink to a new folder)."""
    out = []
    for name in _FILES:
        try:
            st = os.stat(folder / name)
        except OSError:
            out.append((0, 0, 0))
        else:
            out.append((st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(out)


def _read_folder(folder: Path) -> list[Key]:
    keys = []
    for name in _FILES:
        path = folder / name
        try:
            secret = path.read_bytes().strip()
        except FileNotFoundError:
            if name == CURRENT:
                raise KeyRingError(f"no key file {path}") from None
            continue
        except OSError as exc:
            raise KeyRingError(f"cannot read {path}: {exc.strerror or exc}") from None
        keys.append(Key.of(secret, str(path)))
    return keys


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
