"""`same_spec_but_node`: whether two manifests of a pod have the same spec but for `nodeName`, a
field left out in one and null in the other counting as the same, as key by key comparison reads
it (its fast comparison in C must answer exactly as that does)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from runtimekit.scheduler.kubesem.pods import same_spec_but_node

KEYS = ("nodeName", "priority", "hostname", "containers", "tolerations")
VALUES = st.one_of(st.none(), st.integers(0, 2), st.just("n1"), st.lists(st.integers(0, 1), max_size=2))
SPECS = st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=len(KEYS))


def by_key(old: dict[str, Any], new: dict[str, Any]) -> bool:
    return all(old.get(k) == new.get(k) for k in old.keys() | new.keys() if k != "nodeName")


@given(SPECS, SPECS)
def test_it_answers_as_the_key_by_key_comparison(old: dict[str, Any], new: dict[str, Any]) -> None:
    assert same_spec_but_node({"spec": old}, {"spec": new}) is by_key(old, new)


def test_cases() -> None:
    base = {"containers": [{"name": "c"}], "priority": 0}
    assert same_spec_but_node({"spec": base}, {"spec": {**base, "nodeName": "n1"}})
    assert same_spec_but_node({"spec": base}, {"spec": {**base, "hostname": None}})  # left out == null
    assert not same_spec_but_node({"spec": base}, {"spec": {**base, "priority": 1, "nodeName": "n1"}})
    assert not same_spec_but_node({"spec": base}, {"spec": {**base, "nodeName": None, "hostname": "h"}})
    assert not same_spec_but_node({"spec": base}, {"spec": []})  # not a spec
    assert same_spec_but_node({}, {"spec": {"nodeName": "n1"}})
