"""The argparse type of flags that name a unix socket (`--socket`, `--runtime-socket`,
`--exporter-socket`, `--pod-resources-socket`): a path too long to bind or connect to is a usage
error naming the flag and the kernel's limit (`base.unixsockets`), before anything starts. An
empty value passes (those flags take '' for "none")."""

from __future__ import annotations

import argparse

from runtimekit.base.unixsockets import path_problem


def socket_path(value: str) -> str:
    problem = path_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return value
