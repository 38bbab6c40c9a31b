"""A plugins directory (`--plugins-dir`): the module `<name>.py` is imported only when a conf names
`<name>` (at start-up, `--check-conf` and conf reload), never because it lies in the folder; what a
module may register and which names are never looked for there."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from runtimekit.cli.main import main
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.framework import BuildContext, Framework, Registry, parse_conf
from runtimekit.scheduler.framework.check import Checked, check_conf
from runtimekit.scheduler.reload import ConfWatcher

PLUGIN = """\
from pathlib import Path
from runtimekit.scheduler.framework.interfaces import Plugin

with Path({marker!r}).open("a") as marks:
    marks.write("{name}\\n")


class Custom(Plugin):
    name = "{name}"


def New(arguments, context):
    return Custom()
"""

REGISTERS = """\
from pathlib import Path
from runtimekit.scheduler.framework.interfaces import Plugin

with Path({marker!r}).open("a") as marks:
    marks.write("{name}\\n")


def register(registry):
    registry.{kind}("{registers}", lambda arguments, context: Plugin())
"""


def conf(*plugins: str) -> str:
    names = "".join(f"  - name: {name}\n" for name in ("predicates", "gpushare", *plugins))
    return f'actions: "allocate"\ntiers:\n- plugins:\n{names}'


class Folder:
    """A plugins directory whose modules append their name to `marker` when imported."""

    def __init__(self, path: Path) -> None:
        self.path = path / "plugins"
        self.path.mkdir()
        self.marker = path / "imported.txt"

    def plugin(self, name: str) -> Folder:
        (self.path / f"{name}.py").write_text(PLUGIN.format(marker=str(self.marker), name=name))
        return self

    def registering(self, name: str, registers: str, kind: str = "register_plugin") -> Folder:
        source = REGISTERS.format(marker=str(self.marker), name=name, registers=registers, kind=kind)
        (self.path / f"{name}.py").write_text(source)
        return self

    @property
    def imported(self) -> list[str]:
        return self.marker.read_text().split() if self.marker.exists() else []

    def registry(self) -> Registry:
        registry = builtin_registry()
        registry.add_directory(self.path)
        return registry


def test_a_module_the_conf_does_not_name_is_never_imported(tmp_path: Path) -> None:
    folder = Folder(tmp_path).plugin("wanted").plugin("bystander")
    (folder.path / "bomb.py").write_text("raise SystemExit('a module nobody names ran')\n")
    registry = folder.registry()
    assert folder.imported == []  # adding the folder imports nothing
    framework = Framework(parse_conf(conf("wanted")), registry, BuildContext())
    assert framework.plugin("wanted") is not None
    assert folder.imported == ["wanted"]
    assert "bystander" not in registry.plugins


def test_check_conf_imports_only_the_modules_the_conf_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = Folder(tmp_path).plugin("wanted").plugin("bystander")
    path = tmp_path / "s.conf"
    path.write_text(conf("wanted"))
    assert main(["scheduler", "--check-conf", str(path), "--plugins-dir", str(folder.path)]) == 0
    assert "0 error(s)" in capsys.readouterr().out
    assert folder.imported == ["wanted"]


def test_a_conf_that_names_a_module_imports_it_once(tmp_path: Path) -> None:
    folder = Folder(tmp_path).plugin("bystander")
    registry = folder.registry()
    for _ in range(2):  # a second framework (a reload) builds from what was imported
        framework = Framework(parse_conf(conf("bystander")), registry, BuildContext())
        assert framework.plugin("bystander") is not None
    assert folder.imported == ["bystander"]
    assert registry.origins["p:bystander"] == str(folder.path / "bystander.py")


def test_a_conf_reload_that_names_a_new_plugin_imports_it_then(tmp_path: Path) -> None:
    folder = Folder(tmp_path).plugin("late")
    registry, context = folder.registry(), BuildContext()
    path = tmp_path / "s.conf"
    path.write_text(conf())
    applied: list[Checked] = []
    watcher = ConfWatcher(
        path, lambda text, source: check_conf(text, source, registry, context), applied.append, pytest.fail
    )
    assert watcher.poll() is None
    assert folder.imported == []
    path.write_text(conf("late"))
    assert [watcher.poll(), watcher.poll()] == ["waiting", "applied"]
    (checked,) = applied
    assert checked.framework is not None
    assert checked.framework.plugin("late") is not None
    assert folder.imported == ["late"]


@pytest.mark.parametrize(
    ("setup", "named", "message", "imported"),
    [
        pytest.param(
            lambda f: f.plugin("gang"),
            "gang",
            "gang.py: 'gang' is already registered by builtin; rename the module",
            [],
            id="named-like-a-built-in",
        ),
        pytest.param(
            lambda f: f.registering("decoy", "stranger"),
            "decoy",
            "decoy.py: registers 'stranger'; a module of a plugins directory registers only the name of its file",
            ["decoy"],
            id="registers-another-name",
        ),
        pytest.param(
            lambda f: f.registering("act", "act", kind="register_action"),
            "act",
            "act.py: registers no plugin 'act'",
            ["act"],
            id="an-action-named-as-a-plugin",
        ),
        pytest.param(
            lambda f: f.plugin("outside"),
            "../plugins/outside",
            "unknown plugin '../plugins/outside'",
            [],
            id="a-path-is-not-a-module-name",
        ),
        pytest.param(
            lambda f: f.plugin(".hidden"),
            ".hidden",
            "unknown plugin '.hidden'",
            [],
            id="a-hidden-file-is-not-a-module",
        ),
    ],
)
def test_what_a_plugins_directory_may_not_provide(
    tmp_path: Path, setup: Callable[[Folder], Folder], named: str, message: str, imported: list[str]
) -> None:
    folder = setup(Folder(tmp_path))
    registry = folder.registry()
    checked = check_conf(conf(named), "s.conf", registry, BuildContext())
    assert checked.framework is None
    assert any(message in p.message for p in checked.problems.errors), checked.problems.errors
    assert folder.imported == imported
    assert "stranger" not in registry.plugins  # a refused module leaves nothing registered
    assert "decoy" not in registry.plugins
