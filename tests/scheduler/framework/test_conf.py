from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.framework import BuildContext, ConfError, Framework, Registry, RegistryError, parse_conf
from runtimekit.scheduler.framework.arguments import ArgumentError, parse_arguments
from runtimekit.scheduler.framework.interfaces import Plugin


def test_volcano_flags_default_to_true_and_are_read() -> None:
    conf = parse_conf(
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gpushare\n    enableNodeOrder: false\n'
        "    arguments: {gpushare.policy: bestfit}\n"
    )
    option = conf.tiers[0].plugins[0]
    assert option.enabled("enablePredicate")
    assert not option.enabled("enableNodeOrder")
    framework = Framework(conf, builtin_registry())
    assert framework.plugins.node_order.tiers == ((),)
    assert [p.name for p in framework.plugins.predicate.tiers[0]] == ["gpushare"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("actions: allocate\ntiers: []\nextra: 1\n", "unknown key 'extra'", id="top-key"),
        pytest.param("tiers: []\n", "'actions' must be", id="no-actions"),
        pytest.param(
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: gpushare\n    enabledJobOrder: true\n',
            "unknown key 'enabledJobOrder'",
            id="misspelt-flag",
        ),
        pytest.param(
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: gpushare\n    enableJobOrder: yes please\n',
            "must be true or false",
            id="flag-not-bool",
        ),
        pytest.param('actions: "allocate"\ntiers:\n- plugins:\n  - arguments: {}\n', "needs a 'name'", id="no-name"),
        pytest.param("actions: [unclosed\n", "not valid YAML", id="yaml"),
    ],
)
def test_malformed_confs_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(ConfError, match=message):
        parse_conf(text, "s.conf")


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        pytest.param('actions: "allocate, shufle"\ntiers: []\n', RegistryError, "unknown action 'shufle'", id="action"),
        pytest.param(
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: nosuch\n',
            RegistryError,
            "unknown plugin 'nosuch'",
            id="plugin",
        ),
        pytest.param(
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: gpushare\n    arguments: {gpushare.policy: x}\n',
            ArgumentError,
            "unknown policy 'x'",
            id="policy",
        ),
        pytest.param(
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: gpushare\n    arguments: {gpushare.weight: -1}\n',
            ArgumentError,
            "weight must not be negative",
            id="weight",
        ),
        pytest.param(
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: gpushare\n    arguments: {gpushare.wieght: 1}\n',
            ArgumentError,
            "unknown argument 'gpushare.wieght'",
            id="argument-name",
        ),
        pytest.param(
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: gpushare\n    arguments: {gpushare.weight: heavy}\n',
            ArgumentError,
            "must be float",
            id="argument-type",
        ),
    ],
)
def test_building_fails_fast_naming_what_is_wrong(text: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        Framework(parse_conf(text), builtin_registry())


@dataclass(frozen=True)
class Args:
    weight: int = 1
    resources: tuple[str, ...] = ()
    strict: bool = False


def test_arguments_map_volcano_keys_to_typed_fields() -> None:
    args = parse_arguments(Args, "binpack", {"binpack.weight": "3", "resources": "a, b", "binpack.strict": "true"})
    assert args == Args(3, ("a", "b"), True)


def test_registry_rejects_duplicates_and_loads_a_plugins_directory(tmp_path: Path) -> None:
    registry = Registry()

    def build(arguments: Mapping[str, Any], context: BuildContext) -> Plugin:
        return Plugin()

    registry.register_plugin("x", build)
    with pytest.raises(RegistryError, match="already registered"):
        registry.register_plugin("x", build)
    (tmp_path / "hello.py").write_text(
        "from runtimekit.scheduler.framework.interfaces import Plugin\n"
        "class Hello(Plugin):\n    name = 'hello'\n"
        "def New(arguments, context):\n    return Hello()\n"
    )
    (tmp_path / "_private.py").write_text("raise SystemExit('never imported')\n")
    assert registry.add_directory(tmp_path) == ["hello"]
    assert registry.build_plugin("hello", {}, BuildContext()).name == "hello"
    (tmp_path / "broken.py").write_text("import nosuchmodule\n")
    broken = Registry()
    broken.add_directory(tmp_path)  # nothing is imported until a name is asked for
    with pytest.raises(RegistryError, match=r"broken\.py: import failed"):
        broken.build_plugin("broken", {}, BuildContext())
