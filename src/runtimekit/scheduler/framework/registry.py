"""Name -> builder registries for actions and plugins, passed in (never filled by import side effects).

Sources of builders:
- `builtin_registry()` (scheduler.plugins / scheduler.actions register theirs explicitly);
- a plugins directory (`--plugins-dir`): every `*.py` in it is imported; a module with a
  `register(registry)` function registers what it likes; a module with a `New(arguments, context)`
  function registers one plugin under its file name (Volcano's `.so` convention);
- entry points in the groups `runtimekit.plugins` and `runtimekit.actions` (name -> builder).
A duplicate name is an error at registration, not a silent override.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.framework.action import Action
from runtimekit.scheduler.framework.arguments import Arguments
from runtimekit.scheduler.framework.interfaces import Plugin
from runtimekit.scheduler.framework.state import SharedState


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
        builder = self.plugins.get(name)
        if builder is None:
            raise RegistryError(f"unknown plugin {name!r}; known plugins: {', '.join(sorted(self.plugins))}")
        plugin = builder(arguments, context)
        plugin.name = plugin.name or name
        return plugin

    def build_action(self, name: str, arguments: Arguments, context: BuildContext) -> Action:
        builder = self.actions.get(name)
        if builder is None:
            raise RegistryError(f"unknown action {name!r}; known actions: {', '.join(sorted(self.actions))}")
        return builder(arguments, context)

    def load_directory(self, directory: str | Path) -> list[str]:
        """Import every module of a plugins directory; returns the names it registered."""
        path = Path(directory)
        if not path.is_dir():
            raise RegistryError(f"plugins directory {path} does not exist")
        before = set(self.origins)
        for file in sorted(path.glob("*.py")):
            if file.name.startswith("_"):
                continue
            module = _import_file(file)
            register = getattr(module, "register", None)
            new = getattr(module, "New", None)
            if callable(register):
                register(self)
            elif callable(new):
                self.register_plugin(file.stem, new, origin=str(file))
            else:
                raise RegistryError(f"{file}: defines neither register(registry) nor New(arguments, context)")
            for key in set(self.origins) - before:
                if self.origins[key] == "builtin":
                    self.origins[key] = str(file)
        return sorted(key.split(":", 1)[1] for key in set(self.origins) - before)

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
