"""The conf check reports every problem of a conf with where it is, while parse_conf and Framework
keep failing fast at the first; it warns for each kind of GPU request no enabled plugin allocates."""

from __future__ import annotations

import pytest

from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.framework import BuildContext, ConfError, Framework, RegistryError, parse_conf
from runtimekit.scheduler.framework.check import check_conf
from runtimekit.scheduler.framework.conf import read_conf
from runtimekit.scheduler.framework.problems import Problems

MANY = """\
actions: "allocate, nope"
tiers:
- plugins:
  - name: gang
    enableJobReady: maybe
  - {}
- plugins:
  - name: unheard
configurations:
- name: allocate
  arguments: []
metrics: 3
"""


def test_every_problem_is_collected_in_order() -> None:
    problems = Problems()
    conf = read_conf(MANY, "m.conf", problems)
    assert conf is not None
    assert conf.plugin_names() == ["gang", "unheard"]
    assert [p.message for p in problems.errors] == [
        "m.conf: tiers[0].plugins[0] (gang): enableJobReady must be true or false",
        "m.conf: tiers[0].plugins[1] needs a 'name'",
        "m.conf: configurations[0].arguments must be a mapping",
        "m.conf: 'metrics' must be a mapping",
    ]
    checked = check_conf(MANY, "m.conf", builtin_registry(), BuildContext())
    assert checked.framework is None
    messages = [p.message for p in checked.problems.errors]
    assert messages[4:] == [
        "m.conf: actions: nope: unknown action 'nope'; known actions: allocate, backfill, enqueue, preempt, reclaim",
        messages[5],
    ]
    assert messages[5].startswith("m.conf: tiers[1].plugins[0] (unheard): unknown plugin 'unheard'")


def test_the_fail_fast_api_still_raises_the_first_problem() -> None:
    with pytest.raises(ConfError, match="enableJobReady must be true or false"):
        parse_conf(MANY, "m.conf")
    conf = parse_conf('actions: "allocate, nope"\ntiers:\n- plugins:\n  - name: unheard\n')
    with pytest.raises(RegistryError, match="unknown action 'nope'"):
        Framework(conf, builtin_registry())


@pytest.mark.parametrize(
    ("plugins", "missing"),
    [
        pytest.param("[gpushare, mig]", [], id="both"),
        pytest.param("[gpushare]", ["MIG slices"], id="no-mig"),
        pytest.param("[mig]", ["whole GPUs", "GPU shares"], id="no-gpushare"),
        pytest.param("[predicates]", ["whole GPUs", "GPU shares", "MIG slices"], id="none"),
    ],
)
def test_kinds_of_gpu_request_without_an_allocator_are_warned(plugins: str, missing: list[str]) -> None:
    names = plugins.strip("[]").split(", ")
    text = 'actions: "allocate"\ntiers:\n- plugins:\n' + "".join(f"  - name: {n}\n" for n in names)
    checked = check_conf(text, "g.conf", builtin_registry(), BuildContext())
    assert checked.ok
    warned = [p.message for p in checked.problems.warnings]
    assert len(warned) == len(missing)
    for message, what in zip(warned, missing, strict=True):
        assert f"no plugin allocates {what}" in message
        assert "will stay Pending" in message


def test_a_device_plugin_with_its_device_point_off_allocates_nothing() -> None:
    text = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gpushare\n    enableDevice: false\n  - name: mig\n'
    checked = check_conf(text, "g.conf", builtin_registry(), BuildContext())
    assert len(checked.problems.warnings) == 2
