"""Who may write a pod's assignment annotations, as a table: the kit's scheduler only, on create, on
update (set, changed or removed) and on a binding."""

from __future__ import annotations

import pytest

from runtimekit.protocol import KitProtocol
from runtimekit.webhook.authority import written_problems

P = KitProtocol.default()
A, SIG, TIME = P.annotations.assignment, P.annotations.assignment_signature, P.annotations.assume_time
SCHEDULER = "system:serviceaccount:kube-system:lj-runtimekit-scheduler"
SCHEDULERS = frozenset({SCHEDULER})

CASES: list[tuple[str, dict[str, str], dict[str, str] | None, str, list[str]]] = [
    ("a pod without them", {"x": "1"}, None, "alice", []),
    ("a pod created with an assignment", {A: "{}"}, None, "alice", [A]),
    ("with a signature and an assume time too", {A: "{}", SIG: "v1.x.y", TIME: "1"}, None, "alice", [A, SIG, TIME]),
    ("the scheduler may", {A: "{}", SIG: "v1.x.y"}, None, SCHEDULER, []),
    ("an update that leaves them", {A: "{}", "x": "2"}, {A: "{}", "x": "1"}, "alice", []),
    ("an update that changes one", {A: '{"a":1}'}, {A: "{}"}, "alice", [A]),
    ("an update that removes one", {}, {A: "{}"}, "alice", [A]),
    ("an update that adds one", {SIG: "v1"}, {}, "system:node:gpu-node-1", [SIG]),
    ("the scheduler updating them", {A: '{"a":1}'}, {A: "{}"}, SCHEDULER, []),
]


@pytest.mark.parametrize(("name", "annotations", "old", "user", "keys"), CASES, ids=[c[0] for c in CASES])
def test_written_problems(
    name: str, annotations: dict[str, str], old: dict[str, str] | None, user: str, keys: list[str]
) -> None:
    problems = written_problems(annotations, old, user, SCHEDULERS, P)
    assert [p.field for p in problems] == [f"metadata.annotations[{k}]" for k in keys]
    for problem in problems:
        assert problem.message == f"Forbidden: only the kit's scheduler writes it, not {user}"
