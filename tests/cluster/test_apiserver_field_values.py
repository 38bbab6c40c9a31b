"""`selectors.field_values`, the store's reading of a kind's selectable fields on every write, against
`field_value`, the general reading a field selector is defined by: the same strings (absent fields,
`ABSENT_AS` defaults, booleans, numbers, a path through a non-object) in the same order, for every
kind the server serves with field selectors."""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.cluster.apiserver.resources import ResourceTable
from runtimekit.cluster.apiserver.selectors import field_value, field_values
from runtimekit.cluster.apiserver.store import Store

_KINDS = [info for info in ResourceTable.builtin().all() if info.fields]


def _objects(paths: list[str]) -> list[dict[str, Any]]:
    """Objects that set every path to each interesting value, and objects where a path's parent is
    absent, null, or not an object."""
    values: list[Any] = ["text", "", True, False, 0, 3, 2.5, None, ["a"], {"k": "v"}]
    found: list[dict[str, Any]] = [{}, {"spec": None, "status": "odd"}, {"spec": [], "status": 7}]
    for value in values:
        obj: dict[str, Any] = {}
        for path in paths:
            node = obj
            *parents, last = path.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = value
        found.append(obj)
    for path in paths:
        head, _, rest = path.partition(".")
        if rest:
            found += [{head: None}, {head: "scalar"}, {head: {rest.split(".")[0]: None}}]
    return found


@pytest.mark.parametrize("info", _KINDS, ids=lambda info: f"{info.group or 'core'}/{info.version}/{info.plural}")
def test_the_stored_fields_are_what_field_value_reads(info: Any) -> None:
    paths = [path for _, path in info.fields]
    for obj in _objects(paths):
        general = {path: field_value(obj, path) for path in paths}
        fast = field_values(obj, info.fields)
        assert fast == general
        assert list(fast) == list(general)


def test_a_pod_written_to_the_store_keeps_its_fields() -> None:
    info = ResourceTable.builtin().lookup("", "v1", "pods")
    assert info is not None
    store = Store(facts=lambda info, obj: ((), None))
    pod = {"metadata": {"name": "p", "namespace": "d"}, "spec": {"nodeName": "n1", "hostNetwork": True}}
    stored = store.put(info, pod, None)
    assert stored.fields["spec.nodeName"] == "n1"
    assert stored.fields["spec.hostNetwork"] == "true"
    assert stored.fields["status.phase"] == ""
    assert stored.fields == {path: field_value(pod, path) for _, path in info.fields}
