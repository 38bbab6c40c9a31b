"""Kubernetes resource quantities (`resource.Quantity`: `500m`, `2`, `1.5Gi`, `1e3`), written once.

- `parse_quantity`: a quantity as an exact fraction (ValueError quoting the text); `cpu_milli`,
  `memory_bytes`, `memory_mib` and `whole_number` read it in the units the kit counts (a pod's and a
  node's memory in bytes, as kube-scheduler's `Value()` reads it, so `1G` and `2G` add up to `3G`;
  GPU memory in MiB, the unit of the assignment protocol); `is_whole` says whether it is
  a whole number, whatever its exponent.
- `quantity_problem`: why a JSON value is not a quantity, in `ParseQuantity`'s words (what
  kube-apiserver answers when it decodes one).
- `number_quantity`: a JSON number as the canonical text kube-apiserver stores for it.

Pure functions; callers: pod requests (`model.request`), node capacity, the scheduler's cache and
policies, the embedded API server's decoding and kubelet.
"""

from __future__ import annotations

import functools
import math
import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from fractions import Fraction

_SUFFIX_GRAMMAR = r"[eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i"
_QUANTITY_RE = re.compile(rf"^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)({_SUFFIX_GRAMMAR})?$")
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

# resource.Quantity's own syntax check and its two messages
QUANTITY_SPLIT = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
QUANTITY_FORMAT_MSG = f"quantities must match the regular expression '{QUANTITY_SPLIT}'"
QUANTITY_SUFFIX_MSG = "unable to parse quantity's suffix"
_SPLIT_RE = re.compile(QUANTITY_SPLIT)
_NUMBER_RE = re.compile(r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$")
_SUFFIX_RE = re.compile(rf"^(?:{_SUFFIX_GRAMMAR})?$")


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
    if not amount:
        return amount  # zero, whatever the exponent
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


def memory_bytes(value: object) -> int:
    """Memory in bytes, rounded up (kube-scheduler's `Quantity.Value()`)."""
    return _memory_bytes_text(value) if isinstance(value, str) else _ceil(parse_quantity(value))


def memory_mib(value: object) -> int:
    """Memory in MiB, rounded up."""
    return _memory_mib_text(value) if isinstance(value, str) else _ceil(parse_quantity(value) / _MIB)


@functools.lru_cache(maxsize=4096)
def _cpu_milli_text(value: str) -> int:
    return _ceil(_parse_text(value) * 1000)


@functools.lru_cache(maxsize=4096)
def _memory_bytes_text(value: str) -> int:
    return _ceil(_parse_text(value))


@functools.lru_cache(maxsize=4096)
def _memory_mib_text(value: str) -> int:
    return _ceil(_parse_text(value) / _MIB)


def _ceil(amount: Fraction) -> int:
    return -((-amount.numerator) // amount.denominator)


def is_whole(value: object) -> bool:
    """Whether a quantity is a whole number, as an extended resource's must be; ValueError for what is
    no quantity. A decimal exponent of any size is decided from the digits, without computing 10**n
    (so `1e-50` is not whole, `1e50` and `100e-2` are), where `parse_quantity` refuses it as out of range."""
    if isinstance(value, str):
        return _is_whole_text(value)
    return parse_quantity(value).denominator == 1


@functools.lru_cache(maxsize=4096)
def _is_whole_text(value: str) -> bool:
    match = _QUANTITY_RE.match(value.strip())
    if not match or match.group(3) is None or match.group(3)[:1] not in ("e", "E"):
        return _parse_text(value).denominator == 1  # a suffix or none: the amount is small to compute
    whole, _, fraction = match.group(2).partition(".")
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return True  # zero
    # the amount is digits × 10^(exponent - len(fraction)); trailing zeros of the digits add to the power
    zeros = len(digits) - len(digits.rstrip("0"))
    return int(match.group(3)[1:]) - len(fraction) + zeros >= 0


def whole_number(value: object) -> int:
    """An integer count (extended resources); rejects fractions such as 1.5 or 500m."""
    amount = parse_quantity(value)
    if amount.denominator != 1:
        raise ValueError(f"{value!r} is not a whole number")
    return int(amount)


@functools.lru_cache(maxsize=4096)
def quantity_text_problem(value: str) -> str:
    """`quantity_problem` of a string, cached: the same few quantity strings recur in every pod."""
    return quantity_problem(value)


def quantity_problem(value: object) -> str:
    """Why `value` (a JSON value) is not a resource.Quantity, in its words; "" when it is one (or null)."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return QUANTITY_FORMAT_MSG
    text = value.strip() if isinstance(value, str) else repr(value)
    match = _SPLIT_RE.match(text)
    if not match or not _NUMBER_RE.match(match.group(1)):
        return QUANTITY_FORMAT_MSG
    if not _SUFFIX_RE.match(match.group(2)):
        return QUANTITY_SUFFIX_MSG
    return ""


_INT_LIMIT = 1 << 63
_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def number_quantity(value: int | float) -> str:
    """A JSON number given for a quantity, in resource.Quantity's canonical decimal form (30 -> "30",
    1000 -> "1k", 0.5 -> "500m", 1.5 -> "1500m"); values finer than 1n round up to it, as Go's do;
    "" for a number no quantity can hold (NaN, infinite, beyond 2^63 E)."""
    if type(value) is int and -_INT_LIMIT < value < _INT_LIMIT:  # the usual case, without Decimal
        return _suffixed(value, 0)
    try:
        amount = Decimal(value) if type(value) is int else Decimal(repr(value))
    except InvalidOperation:
        return ""
    if not amount.is_finite() or abs(amount) >= Decimal(2**63) * Decimal(10) ** 18:
        return ""
    return _suffixed(int(amount.scaleb(9).to_integral_value(rounding=ROUND_CEILING)), -9)


def _suffixed(mantissa: int, exponent: int) -> str:
    """`mantissa` × 10^`exponent` with the largest decimal suffix that keeps the mantissa whole."""
    if mantissa == 0:
        return "0"
    while mantissa % 1000 == 0 and exponent < 18:
        mantissa //= 1000
        exponent += 3
    return f"{mantissa}{_DECIMAL_SUFFIXES[exponent]}"


_BINARY = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))


def quantity_text(amount: Fraction, binary: bool) -> str:
    """`amount` as resource.Quantity writes it: with `binary`, a whole multiple of 1Ki in the largest
    binary suffix that keeps it whole (30Gi); otherwise, or when none does, decimal SI (50, 500m)."""
    if binary and amount.denominator == 1:
        for suffix, power in _BINARY:
            if amount.numerator and amount.numerator % (1 << power) == 0:
                return f"{amount.numerator >> power}{suffix}"
    return number_quantity(amount.numerator if amount.denominator == 1 else float(amount))
