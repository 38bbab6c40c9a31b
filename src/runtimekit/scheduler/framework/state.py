"""State that plugins share, under typed keys (kube-scheduler's `framework.CycleState`).

A plugin module defines a key once, `INDEX: StateKey[PodIndex] = StateKey("predicates/index")`, and
reads back what it, or another plugin, wrote under that key with its type: `state.read(INDEX)` is a
`PodIndex` to mypy. Two stores use the same keys:

- `CycleState`: one session's; the session makes a fresh one when it opens and the framework drops
  its contents when the session closes (`SessionView.state`);
- `SharedState`: what the plugins built with one `BuildContext` share across sessions (e.g. the
  node scope `predicates` and `nodeorder` both keep while node labels last); its owner is the
  context, and a plugin takes what it needs from it when it is built.

No data protection, as in kube-scheduler: plugins are trusted to read a key only as its type. Not
thread-safe: a session runs on one thread; plugins build on the one that builds the framework.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")


class StateKey(Generic[T]):
    """The key of one kind of value; equal only to itself, so two plugins cannot collide by name."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name  # for messages only

    def __repr__(self) -> str:
        return f"StateKey({self.name!r})"


class StateNotFound(KeyError):
    """`read` of a key nothing was written under (kube-scheduler's ErrNotFound)."""


class KeyedState:
    """Values by typed key."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[StateKey[Any], object] = {}

    def write(self, key: StateKey[T], value: T) -> None:
        """Store `value` under `key`, replacing what was there."""
        self._values[key] = value

    def read(self, key: StateKey[T]) -> T:
        """The value written under `key`; raises `StateNotFound` when none was."""
        try:
            return cast(T, self._values[key])
        except KeyError:
            raise StateNotFound(f"nothing written under {key.name!r}") from None

    def get(self, key: StateKey[T]) -> T | None:
        """The value written under `key`, or None when none was."""
        return cast("T | None", self._values.get(key))

    def delete(self, key: StateKey[Any]) -> None:
        """Forget the value under `key` (nothing happens when there is none)."""
        self._values.pop(key, None)

    def clear(self) -> None:
        self._values.clear()

    def __contains__(self, key: object) -> bool:
        return key in self._values


class CycleState(KeyedState):
    """One session's state: made fresh when the session opens, emptied when it closes."""

    __slots__ = ()


class SharedState(KeyedState):
    """The state the plugins built with one `BuildContext` share across sessions (and across the
    frameworks a conf reload builds with that context)."""

    __slots__ = ()
