"""The serving certificate, re-read when its files change: rotation without a restart.

`ServingCertificate(cert_file, key_file)` loads a server `SSLContext` from the PEM files and
`context()` returns it, loading the files again first when either one's modification time, size or
inode changed (a mounted Secret is replaced by a symlink swap, a cert-manager renewal or `kubectl
apply` of a new Secret both show up so). New connections then use the new certificate; open ones keep
theirs. A change that does not load (a key that does not match, a file half written) keeps the old
context and is logged, and is tried again later. Files are looked at no more often than
every `min_interval_s`. Thread-safe.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

Stamp = tuple[tuple[int, int, int], ...]


def _stamp(*paths: Path) -> Stamp:
    found = []
    for path in paths:
        info = os.stat(path)
        found.append((info.st_mtime_ns, info.st_size, info.st_ino))
    return tuple(found)


def server_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """A TLS 1.2+ server context with the certificate chain and key; ssl.SSLError or OSError when they do not load."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


class ServingCertificate:
    def __init__(self, cert_file: str | Path, key_file: str | Path, min_interval_s: float = 1.0) -> None:
        self.cert_file, self.key_file = Path(cert_file), Path(key_file)
        self.min_interval_s = min_interval_s
        self._lock = threading.Lock()
        self._stamp = _stamp(self.cert_file, self.key_file)
        self._context = server_context(self.cert_file, self.key_file)  # fails start-up with the files' error
        self._looked = time.monotonic()
        self.loads = 1

    def context(self) -> ssl.SSLContext:
        now = time.monotonic()
        if now - self._looked < self.min_interval_s:
            return self._context
        with self._lock:
            self._looked = now
            try:
                stamp = _stamp(self.cert_file, self.key_file)
            except OSError as exc:
                log.warning("serving certificate: cannot read %s: keeping the one loaded", exc)
                return self._context
            if stamp != self._stamp:
                self._reload(stamp)
            return self._context

    def _reload(self, stamp: Stamp) -> None:
        try:
            self._context = server_context(self.cert_file, self.key_file)
        except (ssl.SSLError, OSError, ValueError) as exc:
            log.warning("serving certificate changed but does not load (%s): keeping the one loaded", exc)
            return
        self._stamp = stamp
        self.loads += 1
        log.info("serving certificate reloaded from %s", self.cert_file)
