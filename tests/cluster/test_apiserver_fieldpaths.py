"""Field sets as structured-merge-diff computes them (`fieldpaths.py`): ToFieldSet of applied
configurations, Compare of updates, the fieldsV1 encoding and the path text of conflicts, with the
Server-Side Apply documentation's and kube-apiserver's apply tests' objects as cases."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fixtures.apiserver import make_pod
from runtimekit.cluster.apiserver.fieldpaths import Place, added_tree, compare, decode, encode, field_set, render
from runtimekit.cluster.apiserver.openapi import available_versions, shapes_for
from runtimekit.cluster.apiserver.patchschema import schema_for


def place(api_version: str, kind: str) -> Place:
    return Place(shapes_for(available_versions()[-1]).root(api_version, kind), schema_for(kind))


DEPLOYMENT_CONFIG = {
    "metadata": {"labels": {"app": "nginx"}},
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "nginx"}},
        "template": {
            "metadata": {"labels": {"app": "nginx"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1", "ports": [{"containerPort": 80}]}]},
        },
    },
}


def test_field_set_of_an_applied_deployment() -> None:
    """Leaves, list elements by key (ports by containerPort and the defaulted protocol), map entries;
    an atomic LabelSelector as one field; declared struct fields only through their members."""
    assert encode(field_set(DEPLOYMENT_CONFIG, place("apps/v1", "Deployment"))) == {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {
            "f:replicas": {},
            "f:selector": {},
            "f:template": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"nginx"}': {
                            ".": {},
                            "f:image": {},
                            "f:name": {},
                            "f:ports": {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}},
                        }
                    }
                },
            },
        },
    }


def test_compare_names_added_modified_and_removed_paths() -> None:
    where = place("v1", "ConfigMap")
    old = {"data": {"key": "value", "gone": "x"}}
    new = {"data": {"key": "new value", "new-key": "value"}, "metadata": {"labels": {"a": "b"}}}
    found = compare(old, new, where)
    assert found.modified == {("f:data", "f:key")}
    assert found.added == {("f:data", "f:new-key"), ("f:metadata", "f:labels"), ("f:metadata", "f:labels", "f:a")}
    assert found.removed == {("f:data", "f:gone")}
    assert compare(new, copy.deepcopy(new), where).empty()
    pod = place("v1", "Pod")
    owned = {"metadata": {"ownerReferences": [{"uid": "u1", "name": "rs", "kind": "ReplicaSet"}]}}
    orphaned = compare(owned, {"metadata": {"ownerReferences": []}}, pod).removed
    assert orphaned == {
        ("f:metadata", "f:ownerReferences", 'k:{"uid":"u1"}'),
        *(("f:metadata", "f:ownerReferences", 'k:{"uid":"u1"}', "f:" + k) for k in ("uid", "name", "kind")),
    }


@pytest.mark.parametrize(
    ("obj", "api_version", "kind"),
    [
        (make_pod("p", labels={"a": "1"}, limits={"nvidia.com/gpu": "1"}), "v1", "Pod"),
        (DEPLOYMENT_CONFIG, "apps/v1", "Deployment"),
        ({"data": {"a": "1"}, "metadata": {"annotations": {"x": "y"}}}, "v1", "ConfigMap"),
        ({"spec": {"items": [{"name": "a", "n": 1}], "m": {"k": {"deep": True}}}}, "example.com/v1", "Widget"),
    ],
)
def test_a_creators_tree_is_what_compare_adds(obj: dict[str, Any], api_version: str, kind: str) -> None:
    where = place(api_version, kind)
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    assert added_tree(body, where) == encode(compare({}, body, where).added)


def test_fields_v1_round_trip_and_conflict_paths() -> None:
    paths = field_set(DEPLOYMENT_CONFIG, place("apps/v1", "Deployment"))
    assert decode(encode(paths)) == paths
    with pytest.raises(ValueError, match="invalid fieldsV1 element"):
        decode({"x:bad": {}})
    assert render(("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"nginx"}', "f:image")) == (
        '.spec.template.spec.containers[name="nginx"].image'
    )
    ports = ("f:ports", 'k:{"containerPort":80,"protocol":"TCP"}')
    assert render(ports) == '.ports[containerPort=80,protocol="TCP"]'
    assert render(("f:metadata", "f:finalizers", 'v:"a"')) == '.metadata.finalizers[="a"]'
