"""The three patch formats: RFC 7386 merge patch, strategic merge patch (as kubectl apply sends it),
and RFC 6902 JSON patch, as tables of (original, patch, expected)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtimekit.cluster.apiserver.patch import (
    PatchApplyError,
    PatchFormatError,
    json_patch,
    merge_patch,
    strategic_merge,
)
from runtimekit.cluster.apiserver.patchschema import schema_for

# RFC 7386 appendix A
MERGE_CASES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("original", "patch", "expected"), MERGE_CASES)
def test_merge_patch_rfc7386(original: Any, patch: Any, expected: Any) -> None:
    before = copy.deepcopy(original)
    assert merge_patch(original, patch) == expected
    assert original == before


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=10,
)


@settings(deadline=None)
@given(
    st.dictionaries(st.text(max_size=2), json_values, max_size=4),
    st.dictionaries(st.text(max_size=2), json_values, max_size=4),
)
def test_merge_patch_is_idempotent(original: dict[str, Any], patch: dict[str, Any]) -> None:
    once = merge_patch(original, patch)
    assert merge_patch(once, patch) == once


POD = {
    "metadata": {"name": "p", "labels": {"a": "1"}, "finalizers": ["x"]},
    "spec": {
        "containers": [
            {
                "name": "main",
                "image": "img:1",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "args": ["--one"],
            },
            {"name": "side", "image": "side:1"},
        ],
        "volumes": [{"name": "data", "emptyDir": {}}],
        "tolerations": [{"key": "k", "operator": "Exists"}],
    },
    "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]},
}

STRATEGIC_CASES = [
    (
        "container-by-name",
        {"spec": {"containers": [{"name": "main", "image": "img:2"}]}},
        lambda p: p["spec"]["containers"][0].update(image="img:2"),
    ),
    (
        "new-container-appended",
        {"spec": {"containers": [{"name": "extra", "image": "e:1"}]}},
        lambda p: p["spec"]["containers"].append({"name": "extra", "image": "e:1"}),
    ),
    (
        "env-by-name",
        {"spec": {"containers": [{"name": "main", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]}]}},
        lambda p: p["spec"]["containers"][0].update(
            env=[{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}]
        ),
    ),
    (
        "delete-directive",
        {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}},
        lambda p: p["spec"]["containers"].pop(1),
    ),
    (
        "ports-by-containerPort",
        {"spec": {"containers": [{"name": "main", "ports": [{"containerPort": 80, "name": "http"}]}]}},
        lambda p: p["spec"]["containers"][0]["ports"][0].update(name="http"),
    ),
    (
        "args-replaced",
        {"spec": {"containers": [{"name": "main", "args": ["--two"]}]}},
        lambda p: p["spec"]["containers"][0].update(args=["--two"]),
    ),
    (
        "tolerations-replaced",
        {"spec": {"tolerations": [{"key": "other", "operator": "Exists"}]}},
        lambda p: p["spec"].update(tolerations=[{"key": "other", "operator": "Exists"}]),
    ),
    (
        "conditions-by-type",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        lambda p: p["status"]["conditions"][0].update(status="True"),
    ),
    (
        "finalizers-union",
        {"metadata": {"finalizers": ["y", "x"]}},
        lambda p: p["metadata"].update(finalizers=["x", "y"]),
    ),
    (
        "delete-from-primitive-list",
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}},
        lambda p: p["metadata"].update(finalizers=[]),
    ),
    (
        "null-removes-key",
        {"metadata": {"labels": {"a": None, "b": "2"}}},
        lambda p: p["metadata"].update(labels={"b": "2"}),
    ),
    (
        "map-replace-directive",
        {"metadata": {"labels": {"$patch": "replace", "z": "9"}}},
        lambda p: p["metadata"].update(labels={"z": "9"}),
    ),
    (
        "list-replace-directive",
        {"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "o:1"}]}},
        lambda p: p["spec"].update(containers=[{"name": "only", "image": "o:1"}]),
    ),
    (
        "set-element-order",
        {
            "spec": {
                "$setElementOrder/containers": [{"name": "side"}, {"name": "main"}],
                "containers": [{"name": "main", "image": "img:3"}],
            }
        },
        lambda p: p["spec"].update(
            containers=[p["spec"]["containers"][1], {**p["spec"]["containers"][0], "image": "img:3"}]
        ),
    ),
    (
        "retain-keys-on-volume",
        {"spec": {"volumes": [{"name": "data", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/d"}}]}},
        lambda p: p["spec"].update(volumes=[{"name": "data", "hostPath": {"path": "/d"}}]),
    ),
]


@pytest.mark.parametrize(("patch", "change"), [c[1:] for c in STRATEGIC_CASES], ids=[c[0] for c in STRATEGIC_CASES])
def test_strategic_merge_on_a_pod(patch: dict[str, Any], change: Any) -> None:
    expected = copy.deepcopy(POD)
    change(expected)
    original = copy.deepcopy(POD)
    assert strategic_merge(original, patch, schema_for("Pod")) == expected
    assert original == POD


def test_strategic_merge_node_conditions_and_addresses() -> None:
    node = {
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "1"}],
        }
    }
    patch = {
        "status": {
            "conditions": [{"type": "DiskPressure", "status": "False"}],
            "addresses": [{"type": "Hostname", "address": "h"}],
        }
    }
    merged = strategic_merge(node, patch, schema_for("Node"))
    assert [c["type"] for c in merged["status"]["conditions"]] == ["Ready", "DiskPressure"]
    assert [a["type"] for a in merged["status"]["addresses"]] == ["InternalIP", "Hostname"]


def test_strategic_merge_deployment_template_containers() -> None:
    deployment = {
        "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}}}
    }
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "2"}]}}}}
    merged = strategic_merge(deployment, patch, schema_for("Deployment"))
    assert merged["spec"]["template"]["spec"]["containers"] == [
        {"name": "a", "image": "1"},
        {"name": "b", "image": "2"},
    ]


@pytest.mark.parametrize(
    "patch",
    [
        {"spec": {"containers": [{"image": "no-name"}]}},
        {"spec": {"containers": ["not-an-object"]}},
        {"metadata": {"$patch": "bogus"}},
        {"metadata": {"$retainKeys": "name"}},
    ],
)
def test_strategic_merge_rejects_malformed_patches(patch: dict[str, Any]) -> None:
    with pytest.raises(PatchFormatError):
        strategic_merge(POD, patch, schema_for("Pod"))


# RFC 6902 appendix A
DOC = {"foo": "bar", "baz": [1, 2], "obj": {"k": "v"}}
JSON_PATCH_CASES = [
    ("add-member", [{"op": "add", "path": "/new", "value": 1}], {**DOC, "new": 1}),
    ("add-array-element", [{"op": "add", "path": "/baz/1", "value": 9}], {**DOC, "baz": [1, 9, 2]}),
    ("add-append", [{"op": "add", "path": "/baz/-", "value": 3}], {**DOC, "baz": [1, 2, 3]}),
    ("remove-member", [{"op": "remove", "path": "/foo"}], {"baz": [1, 2], "obj": {"k": "v"}}),
    ("remove-element", [{"op": "remove", "path": "/baz/0"}], {**DOC, "baz": [2]}),
    ("replace", [{"op": "replace", "path": "/foo", "value": "qux"}], {**DOC, "foo": "qux"}),
    (
        "move",
        [{"op": "move", "from": "/foo", "path": "/obj/moved"}],
        {"baz": [1, 2], "obj": {"k": "v", "moved": "bar"}},
    ),
    ("copy", [{"op": "copy", "from": "/obj/k", "path": "/copied"}], {**DOC, "copied": "v"}),
    ("test-passes", [{"op": "test", "path": "/baz", "value": [1, 2]}], DOC),
    ("escaped-pointer", [{"op": "add", "path": "/a~1b~0c", "value": 1}], {**DOC, "a/b~c": 1}),
    ("replace-root", [{"op": "replace", "path": "", "value": {"x": 1}}], {"x": 1}),
]


@pytest.mark.parametrize(("ops", "expected"), [c[1:] for c in JSON_PATCH_CASES], ids=[c[0] for c in JSON_PATCH_CASES])
def test_json_patch_rfc6902(ops: list[dict[str, Any]], expected: Any) -> None:
    original = copy.deepcopy(DOC)
    assert json_patch(original, ops) == expected
    assert original == DOC


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/foo", "value": "nope"}],
        [{"op": "test", "path": "/baz/0", "value": True}],
        [{"op": "remove", "path": "/missing"}],
        [{"op": "replace", "path": "/missing", "value": 1}],
        [{"op": "add", "path": "/baz/5", "value": 1}],
        [{"op": "add", "path": "/missing/child", "value": 1}],
        [{"op": "remove", "path": "/baz/01"}],
    ],
)
def test_json_patch_that_does_not_apply(ops: list[dict[str, Any]]) -> None:
    with pytest.raises(PatchApplyError):
        json_patch(DOC, ops)


@pytest.mark.parametrize(
    "ops",
    [
        {"op": "add"},
        [{"op": "frobnicate", "path": "/a"}],
        [{"op": "add", "path": "/a"}],
        [{"op": "move", "path": "/a"}],
        ["x"],
    ],
)
def test_json_patch_malformed(ops: Any) -> None:
    with pytest.raises(PatchFormatError):
        json_patch(DOC, ops)
