"""Durable state for the embedded API server: the current objects and the resourceVersion counter
in SQLite (stdlib sqlite3, WAL mode), so a restart with the same `state_dir` resumes with the same
objects and a counter that continues. The event history is not kept: a watch from a resourceVersion
older than the restart gets 410 Gone. Every write is its own transaction (synchronous=NORMAL: an
OS crash may lose the last writes, a process crash does not).
Called by the store on every write and by `server.ApiServer` at start-up.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from runtimekit.cluster.apiserver.store import Key

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS objects ("
    " storage TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL, raw BLOB NOT NULL,"
    " PRIMARY KEY (storage, namespace, name))",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)
CRD_STORAGE = "apiextensions.k8s.io/customresourcedefinitions"
FILE_NAME = "apiserver.sqlite3"


class SqlitePersistence:
    """One SQLite file under `state_dir`; safe to call from several threads."""

    def __init__(self, state_dir: str | Path) -> None:
        directory = Path(state_dir)
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / FILE_NAME
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        for statement in _SCHEMA:
            self._db.execute(statement)

    @property
    def rv(self) -> int:
        """The last resourceVersion written (0 for a new state directory)."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'rv'").fetchone()
        return int(row[0]) if row else 0

    def put(self, storage: str, key: Key, raw: bytes, rv: int) -> None:
        with self._lock:
            self._db.execute("BEGIN")
            self._db.execute(
                "INSERT OR REPLACE INTO objects (storage, namespace, name, raw) VALUES (?, ?, ?, ?)",
                (storage, key[0], key[1], raw),
            )
            self._set_rv(rv)
            self._db.execute("COMMIT")

    def delete(self, storage: str, key: Key, rv: int) -> None:
        with self._lock:
            self._db.execute("BEGIN")
            self._db.execute(
                "DELETE FROM objects WHERE storage = ? AND namespace = ? AND name = ?", (storage, key[0], key[1])
            )
            self._set_rv(rv)
            self._db.execute("COMMIT")

    def _set_rv(self, rv: int) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('rv', ?)", (str(rv),))

    def load(self) -> Iterator[tuple[str, bytes]]:
        """(storage, raw) of every object, CustomResourceDefinitions first (they register kinds)."""
        rows = self._db.execute(
            "SELECT storage, raw FROM objects ORDER BY storage != ?, storage, namespace, name", (CRD_STORAGE,)
        ).fetchall()
        for storage, raw in rows:
            yield str(storage), bytes(raw)

    def close(self) -> None:
        with self._lock:
            self._db.close()
