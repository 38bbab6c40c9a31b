"""kube-apiserver's rules for a container's `resources` (ValidateResourceRequirements).

- Names: one without a `/` must be a standard container resource (cpu, memory, ephemeral-storage,
  hugepages-*); one with a `/` outside `kubernetes.io` must be a valid extended resource name.
- Quantities: never negative; extended resources (and hugepages) in whole numbers.
- Extended resources cannot be overcommitted: a request needs a limit, and must equal it; setting
  only the limit is fine (the request defaults to it). cpu and memory requests may not exceed limits.

Each check returns `Cause`s with apimachinery's messages and field paths
(`spec.containers[0].resources.limits[example.com/foo]: Invalid value: "-1": must be greater than or
equal to 0`). The quantities were checked for syntax when the body was decoded. Pure functions.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from fractions import Fraction
from typing import cast

from runtimekit.cluster.apiserver.errors import Cause, field_invalid, field_required
from runtimekit.kube.objects import PodSpec, ResourceList, ResourceRequirements
from runtimekit.kube.semantics.names import check_qualified_name, is_extended_resource_name
from runtimekit.kube.semantics.quantity import is_whole, parse_quantity

_STANDARD = frozenset({"cpu", "memory", "ephemeral-storage"})
_OVERCOMMITTABLE = frozenset({"cpu", "memory", "ephemeral-storage"})


def _amount(value: object) -> Fraction | None:
    """The exact amount of a quantity, None when it is too large to compute cheaply."""
    try:
        return parse_quantity(_shown(value))
    except ValueError:
        return None


def _shown(value: object) -> str:
    return value.strip() if isinstance(value, str) else repr(value)


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def _overcommit_allowed(name: str) -> bool:
    return _is_native(name) and not _is_hugepages(name)


@functools.lru_cache(maxsize=1024)
def _name_problem(name: str) -> str:
    if problem := check_qualified_name(name):
        return problem
    if "/" not in name:
        if name not in _STANDARD and not _is_hugepages(name):
            return "must be a standard resource for containers"
    elif not _is_native(name) and not is_extended_resource_name(name):
        return "doesn't follow extended resource name standard"
    return ""


def _name_causes(name: str, path: str) -> list[Cause]:
    problem = _name_problem(name)
    return [field_invalid(path, name, problem)] if problem else []


def _quantity_causes(name: str, value: object, path: str) -> list[Cause]:
    shown = _shown(value)
    if shown.startswith("-") and _amount(value) != 0:
        return [field_invalid(path, shown, "must be greater than or equal to 0")]
    if (is_extended_resource_name(name) or _is_hugepages(name)) and not _whole(shown):
        return [field_invalid(path, shown, "must be an integer")]
    return []


def _whole(shown: str) -> bool:
    """Whether a quantity is whole, for any exponent (`1e-50` is not, though it is too small to compute)."""
    try:
        return is_whole(shown)
    except ValueError:
        return True  # not a quantity: decoding has refused it already


_VALID_MAX = 4096
# the limits and requests (as item tuples of strings) found valid: containers made from one template
# ask alike, and a valid set of amounts is valid wherever it stands
_valid: set[tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]] = set()


def _plain_items(amounts: ResourceList) -> tuple[tuple[str, str], ...] | None:
    items = tuple(amounts.items())
    plain = all(type(k) is str and type(v) is str for k, v in items)
    return cast("tuple[tuple[str, str], ...]", items) if plain else None


def check_requirements(resources: ResourceRequirements, where: str) -> list[Cause]:
    """The causes for one container's `resources` at `where` (`spec.containers[0].resources`)."""
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    plain_limits, plain_requests = _plain_items(limits), _plain_items(requests)
    key = (plain_limits, plain_requests) if plain_limits is not None and plain_requests is not None else None
    if key is not None and key in _valid:
        return []
    causes = _requirement_causes(limits, requests, where)
    if key is not None and not causes:
        if len(_valid) >= _VALID_MAX:
            _valid.clear()
        _valid.add(key)
    return causes


def _requirement_causes(limits: ResourceList, requests: ResourceList, where: str) -> list[Cause]:
    causes: list[Cause] = []
    for name, value in limits.items():
        path = f"{where}.limits[{name}]"
        causes += _name_causes(name, path) + _quantity_causes(name, value, path)
    for name, value in requests.items():
        path = f"{where}.requests[{name}]"
        causes += _name_causes(name, path) + _quantity_causes(name, value, path)
        if name in limits:
            request, limit = _amount(value), _amount(limits[name])
            same = request == limit if request is not None and limit is not None else _shown(value) == _shown(limit)
            if not same and not _overcommit_allowed(name):
                why = f"must be equal to {name} limit of {_shown(limits[name])}"
                causes.append(field_invalid(f"{where}.requests", _shown(value), why))
            elif request is not None and limit is not None and request > limit:
                why = f"must be less than or equal to {name} limit of {_shown(limits[name])}"
                causes.append(field_invalid(f"{where}.requests", _shown(value), why))
        elif not _overcommit_allowed(name):
            causes.append(field_required(f"{where}.limits", "Limit must be set for non overcommitable resources"))
    return causes


def check_containers(spec: PodSpec) -> list[Cause]:
    """`check_requirements` for every container and init container of a pod spec."""
    causes: list[Cause] = []
    for field, containers in (("initContainers", spec.get("initContainers")), ("containers", spec.get("containers"))):
        if not isinstance(containers, list):
            continue
        for i, container in enumerate(containers):
            resources = container.get("resources") if isinstance(container, Mapping) else None
            if isinstance(resources, Mapping):
                causes += check_requirements(resources, f"spec.{field}[{i}].resources")
    return causes
