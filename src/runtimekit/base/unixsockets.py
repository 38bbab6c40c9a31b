"""The kernel's limit on unix socket paths, checked before a socket is bound or connected to.

A unix socket's address (`sockaddr_un.sun_path`) holds 108 bytes on Linux, the terminating NUL
among them, so a path of more than 107 bytes (in the file system's encoding) can be neither bound
nor connected to: Python says "AF_UNIX path too long" and gRPC's server only fails to add its port,
its client retries for ever. Every component that takes a socket path (the runtime's sockets, the
device plugin's, the exporter's and the job agent's runtime socket, kubelet's sockets) checks it
when it starts and refuses it with the limit named. Callers: `cli.socketflags`, the protocol's
`sockets.runtime` check, the runtime's and the device plugin's gRPC servers.
"""

from __future__ import annotations

import os
from typing import Final

MAX_PATH_BYTES: Final = 107
_QUOTED = 48


def path_problem(path: str) -> str | None:
    """None when `path` fits a unix socket address, else why not (naming the limit)."""
    size = len(os.fsencode(path))
    if size <= MAX_PATH_BYTES:
        return None
    shown = repr(path) if len(path) <= _QUOTED else f"{path[:_QUOTED]!r}..."
    return (
        f"{shown} is {size} bytes long; a unix socket path may be at most {MAX_PATH_BYTES} bytes "
        "(the kernel's sun_path)"
    )


def check_path(path: str, what: str) -> None:
    """Raise ValueError naming `what` (a flag, a setting) when `path` is too long for a unix socket."""
    problem = path_problem(path)
    if problem is not None:
        raise ValueError(f"{what}: {problem}")
