"""Atomic file replacement: a crash or an error leaves the old file or the new one, never a mix.

The new content goes to a temporary file in the target's folder (same file system, so the rename
is atomic), is flushed to disk, renamed over the target, and the folder is flushed so the rename
itself survives a power cut (`durable=False` skips the two fsyncs where losing the last write to a
crash is acceptable). A failure removes the temporary file and leaves the target untouched.
Callers: the runtime's checkpoint and on/off state, the simulator's reports and plots.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


def fsync_folder(folder: Path) -> None:
    """Make the folder's entries (a file created, renamed or removed in it) durable."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def replacing(path: str | os.PathLike[str], suffix: str = ".tmp", durable: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside `path`; write it completely inside the block. On a normal exit
    it replaces `path`; on an exception it is removed and `path` is left as it was."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        if durable:
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_folder(target.parent)


def write_atomic(path: str | os.PathLike[str], data: bytes | str, durable: bool = True) -> None:
    """Replace `path` with `data` (text is written as UTF-8); see the module docstring."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with replacing(path, durable=durable) as tmp:
        tmp.write_bytes(raw)
