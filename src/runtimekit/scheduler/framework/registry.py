"""Name -> builder registries for actions and plugins, passed in (never filled by import side effects).

Sources of builders:
- `builtin_registry()` (scheduler.plugins / scheduler.actions register theirs explicitly);
- entry points in the groups `runtimekit.plugins` and `runtimekit.actions` (name -> builder);
- plugins directories (`--plugins-dir`, `add_directory`): the module `<name>.py` provides the action
  or plugin `<name>`, and it is imported only when a conf names `<name>` (`provide`, called by the
  framework's builder at start-up, `--check-conf` and each conf reload), never because it lies in
  the folder. Its `register(registry)` registers `<name>` (as an action, a plugin or both, and no
  other name); or its `New(arguments, context)` is the builder of the plugin `<name>` (Volcano's
  `.so` convention). Importing a module runs its code as the scheduler: docs/security.md.
A duplicate name is an error at registration, not a silent override: a module of a plugins
directory named like a built-in action or plugin is refused when a conf names it.
"""

from __future__ import annotations

import importlib.util
import logging
import random
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal

from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.framework.action import Action
from runtimekit.scheduler.framework.arguments import Arguments
from runtimekit.scheduler.framework.interfaces import Plugin
from runtimekit.scheduler.framework.state import SharedState

log = logging.getLogger(__name__)
# what a conf name must look like to be looked for as `<name>.py` in a plugins directory: a plain
# file name (no path, no dot, not hidden, not a private `_module`)
MODULE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
Kind = Literal["action", "plugin"]


class RegistryError(ValueError):
    """An unknown, duplicate or unloadable action or plugin; the message names it."""


@dataclass
class BuildContext:
    """What builders may use besides their arguments (kube-scheduler's `framework.Handle`): the
    protocol, a seeded RNG, `shared` for the state plugins built with this context keep together
    across sessions (under typed keys, `state.py`), and `warn` for what a conf asks that is accepted
    but means nothing here (the framework's builder reports these with the conf's other warnings,
    naming the plugin)."""

    protocol: KitProtocol = field(default_factory=KitProtocol.default)
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    warnings: list[str] = field(default_factory=list)
    shared: SharedState = field(default_factory=SharedState)

    def warn(self, message: str) -> None:
        self.warnings.append(message)


PluginBuilder = Callable[[Arguments, BuildContext], Plugin]
ActionBuilder = Callable[[Arguments, BuildContext], Action]


class Registry:
    def __init__(self) -> None:
        self.plugins: dict[str, PluginBuilder] = {}
        self.actions: dict[str, ActionBuilder] = {}
        self.origins: dict[str, str] = {}
        self.directories: list[Path] = []  # plugins directories, searched in order (`provide`)
        self._imported: set[Path] = set()  # their modules imported so far (each once)

    def register_plugin(self, name: str, builder: PluginBuilder, origin: str = "builtin") -> None:
        if name in self.plugins:
            raise RegistryError(f"plugin {name!r} from {origin} is already registered by {self.origins['p:' + name]}")
        self.plugins[name] = builder
        self.origins["p:" + name] = origin

    def register_action(self, name: str, builder: ActionBuilder, origin: str = "builtin") -> None:
        if name in self.actions:
            raise RegistryError(f"action {name!r} from {origin} is already registered by {self.origins['a:' + name]}")
        self.actions[name] = builder
        self.origins["a:" + name] = origin

    def build_plugin(self, name: str, arguments: Arguments, context: BuildContext) -> Plugin:
        if name not in self.plugins:
            self.provide(name, "plugin")
        builder = self.plugins.get(name)
        if builder is None:
            raise RegistryError(f"unknown plugin {name!r}; known plugins: {', '.join(sorted(self.plugins))}")
        plugin = builder(arguments, context)
        plugin.name = plugin.name or name
        return plugin

    def build_action(self, name: str, arguments: Arguments, context: BuildContext) -> Action:
        if name not in self.actions:
            self.provide(name, "action")
        builder = self.actions.get(name)
        if builder is None:
            raise RegistryError(f"unknown action {name!r}; known actions: {', '.join(sorted(self.actions))}")
        return builder(arguments, context)

    def add_directory(self, directory: str | Path) -> list[str]:
        """Add a plugins directory; nothing in it is imported here (`provide` imports a module when a
        conf names it). Returns the names its modules offer, sorted."""
        path = Path(directory)
        if not path.is_dir():
            raise RegistryError(f"plugins directory {path} does not exist")
        self.directories.append(path)
        return sorted(f.stem for f in path.glob("*.py") if MODULE_NAME.fullmatch(f.stem))

    def provide(self, name: str, kind: Kind) -> None:
        """Make the action or plugin `name` a conf names available when a plugins directory provides
        it: import `<name>.py` from the first directory holding one, unless imported before. Nothing
        happens when no directory has that module. Raises RegistryError when the module cannot be
        imported, does not register `name` as a `kind`, registers another name, or is named like an
        action or plugin registered from elsewhere."""
        file = self._module_file(name)
        if file is None:
            return
        known = self.plugins if kind == "plugin" else self.actions
        if file not in self._imported:
            if name in self.plugins or name in self.actions:
                origin = self.origins.get(("p:" if name in self.plugins else "a:") + name)
                raise RegistryError(f"{file}: {name!r} is already registered by {origin}; rename the module")
            self._import(name, file)
        if name not in known:
            raise RegistryError(f"{file}: registers no {kind} {name!r}")

    def _module_file(self, name: str) -> Path | None:
        if not MODULE_NAME.fullmatch(name):
            return None
        return next((d / f"{name}.py" for d in self.directories if (d / f"{name}.py").is_file()), None)

    def _import(self, name: str, file: Path) -> None:
        """Import `file` and let it register `name` (and nothing else); on any failure nothing it
        registered stays."""
        before = set(self.origins)
        try:
            namespace = vars(_import_file(file))
            register, new = namespace.get("register"), namespace.get("New")
            if callable(register):
                register(self)
            elif callable(new):
                self.register_plugin(name, new, origin=str(file))
            else:
                raise RegistryError(f"{file}: defines neither register(registry) nor New(arguments, context)")
            others = sorted(key.split(":", 1)[1] for key in set(self.origins) - before if key[2:] != name)
            if others:
                raise RegistryError(
                    f"{file}: registers {', '.join(map(repr, others))}; a module of a plugins directory registers "
                    f"only the name of its file, {name!r}"
                )
        except Exception as exc:
            for key in set(self.origins) - before:
                del self.origins[key]
                (self.plugins if key.startswith("p:") else self.actions).pop(key[2:], None)
            if isinstance(exc, RegistryError):
                raise
            raise RegistryError(f"{file}: register failed: {type(exc).__name__}: {exc}") from exc
        added = sorted(set(self.origins) - before)
        for key in added:
            self.origins[key] = str(file)
        self._imported.add(file)
        kinds = " and ".join("plugin" if key.startswith("p:") else "action" for key in added)
        log.info("imported the %s %s from %s", kinds, name, file)

    def load_entry_points(self) -> list[str]:
        loaded = []
        for ep in entry_points(group="runtimekit.plugins"):
            self.register_plugin(ep.name, ep.load(), origin=f"entry point {ep.value}")
            loaded.append(ep.name)
        for ep in entry_points(group="runtimekit.actions"):
            self.register_action(ep.name, ep.load(), origin=f"entry point {ep.value}")
            loaded.append(ep.name)
        return loaded


def _import_file(file: Path) -> Any:
    name = f"runtimekit_plugins_{file.stem}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise RegistryError(f"{file}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise RegistryError(f"{file}: import failed: {type(exc).__name__}: {exc}") from exc
    return module
