"""`IntOrString` values such as a Deployment's `maxSurge: 25%` or `maxUnavailable: 1`.

`scaled_value` is apimachinery's `GetScaledValueFromIntOrPercent`: an int is taken as is, a string
must be a number followed by `%` and is that share of `total`, rounded up or down. Anything else is
a ValueError whose message is kube's. Pure functions; used by the API server's validation and the
Deployment controller.
"""

from __future__ import annotations

import math
import re

_PERCENT = re.compile(r"(\d+)%")


def scaled_value(value: object, total: int, round_up: bool) -> int:
    """The value as a count of `total`; ValueError for anything but an int or an `N%` string."""
    if isinstance(value, bool):
        raise ValueError(f"invalid value for IntOrString: invalid type: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        match = _PERCENT.fullmatch(value)
        if match is None:
            why = "must be an integer or a percentage"
            raise ValueError(f'invalid value for IntOrString: invalid value "{value}": {why}')
        share = int(match.group(1)) * total / 100
        return math.ceil(share) if round_up else math.floor(share)
    raise ValueError(f"invalid value for IntOrString: invalid type: {value!r}")


def is_zero(value: object) -> bool:
    """True for 0 and "0%" (validation refuses both fenceposts at zero)."""
    return value in (0, "0%") and not isinstance(value, bool)
