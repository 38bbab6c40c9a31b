"""`IntOrString` values such as a Deployment's `maxSurge: 25%` or a PodDisruptionBudget's
`minAvailable: 1`, read once.

- `int_or_percent`: the value as the API holds a valid one, an int or an `N%` string; anything else
  is a ValueError whose message is kube's.
- `scaled_value` is apimachinery's `GetScaledValueFromIntOrPercent`: an int is taken as is, a string
  must be a number followed by `%` and is that share of `total`, rounded up or down.
- `is_zero`: 0 or "0%", the fenceposts validation refuses together.

Pure functions; callers: the API server's workload validation, the Deployment controller, the
scheduler's PodDisruptionBudgets (cache and `pdb` plugin).
"""

from __future__ import annotations

import math
import re

from runtimekit.kube.objects import IntOrString

_PERCENT = re.compile(r"(\d+)%")


def int_or_percent(value: object) -> IntOrString:
    """`value` when it is an int or an `N%` string; ValueError for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"invalid value for IntOrString: invalid type: {value!r}")
    if isinstance(value, str) and _PERCENT.fullmatch(value) is None:
        why = "must be an integer or a percentage"
        raise ValueError(f'invalid value for IntOrString: invalid value "{value}": {why}')
    return value


def scaled_value(value: object, total: int, round_up: bool) -> int:
    """The value as a count of `total`; ValueError for anything but an int or an `N%` string."""
    checked = int_or_percent(value)
    if isinstance(checked, int):
        return checked
    share = int(checked[:-1]) * total / 100
    return math.ceil(share) if round_up else math.floor(share)


def is_zero(value: object) -> bool:
    """True for 0 and "0%" (validation refuses both fenceposts at zero)."""
    return value in (0, "0%") and not isinstance(value, bool)
