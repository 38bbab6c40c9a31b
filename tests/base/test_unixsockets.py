"""The unix socket path limit is the kernel's: 107 bytes bind, 108 do not, and the check says so."""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path

import pytest

from runtimekit.base.unixsockets import MAX_PATH_BYTES, check_path, path_problem


def path_of(size: int, folder: Path) -> str:
    prefix = f"{folder}/"
    return prefix + "s" * (size - len(prefix))


@pytest.mark.parametrize(("size", "binds"), [(MAX_PATH_BYTES, True), (MAX_PATH_BYTES + 1, False)])
def test_the_limit_is_what_the_kernel_binds(size: int, binds: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="rk-", dir="/tmp") as folder:
        path = path_of(size, Path(folder))
        with socket.socket(socket.AF_UNIX) as sock:
            if binds:
                sock.bind(path)
            else:
                with pytest.raises(OSError, match="too long"):
                    sock.bind(path)
        assert (path_problem(path) is None) is binds


def test_a_long_path_is_refused_naming_the_setting_and_the_limit() -> None:
    with pytest.raises(ValueError, match=r"^--socket: '/x+'\.\.\. is 300 bytes long; .* at most 107 bytes") as caught:
        check_path("/" + "x" * 299, "--socket")
    assert len(str(caught.value)) < 200
    assert path_problem("/run/é" * 20) is not None, "bytes count, not characters"
