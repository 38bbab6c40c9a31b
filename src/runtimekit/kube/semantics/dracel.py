"""CEL device selectors of Dynamic Resource Allocation, as kube's `dynamic-resource-allocation/cel`
evaluates them: an expression over one variable, `device`, with

- `device.driver` (string), `device.allowMultipleAllocations` (bool),
- `device.attributes["<domain>"].<id>` (int, bool, string or version), an attribute written without
  a domain belonging to the driver's domain,
- `device.capacity["<domain>"].<id>` (a quantity), same rule,

and kube's CEL libraries that selectors use: `quantity("80Gi")` with `.compareTo()`,
`.isGreaterThan()`, `.isLessThan()`, `.asInteger()`, `.asApproximateFloat()`, `.isInteger()`,
`.sign()`, `.add()`, `.sub()`, and `semver("1.2.3")` with `.compareTo()`/`.isGreaterThan()`/`.isLessThan()`.

Quantities are exact numbers here (a whole number as an int, else a float) and versions strings, so
comparing them with `<` also works where kube's type checker would refuse it; a selector naming any
variable but `device` or an unknown function does not compile, as in kube (`compile` says why).
Expressions compile once per text (`compile_selector`, cached). Evaluated with the
`common-expression-language` package (Rust's `cel` crate): ~10 µs per device.
Pure; callers: `runtimekit.kube.semantics.draalloc`, the API server's claim validation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import cel

from runtimekit.kube.objects import Device, DeviceAttribute, JsonObject
from runtimekit.kube.semantics.quantity import parse_quantity

Number = int | float
V = TypeVar("V")


class SelectorError(Exception):
    """A selector that does not compile, or fails while it runs (both end the allocation, as in kube)."""


def _number(amount: Fraction) -> Number:
    return amount.numerator if amount.denominator == 1 else float(amount)


def quantity_value(value: object) -> Number:
    """A quantity as CEL sees it here."""
    return _number(parse_quantity(value))


def _semver(text: str) -> tuple[int, ...]:
    core = str(text).lstrip("v").split("-", 1)[0].split("+", 1)[0]
    try:
        return tuple(int(part) for part in core.split("."))
    except ValueError as exc:
        raise ValueError(f"invalid semver {text!r}") from exc


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, str) and isinstance(b, str):
        x, y = _semver(a), _semver(b)
        return (x > y) - (x < y)
    return int(a > b) - int(a < b)


def _as_integer(a: Number) -> int:
    if isinstance(a, float) and not a.is_integer():
        raise ValueError("cannot convert value to integer")
    return int(a)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": quantity_value,
    "semver": lambda text: (_semver(text), str(text))[1],  # checks the text; versions compare as text
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "asInteger": _as_integer,
    "asApproximateFloat": float,
    "isInteger": lambda a: isinstance(a, int) or float(a).is_integer(),
    "sign": lambda a: (a > 0) - (a < 0),
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
}
_KNOWN_CALLS = frozenset(_FUNCTIONS) | frozenset(
    {"size", "has", "all", "exists", "exists_one", "map", "filter", "matches", "startsWith", "endsWith", "contains"}
    | {"int", "uint", "double", "string", "bool", "lowerAscii", "upperAscii", "split", "join", "trim", "replace"}
)


@dataclass(frozen=True)
class Selector:
    """A compiled selector."""

    expression: str
    program: cel.Program


@functools.lru_cache(maxsize=4096)
def compile_selector(expression: str) -> Selector:
    """The compiled selector; SelectorError with kube's kind of message when it does not compile."""
    import cel  # here, not at the top: the package imports its REPL (prompt_toolkit), half a second of every CLI start

    try:
        program = cel.compile(expression)
    except (ValueError, RuntimeError) as exc:
        raise SelectorError(f"compilation failed: {exc}") from exc
    references = program.references()
    unknown = [v for v in references.get("variables", []) if v != "device" and not _bound_by_macro(expression, v)]
    if unknown:
        raise SelectorError(f"compilation failed: undeclared reference to '{unknown[0]}'")
    calls = [f for f in references.get("functions", []) if f[:1] not in ("_", "@") and f not in _KNOWN_CALLS]
    if calls:
        raise SelectorError(f"compilation failed: found no matching overload for '{calls[0]}'")
    return Selector(expression, program)


def _bound_by_macro(expression: str, name: str) -> bool:
    """Whether `name` is a comprehension's variable (`x` in `list.all(x, ...)`): references() lists those too."""
    return f"({name}," in expression.replace(" ", "")


def _qualified(values: Mapping[str, V], driver: str, read: Callable[[V], object]) -> dict[str, dict[str, object]]:
    by_domain: dict[str, dict[str, object]] = {}
    for name, value in values.items():
        domain, _, ident = name.rpartition("/")
        by_domain.setdefault(domain or driver, {})[ident] = read(value)
    return by_domain


def attribute_value(value: DeviceAttribute) -> object:
    """The one value an attribute holds (None when it holds none)."""
    for found in (value.get("string"), value.get("int"), value.get("bool"), value.get("version")):
        if found is not None:
            return found
    return None


def device_variable(driver: str, device: Device) -> JsonObject:
    """The `device` a selector sees for one device of a slice."""
    return {
        "driver": driver,
        "allowMultipleAllocations": bool(device.get("allowMultipleAllocations", False)),
        "attributes": _qualified(device.get("attributes") or {}, driver, attribute_value),
        "capacity": _qualified(device.get("capacity") or {}, driver, lambda c: quantity_value(c.get("value", 0))),
    }


def device_context(device: JsonObject) -> cel.Context:
    """What a selector runs in for one device (`device_variable`); build it once per device."""
    import cel

    return cel.Context(variables={"device": device}, functions=_FUNCTIONS)


def matches(selector: Selector, device: JsonObject | cel.Context) -> bool:
    """Whether the device (`device_variable`, or its `device_context`) passes; SelectorError when
    the expression fails at run time (a missing attribute, a wrong type) or does not give a bool."""
    context = device_context(device) if isinstance(device, dict) else device
    try:
        result = selector.program.execute(context)
    except (KeyError, ValueError, RuntimeError, TypeError, OverflowError) as exc:
        raise SelectorError(f"CEL runtime error: {exc}") from exc
    if not isinstance(result, bool):
        raise SelectorError(f"CEL result is {type(result).__name__}, not bool")
    return result
