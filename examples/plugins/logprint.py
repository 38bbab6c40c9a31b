"""`logprint`: implements the `print` action's extension point (print.py) as the `logprint` plugin
of Volcano's custom-plugin tutorial does: one log line per job of the session,

    Job <namespace>/<name> is ready, detail info: <what it holds and where>
    Job <namespace>/<name> is pending

A job is ready when enough of its tasks hold a place (allocated, binding, bound, running or done)
to meet its gang's `minMember`, as Volcano's `JobInfo.IsReady`; every other job is pending. A
plugin joins an extension point by having its method. Argument: `logprint.prefix` (put before
every line).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from runtimekit.scheduler.framework.info import READY, JobInfo
from runtimekit.scheduler.framework.interfaces import Plugin
from runtimekit.scheduler.framework.registry import BuildContext, Registry
from runtimekit.scheduler.plugins.common import no_arguments

log = logging.getLogger("runtimekit.plugins.logprint")


class LogPrint(Plugin):
    name = "logprint"

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def print_jobs(self, jobs: Sequence[JobInfo]) -> None:
        for job in jobs:
            if job.ready_count() >= job.min_member:
                log.info("%sJob %s/%s is ready, detail info: %s", self.prefix, job.namespace, job.name, detail(job))
            else:
                log.info("%sJob %s/%s is pending", self.prefix, job.namespace, job.name)


def detail(job: JobInfo) -> str:
    """The job's queue, gang size and its tasks with their state and node, e.g.
    `queue default, minMember 2, tasks: w-0 Running on n1, w-1 Binding on n2`."""
    tasks = ", ".join(
        f"{t.name} {t.status.value}" + (f" on {t.node}" if t.node and t.status in READY else "")
        for t in sorted(job.tasks.values(), key=lambda t: t.name)
    )
    return f"queue {job.queue}, minMember {job.min_member}, tasks: {tasks or 'none'}"


def build(arguments: Mapping[str, Any], context: BuildContext) -> LogPrint:
    no_arguments("logprint", arguments, ("logprint.prefix",))
    return LogPrint(str(arguments.get("logprint.prefix", "")))


def register(registry: Registry) -> None:
    registry.register_plugin("logprint", build)
