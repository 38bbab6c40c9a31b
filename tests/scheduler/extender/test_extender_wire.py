"""kube-scheduler's extender messages, byte for byte: request bodies as kube-scheduler's HTTPExtender
marshals `k8s.io/kube-scheduler/extender/v1` (no JSON tags: Go's field names, `null` for what it does
not send; the machines of upstream's test/integration/scheduler/extender and the victims of
pkg/scheduler/extender_test.go's TestConvertToMetaVictims as data), the API's keys in any case as Go's
decoder reads them, malformed bodies refused with a message, and answers with Go's field names."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from runtimekit.scheduler.extender.wire import (
    ExtenderArgs,
    FilterAnswer,
    MetaVictims,
    NodeEntry,
    WireError,
    decode_args,
    decode_binding,
    decode_preemption,
    encode_binding,
    encode_filter,
    encode_filter_error,
    encode_preemption,
    encode_priorities,
)

MACHINES = [f"machine{i}" for i in range(1, 6)]
POD = {
    "metadata": {"name": "extender-test-pod", "namespace": "ns", "uid": "uid-0", "creationTimestamp": None},
    "spec": {"containers": [{"name": "container", "image": "pause", "resources": {"limits": {"foo.com/bar": "1"}}}]},
    "status": {},
}


def node(name: str) -> dict[str, Any]:
    """A node as upstream's integration test creates it, as the API server returns it."""
    return {
        "metadata": {"name": name, "uid": f"node-{name}", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {},
        "status": {
            "capacity": {"pods": "32"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "schedulable condition"}],
        },
    }


def go(obj: Any) -> bytes:
    """JSON as Go's encoding/json writes it (compact, in field order)."""
    return json.dumps(obj, separators=(",", ":")).encode()


NAMES_BODY = go({"Pod": POD, "Nodes": None, "NodeNames": MACHINES})
OBJECTS_BODY = go({"Pod": POD, "Nodes": {"metadata": {}, "items": [node(m) for m in MACHINES]}, "NodeNames": None})


def test_a_node_cache_capable_filter_body() -> None:
    args = decode_args(NAMES_BODY)
    assert args.pod == POD
    assert args.node_names == tuple(MACHINES)
    assert args.nodes is None
    assert args.names == tuple(MACHINES)


def test_a_filter_body_with_whole_nodes_keeps_each_node_as_sent() -> None:
    args = decode_args(OBJECTS_BODY)
    assert args.node_names is None
    assert args.names == tuple(MACHINES)
    assert args.nodes is not None
    assert [json.loads(bytes(n.raw)) for n in args.nodes] == [node(m) for m in MACHINES]


@pytest.mark.parametrize("pod_key", ["Pod", "pod", "POD", "pOd"])
@pytest.mark.parametrize("names_key", ["NodeNames", "nodeNames", "nodenames", "NODENAMES", "NodeName\u017f"])
def test_the_apis_keys_are_read_in_any_case_as_gos_decoder_reads_them(pod_key: str, names_key: str) -> None:
    body = go({pod_key: POD, names_key: ["a", "b"]})  # \u017f (long s) folds to s, as in Go
    args = decode_args(body)
    assert (args.pod, args.node_names) == (POD, ("a", "b"))


@pytest.mark.parametrize(
    "keys",
    [
        pytest.param(("PodName", "PodNamespace", "PodUID", "Node"), id="go-names"),
        pytest.param(("podName", "podNamespace", "podUID", "node"), id="camel"),
        pytest.param(("podname", "podnamespace", "poduid", "node"), id="lower"),
        pytest.param(("PODNAME", "PODNAMESPACE", "PODUID", "NODE"), id="upper"),
        pytest.param(("PodName", "PodName\u017fpace", "PodUid", "nODE"), id="long-s"),  # \u017f folds to s, as in Go
    ],
)
def test_binding_args_in_any_case(keys: tuple[str, str, str, str]) -> None:
    values = ("extender-test-pod", "ns", "uid-0", "machine2")
    args = decode_binding(go(dict(zip(keys, values, strict=True))))
    assert (args.pod_name, args.pod_namespace, args.pod_uid, args.node) == values


def test_a_later_key_wins_and_unknown_keys_are_ignored_as_in_go() -> None:
    args = decode_binding(b'{"PodName":"a","podname":"b","PodNamespace":"ns","Node":"n","Extra":{"x":1}}')
    assert (args.pod_name, args.pod_uid) == ("b", "")


def test_preemption_victims_by_uid_in_both_forms() -> None:
    meta = {
        "node1": {"Pods": [{"UID": "uid1"}, {"UID": "uid3"}], "NumPDBViolations": 1},
        "node2": {"Pods": [{"UID": "uid2"}, {"UID": "uid4"}], "NumPDBViolations": 2},
    }
    expected = {"node1": MetaVictims(("uid1", "uid3"), 1), "node2": MetaVictims(("uid2", "uid4"), 2)}
    by_meta = decode_preemption(go({"Pod": POD, "NodeNameToVictims": None, "NodeNameToMetaVictims": meta}))
    assert by_meta.victims == expected
    pods = {
        node: {"Pods": [{"metadata": {"name": u, "uid": u}} for u in v.uids], "NumPDBViolations": v.num_pdb_violations}
        for node, v in expected.items()
    }
    whole = decode_preemption(go({"Pod": POD, "NodeNameToVictims": pods, "NodeNameToMetaVictims": None}))
    assert whole.victims == expected
    folded = decode_preemption(go({"pod": POD, "nodenametometavictims": {"node1": {"pods": [{"uid": "u"}]}}}))
    assert folded.victims == {"node1": MetaVictims(("u",), 0)}


@pytest.mark.parametrize(
    ("decode", "body", "message"),
    [
        pytest.param(decode_args, b"", "ExtenderArgs: Input data was truncated", id="empty"),
        pytest.param(decode_args, b"{", "ExtenderArgs: Input data was truncated", id="truncated"),
        pytest.param(decode_args, b"not json", "ExtenderArgs: JSON is malformed", id="not-json"),
        pytest.param(decode_args, b"null", "the pod is missing", id="null"),
        pytest.param(decode_args, b"[]", "Expected `object | null`, got `array`", id="array"),
        pytest.param(decode_args, b'{"Pod":"p","NodeNames":[]}', "the pod is missing", id="pod-not-object"),
        pytest.param(decode_args, b'{"Pod":{},"NodeNames":"a"}', "ExtenderArgs.NodeNames: Expected", id="names-str"),
        pytest.param(decode_args, b'{"Pod":{},"NodeNames":[1]}', "Expected `str`, got `int`", id="name-int"),
        pytest.param(decode_args, b'{"Pod":{}}', "neither NodeNames nor Nodes", id="no-nodes"),
        pytest.param(
            decode_args, b'{"Pod":{},"Nodes":{"items":[{"metadata":{}}]}}', "without metadata.name", id="nameless"
        ),
        pytest.param(decode_binding, b'{"PodNamespace":"ns","Node":"n"}', "PodName and Node are required", id="no-pod"),
        pytest.param(
            decode_binding, b'{"PodName":"p","Node":"n","PodUID":7}', "PodUID: expected a string", id="uid-int"
        ),
        pytest.param(decode_preemption, b'{"NodeNameToMetaVictims":{}}', "the pod is missing", id="preempt-no-pod"),
        pytest.param(
            decode_preemption,
            b'{"Pod":{},"NodeNameToMetaVictims":{"n":{"NumPDBViolations":"1"}}}',
            "NumPDBViolations: expected an integer",
            id="pdb-str",
        ),
    ],
)
def test_malformed_bodies_are_refused_with_a_message(decode: Any, body: bytes, message: str) -> None:
    with pytest.raises(WireError, match=message.replace("[", r"\[").replace("|", r"\|")):
        decode(body)


# -- answers -----------------------------------------------------------------------------------------
def test_a_filter_answer_has_gos_field_names_in_the_form_of_the_request() -> None:
    answer = FilterAnswer(("machine2", "machine3"), {"machine1": "gpushare: insufficient gpu-core"}, {"machine4": "x"})
    assert encode_filter(decode_args(NAMES_BODY), answer) == (
        b'{"Nodes":null,"NodeNames":["machine2","machine3"],'
        b'"FailedNodes":{"machine1":"gpushare: insufficient gpu-core"},'
        b'"FailedAndUnresolvableNodes":{"machine4":"x"},"Error":""}'
    )
    whole = json.loads(encode_filter(decode_args(OBJECTS_BODY), answer))
    assert whole["NodeNames"] is None
    assert whole["Nodes"] == {"metadata": {}, "items": [node("machine2"), node("machine3")]}


def test_whole_nodes_are_answered_byte_for_byte() -> None:
    raw = b'{"metadata":{"name":"a"},"status":{"x":  1}}'  # spacing kept: the object is not re-encoded
    args = ExtenderArgs(POD, None, (NodeEntry("a", msgspec.Raw(raw)),))
    assert raw in encode_filter(args, FilterAnswer(("a",)))


def test_the_other_answers_have_gos_field_names() -> None:
    assert encode_filter_error("no") == (
        b'{"Nodes":null,"NodeNames":null,"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":"no"}'
    )
    assert encode_priorities(["machine1", "machine2"], [1, 10]) == (
        b'[{"Host":"machine1","Score":1},{"Host":"machine2","Score":10}]'
    )
    assert encode_priorities([], []) == b"[]"
    assert encode_binding(None) == b'{"Error":""}'
    assert encode_binding("refused") == b'{"Error":"refused"}'
    assert encode_preemption({"node1": MetaVictims(("uid1", "uid3"), 1)}) == (
        b'{"NodeNameToMetaVictims":{"node1":{"Pods":[{"UID":"uid1"},{"UID":"uid3"}],"NumPDBViolations":1}}}'
    )
