"""Scalar resources: every resource a pod or node names besides CPU, memory and the kit's own GPU
resources — extended resources (`example.com/foo`, another vendor's `nvidia.com/gpu`),
`ephemeral-storage` and `hugepages-<size>` — as kube-scheduler's NodeResourcesFit checks them.

A set of amounts is a `Scalars` value: a sorted tuple of (resource name, amount) with no zero
amounts, hashable and cheap when empty (the common case). Amounts are whole units for extended
resources and bytes for storage and huge pages. Pure functions; callers: request parsing, the
ledger, the scheduler's fit check and fairness plugins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from runtimekit.kube.semantics.quantity import parse_quantity

Scalars = tuple[tuple[str, int], ...]
LIMIT = 1 << 62  # larger amounts are refused: no node has them, and numpy's int64 must hold sums
BYTE_RESOURCES = ("ephemeral-storage",)
HUGEPAGES_PREFIX = "hugepages-"


def counted_in_bytes(name: str) -> bool:
    return name in BYTE_RESOURCES or name.startswith(HUGEPAGES_PREFIX)


def scalar_amount(name: str, value: object) -> int:
    """The amount of one scalar resource: bytes (rounded up) for storage and huge pages, a whole
    number for extended resources (Kubernetes refuses fractions of them). Raises ValueError."""
    amount = parse_quantity(value)
    if amount < 0:
        raise ValueError(f"{name} must not be negative, got {value!r}")
    if counted_in_bytes(name):
        whole = -((-amount.numerator) // amount.denominator)
    elif amount.denominator != 1:
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    else:
        whole = int(amount)
    if whole >= LIMIT:
        raise ValueError(f"{name} of {value!r} is beyond any node")
    return whole


def scalars_of(amounts: Mapping[str, int]) -> Scalars:
    """The canonical form of a name -> amount mapping (zeros dropped, sorted by name)."""
    return tuple(sorted((name, int(v)) for name, v in amounts.items() if v))


def combine(left: Scalars, right: Scalars, sign: int = 1) -> Scalars:
    """`left + sign * right`, by name."""
    if not right:
        return left
    if not left and sign > 0:
        return right
    out = dict(left)
    for name, amount in right:
        out[name] = out.get(name, 0) + sign * amount
    return scalars_of(out)


def peak(left: Scalars, right: Scalars) -> Scalars:
    """The larger amount of each name."""
    if not right:
        return left
    out = dict(left)
    for name, amount in right:
        out[name] = max(out.get(name, 0), amount)
    return scalars_of(out)


def amount_of(scalars: Scalars, name: str) -> int:
    for key, amount in scalars:
        if key == name:
            return amount
    return 0


def names(*groups: Iterable[tuple[str, int]]) -> list[str]:
    """Every name appearing in any of the groups, sorted."""
    return sorted({name for group in groups for name, _ in group})
