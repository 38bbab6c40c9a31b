"""An out-of-tree action, `print`, with its own extension point — the Python version of the `print`
action of Volcano's custom-plugin tutorial, which hands every job of the session to each plugin's
print function.

The point is a Protocol: any plugin with a `print_jobs(jobs)` method takes part. The action asks
the session for such plugins, tier by tier, and calls them with the session's jobs (ordered by
namespace and name). It looks at running jobs too, so it sets `needs_running`: the live scheduler
then puts every job with pods into the session, not only those with pods waiting. Load it with
`runtimekit scheduler --plugins-dir examples/plugins` and list `print` in the conf's actions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from runtimekit.scheduler.framework.info import JobInfo
from runtimekit.scheduler.framework.registry import BuildContext, Registry
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.plugins.common import no_arguments


@runtime_checkable
class Printer(Protocol):
    def print_jobs(self, jobs: Sequence[JobInfo]) -> None:
        """Report on the session's jobs (called once per session by the `print` action)."""


class PrintAction:
    name = "print"
    needs_running = True  # running jobs are printed too: the live cache includes them in sessions

    def execute(self, ssn: Session) -> None:
        jobs = sorted(ssn.jobs.values(), key=lambda job: (job.namespace, job.name))
        for tier in ssn.implementing(Printer):
            for plugin in tier:
                plugin.print_jobs(jobs)


def build(arguments: Mapping[str, Any], context: BuildContext) -> PrintAction:
    no_arguments("print", arguments)
    return PrintAction()


def register(registry: Registry) -> None:
    registry.register_action("print", build)
