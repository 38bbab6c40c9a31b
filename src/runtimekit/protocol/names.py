"""Validation rules for the kinds of names a protocol holds (Kubernetes naming rules).

Each `check_*` returns None when the value is valid, else a short reason. Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN_RE = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_NAME_PART_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_QUANTITY_RE = re.compile(r"^([0-9]+)(Ki|Mi|Gi|Ti|k|M|G|T)?$")
_BINARY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}
_DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_MIB = 1 << 20


def check_dns_subdomain(value: str) -> str | None:
    if not value or len(value) > 253 or not _DNS_SUBDOMAIN_RE.match(value):
        return "must be a DNS subdomain (lower-case alphanumerics, '-' and '.', at most 253 characters)"
    return None


def check_qualified_name(value: str) -> str | None:
    """A label or annotation key: optional DNS-subdomain prefix, '/', then a name of at most 63."""
    prefix, slash, name = value.rpartition("/")
    if slash and (problem := check_dns_subdomain(prefix)):
        return f"prefix {prefix!r} {problem}"
    if not name or len(name) > 63 or not _NAME_PART_RE.match(name):
        return "name part must be 1-63 characters, alphanumeric at both ends, with '-', '_' or '.' inside"
    return None


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


def memory_unit_mib(value: str) -> int:
    """The size of one memory unit in MiB. Raises ValueError for anything `check_memory_unit` rejects."""
    match = _QUANTITY_RE.match(value)
    if not match:
        raise ValueError(f"{value!r} is not a quantity such as 1Gi or 512Mi")
    number = int(match.group(1))
    suffix = match.group(2)
    multiplier = _BINARY.get(suffix or "", _DECIMAL.get(suffix or "", 1))
    size = number * multiplier
    if size <= 0 or size % _MIB:
        raise ValueError(f"{value!r} must be a positive whole number of MiB (e.g. 1Gi, 256Mi)")
    return size // _MIB


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
