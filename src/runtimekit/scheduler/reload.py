"""Conf reload, as Volcano's scheduler does it: the conf file is watched, and a new conf that checks
clean replaces the framework between two sessions (actions and plugins built anew, the cache kept);
a conf with errors is refused (every error logged, and told to `refused`, which counts it and writes
a Warning Event) and the running conf stays. Bytes that are not UTF-8, and a check that raises (a
bug: the traceback is logged), are refused the same way, with the reason as the error: no change
of the file goes unanswered.

The file is polled (`interval`, 1 s by default): its identity and size, as `os.stat` sees them
through symlinks, and then its bytes. A mounted ConfigMap is updated by the kubelet writing a new
timestamped folder and swapping the `..data` symlink to it, so the file's path resolves to a new
inode at once; editors that write in place change the size or modification time. A change is acted
on once the file has read the same twice in a row, so a half-written file is not refused. The
same bytes are never checked twice: a refused conf is refused once, not every poll.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from runtimekit.base.textfiles import TextError, decode_text
from runtimekit.scheduler.framework.check import Checked
from runtimekit.scheduler.framework.problems import Problems

log = logging.getLogger(__name__)

Check = Callable[[str, str], Checked]  # (text, source) -> the checked conf


class ConfWatcher:
    def __init__(
        self,
        path: str | Path,
        check: Check,
        apply: Callable[[Checked], None],
        refused: Callable[[Checked], None],
        interval: float = 1.0,
    ) -> None:
        self.path, self.check, self.apply, self.refused, self.interval = Path(path), check, apply, refused, interval
        self._signature = self._stat()
        self._digest = self._read_digest()  # the conf running now
        self._candidate: str | None = None  # a changed content, seen once
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.reloads = self.refusals = 0

    def _stat(self) -> tuple[int, int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def _read(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except OSError:  # gone for a moment (a symlink swapped by hand): looked at again next poll
            return None

    def _read_digest(self) -> str | None:
        data = self._read()
        return None if data is None else hashlib.sha256(data).hexdigest()

    def poll(self) -> str | None:
        """One look at the file: 'applied', 'refused', 'waiting' (changed, seen once) or None."""
        signature = self._stat()
        if signature == self._signature and self._candidate is None:
            return None
        self._signature = signature
        data = self._read()
        digest = None if data is None else hashlib.sha256(data).hexdigest()
        if data is None or digest == self._digest:
            self._candidate = None
            return None
        if digest != self._candidate:  # first sight of this content: look again next time
            self._candidate = digest
            return "waiting"
        self._candidate = None
        self._digest = digest
        checked = self._checked(data)
        for problem in checked.problems.warnings:
            log.warning("conf reload: %s", problem.message)
        if checked.framework is None:
            self.refusals += 1
            for problem in checked.problems.errors:
                log.error("conf reload refused, the running conf stays: %s", problem.message)
            self.refused(checked)
            return "refused"
        self.reloads += 1
        log.info("conf reload: %s checks clean; it takes over from the next session", self.path)
        self.apply(checked)
        return "applied"

    def _checked(self, data: bytes) -> Checked:
        """The check of the file's new bytes; text that is not UTF-8, or a check that raises, is a conf
        with that one error."""
        source = str(self.path)
        problems = Problems()
        try:
            return self.check(decode_text(data, source), source)
        except TextError as exc:
            problems.error(str(exc))
        except Exception as exc:
            log.exception("conf reload: checking %s failed", source)
            problems.error(f"{source}: checking it failed: {type(exc).__name__}: {exc}")
        return Checked(source, problems)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except Exception:
                log.exception("conf reload: looking at %s failed", self.path)

    def start(self) -> ConfWatcher:
        self._thread = threading.Thread(target=self._run, name="conf-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
