"""Validation rules for the kinds of names a protocol holds: extended resource names, MIG prefixes,
paths, memory units, replica counts, lists of names. Kubernetes' own naming rules (DNS subdomains,
qualified names, label values) are `runtimekit.kube.semantics.names`, which these build on.

Each `check_*` returns None when the value is valid, else a short reason. Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from runtimekit.base.unixsockets import path_problem
from runtimekit.kube.semantics.names import check_qualified_name
from runtimekit.kube.semantics.quantity import parse_quantity

_MEMORY_UNIT_RE = re.compile(r"^([0-9]+)(Ki|Mi|Gi|Ti|k|M|G|T)?$")  # a whole number, no fractions or exponents
_MIB = 1 << 20


def check_extended_resource_name(value: str) -> str | None:
    """kubelet's IsExtendedResourceName: prefixed, not kubernetes.io, not 'requests.'."""
    if "/" not in value:
        return "an extended resource name needs a domain prefix, e.g. example.com/gpu"
    if "kubernetes.io/" in value:
        return "the kubernetes.io domain is reserved for native resources"
    if value.startswith("requests."):
        return "must not start with 'requests.'"
    return check_qualified_name("requests." + value)


def check_mig_prefix(value: str) -> str | None:
    problem = check_extended_resource_name(value + "1g.10gb")
    return f"{problem} (checked as {value}1g.10gb)" if problem else None


def check_absolute_path(value: str) -> str | None:
    if not value.startswith("/") or "\x00" in value:
        return "must be an absolute path"
    return None


def check_socket_path(value: str) -> str | None:
    """The runtime's socket: an absolute path that fits a unix socket address, and so does its
    exporter socket, `exporter/` beside it."""
    parent, _, name = value.rpartition("/")
    return check_absolute_path(value) or path_problem(value) or path_problem(f"{parent}/exporter/{name}")


def memory_unit_mib(value: str) -> int:
    """The size of one memory unit in MiB. Raises ValueError for anything `check_memory_unit` rejects."""
    if not _MEMORY_UNIT_RE.match(value):
        raise ValueError(f"{value!r} is not a quantity such as 1Gi or 512Mi")
    size = parse_quantity(value)
    if size <= 0 or size % _MIB:
        raise ValueError(f"{value!r} must be a positive whole number of MiB (e.g. 1Gi, 256Mi)")
    return int(size // _MIB)


def format_memory_unit(mib: int) -> str:
    """A memory unit of `mib` MiB as its shortest quantity (`1Gi`, `512Mi`), valid as a label value;
    `memory_unit_mib(format_memory_unit(n)) == n`."""
    if mib <= 0:
        raise ValueError(f"a memory unit must be a positive number of MiB, got {mib}")
    return f"{mib >> 10}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def check_memory_unit(value: str) -> str | None:
    try:
        memory_unit_mib(value)
    except ValueError as exc:
        return str(exc)
    return None


MAX_REPLICAS = 100  # HAMi's and Volcano's deviceSplitCount is 10; kubelet lists every replica


def split_names(value: str) -> tuple[str, ...]:
    """The names of a comma-separated list, trimmed, without empty ones."""
    return tuple(part.strip() for part in value.split(",") if part.strip())


def optional(check: Callable[[str], str | None]) -> Callable[[str], str | None]:
    """`check`, except that an empty value (the key names nothing) is fine."""

    def checked(value: str) -> str | None:
        return check(value) if value else None

    return checked


def list_of(check: Callable[[str], str | None]) -> Callable[[str], str | None]:
    """`check` on every name of a comma-separated list (empty: no names)."""

    def checked(value: str) -> str | None:
        for name in split_names(value):
            problem = check(name)
            if problem:
                return f"{name!r}: {problem}"
        return None

    return checked


def check_replicas(value: str) -> str | None:
    if not value.isdigit() or not 1 <= int(value) <= MAX_REPLICAS:
        return f"must be a whole number from 1 to {MAX_REPLICAS}"
    return None


MAX_MEMORY_SCALING = 100.0  # far beyond any use: HAMi's chart ships 1; oversubscription rarely goes past 2


def check_scaling(value: str) -> str | None:
    """A GPU memory scaling factor (the typed conversion already made it a finite number)."""
    if not 0 < float(value) <= MAX_MEMORY_SCALING:
        return f"must be a number above 0 and at most {MAX_MEMORY_SCALING:g}"
    return None


def check_default_memory(value: str) -> str | None:
    if int(value) < 0:
        return "must be a whole number of memory units, 0 or more"
    return None


def check_default_cores(value: str) -> str | None:
    if not 0 <= int(value) <= 100:
        return "must be a whole percent from 0 to 100"
    return None
