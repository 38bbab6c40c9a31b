"""Names in a conf: built when known here, skipped with a warning when Volcano ships them, refused
when neither knows them (Volcano's factory.go lists are the oracle)."""

from __future__ import annotations

import pytest

from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.framework import BuildContext, Framework, RegistryError, parse_conf
from runtimekit.scheduler.framework.known_names import (
    VOLCANO_ACTIONS,
    VOLCANO_PLUGINS,
    check_action,
    check_plugin,
    implied_plugins,
    unsupported_arguments,
)


@pytest.mark.parametrize(
    ("name", "build", "warned", "refused"),
    [
        pytest.param("gang", True, False, False, id="known here"),
        pytest.param("numa-aware", False, True, False, id="Volcano's, not built here"),
        pytest.param("gnag", False, False, True, id="a typo"),
    ],
)
def test_a_plugin_name_is_built_skipped_or_refused(name: str, build: bool, warned: bool, refused: bool) -> None:
    check = check_plugin(name, {"gang", "priority"})
    assert (check.build, bool(check.warning), bool(check.error)) == (build, warned, refused)
    assert name in (check.warning or check.error or name)


def test_an_action_volcano_ships_is_skipped_and_a_typo_refused() -> None:
    assert "shuffle" in check_action("shuffle", {"allocate"}).warning
    assert "unknown action 'alocate'" in check_action("alocate", {"allocate"}).error


def test_every_volcano_name_not_built_here_is_skipped_when_the_framework_is_built() -> None:
    registry = builtin_registry()
    skipped_plugins = sorted(VOLCANO_PLUGINS - set(registry.plugins))
    skipped_actions = sorted(VOLCANO_ACTIONS - set(registry.actions))
    plugins = "\n".join(f"  - name: {name}" for name in sorted(VOLCANO_PLUGINS))
    conf = parse_conf(f'actions: "{", ".join(sorted(VOLCANO_ACTIONS))}"\ntiers:\n- plugins:\n{plugins}\n')
    framework = Framework(conf, registry, BuildContext())
    built = [p.name for p in framework.plugins.every.flat]
    assert not set(built) & set(skipped_plugins)
    skips = [w for w in framework.warnings if "not built here" in w]
    assert len(skips) == len(skipped_plugins) + len(skipped_actions)
    for name in skipped_plugins + skipped_actions:
        assert any(repr(name) in w for w in framework.warnings), name
    assert set(framework.action_names) == VOLCANO_ACTIONS & set(registry.actions)


def test_a_name_neither_knows_stops_the_build_naming_it() -> None:
    conf = parse_conf('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: gpu-fairy\n')
    with pytest.raises(RegistryError, match="unknown plugin 'gpu-fairy'"):
        Framework(conf, builtin_registry(), BuildContext())


def test_arguments_whose_feature_is_absent_here_are_taken_out_and_warn_only_when_turned_on() -> None:
    arguments = {
        "predicate.GPUNumberEnable": True,
        "predicate.GPUSharingEnable": "false",
        "predicate.NodeAffinityEnable": True,
    }
    kept, warnings = unsupported_arguments("predicates", arguments)
    assert kept == {"predicate.NodeAffinityEnable": True}
    (warning,) = warnings
    assert "predicate.GPUNumberEnable" in warning
    assert unsupported_arguments("gang", arguments) == (arguments, [])


@pytest.mark.parametrize(
    ("value", "implied", "kept"),
    [(True, ["dynamicresources"], False), ("true", ["dynamicresources"], False), (False, [], False), ("yes", [], True)],
)
def test_volcanos_dra_switch_implies_the_dynamicresources_plugin(value: object, implied: list[str], kept: bool) -> None:
    """The switch is taken out (true: the plugin it turns on); a value that is not a boolean stays, for
    predicates to refuse by name."""
    arguments = {"predicate.DynamicResourceAllocationEnable": value, "predicate.NodeAffinityEnable": True}
    left, on = implied_plugins("predicates", arguments)
    assert on == implied
    assert ("predicate.DynamicResourceAllocationEnable" in left) == kept
    assert implied_plugins("gang", arguments) == (arguments, [])
