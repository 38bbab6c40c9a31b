"""Kubernetes resource quantities (`500m`, `2`, `1.5Gi`, `1e3`) as exact fractions.

Pure functions used to read pod specs and node capacity. Raise `ValueError` with the text quoted.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

_QUANTITY_RE = re.compile(r"^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$")
_SUFFIX: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(1 << 10),
    "Mi": Fraction(1 << 20),
    "Gi": Fraction(1 << 30),
    "Ti": Fraction(1 << 40),
    "Pi": Fraction(1 << 50),
    "Ei": Fraction(1 << 60),
}
_MIB = 1 << 20
# Kubernetes quantities hold at most 2^63 with up to nine decimal places; an exponent past this
# cannot name a usable amount either way.
MAX_EXPONENT = 40


def parse_quantity(value: object) -> Fraction:
    """Parse a quantity given as a string or a number. Raises ValueError naming the bad text."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError(f"{value!r} is not a quantity")
        return Fraction(value)
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a quantity")
    return _parse_text(value)


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> Fraction:
    """A quantity string (cached: a scheduler reads the same few strings on every pod event)."""
    match = _QUANTITY_RE.match(value.strip())
    if not match:
        raise ValueError(f"{value!r} is not a quantity such as 500m, 2, 1Gi or 1e3")
    sign, number, suffix = match.group(1), match.group(2), match.group(3) or ""
    amount = Fraction(number)
    if suffix[:1] in ("e", "E"):
        exponent = int(suffix[1:])
        if abs(exponent) > MAX_EXPONENT:  # 1e999999999 would take minutes (and memory) to compute exactly
            raise ValueError(f"{value!r} is out of range (exponent beyond ±{MAX_EXPONENT})")
        amount *= Fraction(10) ** exponent
    else:
        amount *= _SUFFIX[suffix]
    return -amount if sign == "-" else amount


def cpu_milli(value: object) -> int:
    """CPU in milli-cores, rounded up as Kubernetes does for sub-milli amounts."""
    return _cpu_milli_text(value) if isinstance(value, str) else _ceil(parse_quantity(value) * 1000)


def memory_mib(value: object) -> int:
    """Memory in MiB, rounded up."""
    return _memory_mib_text(value) if isinstance(value, str) else _ceil(parse_quantity(value) / _MIB)


@functools.lru_cache(maxsize=4096)
def _cpu_milli_text(value: str) -> int:
    return _ceil(_parse_text(value) * 1000)


@functools.lru_cache(maxsize=4096)
def _memory_mib_text(value: str) -> int:
    return _ceil(_parse_text(value) / _MIB)


def _ceil(amount: Fraction) -> int:
    return -((-amount.numerator) // amount.denominator)


def whole_number(value: object) -> int:
    """An integer count (extended resources); rejects fractions such as 1.5 or 500m."""
    amount = parse_quantity(value)
    if amount.denominator != 1:
        raise ValueError(f"{value!r} is not a whole number")
    return int(amount)
