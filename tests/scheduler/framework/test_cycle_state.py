"""Per-cycle state (kube-scheduler's CycleState) and what a framework reads once of its plugins and
actions: typed keys, a fresh state per session emptied when it closes, and state shared by the
plugins built with one context."""

from __future__ import annotations

import pytest

from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.interfaces import Plugin
from runtimekit.scheduler.framework.state import CycleState, SharedState, StateKey, StateNotFound
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.plugins.kubestate import KubeShared
from runtimekit.scheduler.plugins.nodeorder import NodeOrderPlugin
from runtimekit.scheduler.plugins.predicates import Predicates
from scheduler.helpers import static_cache

COUNT: StateKey[int] = StateKey("test/count")
NAMES: StateKey[list[str]] = StateKey("test/names")


@pytest.mark.parametrize("store", [CycleState, SharedState], ids=["cycle", "shared"])
def test_values_are_read_back_under_their_own_key(store: type[CycleState] | type[SharedState]) -> None:
    state = store()
    state.write(COUNT, 3)
    state.write(NAMES, ["a"])
    assert state.read(COUNT) == 3
    assert state.read(NAMES) == ["a"]
    assert state.get(StateKey[int]("test/count")) is None  # a key is equal only to itself, not to its name
    state.delete(COUNT)
    assert COUNT not in state
    assert state.get(COUNT) is None
    with pytest.raises(StateNotFound, match="test/count"):
        state.read(COUNT)
    state.delete(COUNT)  # nothing there: nothing happens


class Counting(Plugin):
    """Counts in its session's state; remembers the states it saw."""

    name = "counting"

    def __init__(self) -> None:
        self.seen: list[CycleState] = []

    def on_session_open(self, ssn: SessionView) -> None:
        assert COUNT not in ssn.state  # every session starts afresh
        ssn.state.write(COUNT, 1)
        self.seen.append(ssn.state)

    def on_session_close(self, ssn: SessionView) -> None:
        assert ssn.state.read(COUNT) == 1  # still there while the plugins close


def test_each_session_has_its_own_state_emptied_when_it_closes() -> None:
    registry = builtin_registry()
    plugin = Counting()
    registry.register_plugin("counting", lambda arguments, context: plugin)
    framework = Framework(parse_conf('actions: "allocate"\ntiers:\n- plugins: [{name: counting}]\n'), registry)
    cache = static_cache("n1")
    first, second = framework.run_once(cache), framework.run_once(cache)
    assert plugin.seen == [first.state, second.state]
    assert first.state is not second.state
    assert COUNT not in first.state
    assert COUNT not in second.state


KUBE = 'actions: "allocate"\ntiers:\n- plugins: [{name: predicates}, {name: nodeorder}]\n'


def kube_state(framework: Framework) -> KubeShared:
    """The state its predicates and nodeorder plugins share (one object for both)."""
    predicates, nodeorder = framework.plugin("predicates"), framework.plugin("nodeorder")
    assert isinstance(predicates, Predicates)
    assert isinstance(nodeorder, NodeOrderPlugin)
    assert predicates.kube is nodeorder.kube
    return predicates.kube


def test_the_inter_pod_plugins_of_one_context_share_their_state_and_no_one_elses() -> None:
    context = BuildContext()
    one = kube_state(Framework(parse_conf(KUBE), builtin_registry(), context))
    again = kube_state(Framework(parse_conf(KUBE), builtin_registry(), context))  # a conf reload keeps the context
    other = kube_state(Framework(parse_conf(KUBE), builtin_registry(), BuildContext()))
    assert one is again
    assert one is not other


@pytest.mark.parametrize(
    ("conf", "needs_running", "watched"),
    [
        pytest.param('actions: "allocate"\ntiers:\n- plugins: [{name: gang}]\n', False, frozenset(), id="neither"),
        pytest.param(
            'actions: "allocate, preempt"\ntiers:\n- plugins: [{name: pdb}, {name: resourcequota}]\n',
            True,
            frozenset({"poddisruptionbudgets", "resourcequotas"}),
            id="preempt, pdb and resourcequota",
        ),
        pytest.param(
            'actions: "reclaim"\ntiers:\n- plugins: [{name: pdb}]\n', True, {"poddisruptionbudgets"}, id="reclaim"
        ),
    ],
)
def test_a_framework_says_once_what_its_actions_and_plugins_read_of_the_cluster(
    conf: str, needs_running: bool, watched: frozenset[str]
) -> None:
    framework = Framework(parse_conf(conf), builtin_registry())
    assert framework.needs_running is needs_running
    assert framework.watched == watched
