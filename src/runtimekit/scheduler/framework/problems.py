"""Problems found in a scheduler configuration: errors (the conf cannot be used) and warnings (it can,
but something will not happen that the reader may expect).

The conf parser (`conf.py`) and the framework's builder (`build.py`) report every problem they find
to a `Problems`. Two ways to use it:

- `Problems(fail_fast=True)`: the first error is raised at once, as the exception the reporter gave
  (`ConfError`, `RegistryError`, `ArgumentError`, ...). This is the API of `parse_conf` and
  `Framework(...)`, for callers that want one answer.
- `Problems()`: everything is collected, in the order found, so that `runtimekit scheduler
  --check-conf`, start-up and conf reload can say every problem at once.
Warnings are collected in both modes; they never stop anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]


class ConfError(ValueError):
    """A scheduler configuration that cannot be used; the message names the key or name."""


@dataclass(frozen=True)
class Problem:
    severity: Severity
    message: str  # names the file and the place in it ("s.conf: tiers[1].plugins[0] (foo): ...")

    def __str__(self) -> str:
        return f"{self.severity}: {self.message}"


class Problems:
    """The problems of one configuration, in the order found (see the module docstring)."""

    def __init__(self, fail_fast: bool = False) -> None:
        self.fail_fast = fail_fast
        self.items: list[Problem] = []

    def error(self, message: str, exc: Exception | None = None) -> None:
        """Report an error; raises `exc` (or a ConfError with `message`) when failing fast."""
        if self.fail_fast:
            raise exc if exc is not None else ConfError(message)
        self.items.append(Problem("error", message))

    def warning(self, message: str) -> None:
        self.items.append(Problem("warning", message))

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.items if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.items if p.severity == "warning"]

    def __bool__(self) -> bool:
        return bool(self.items)
