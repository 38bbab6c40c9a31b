"""An out-of-tree action, `print`, with its own extension point — the Python version of Volcano's
custom-plugin demo (a `print` action calling every plugin's PrintFn).

The point is a Protocol: any plugin with a `print_session(ssn)` method takes part. The action asks
the session for such plugins, tier by tier, and calls them. Load it with
`runtimekit scheduler --plugins-dir examples/plugins` and list `print` in the conf's actions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from runtimekit.scheduler.framework.registry import BuildContext, Registry
from runtimekit.scheduler.framework.session import Session


@runtime_checkable
class Printer(Protocol):
    def print_session(self, ssn: Session) -> None:
        """Report on the session (called once per session by the `print` action)."""


class PrintAction:
    name = "print"

    def execute(self, ssn: Session) -> None:
        for tier in ssn.implementing(Printer):
            for plugin in tier:
                plugin.print_session(ssn)


def build(arguments: Mapping[str, Any], context: BuildContext) -> PrintAction:
    return PrintAction()


def register(registry: Registry) -> None:
    registry.register_action("print", build)
