"""`logprint`: logs the pending and the ready jobs of every session, through the `print` action's
extension point (see print.py). A plugin joins an extension point by having its method."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from runtimekit.scheduler.framework.interfaces import Plugin
from runtimekit.scheduler.framework.registry import BuildContext, Registry
from runtimekit.scheduler.framework.session import Session

log = logging.getLogger("runtimekit.plugins.logprint")


class LogPrint(Plugin):
    name = "logprint"

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def print_session(self, ssn: Session) -> None:
        pending = sorted(job.name for job in ssn.jobs.values() if job.pending)
        ready = sorted(job.name for job in ssn.jobs.values() if not job.pending and ssn.job_ready(job))
        log.info("%ssession %d: pending jobs %s; ready jobs %s", self.prefix, ssn.uid, pending, ready)


def build(arguments: Mapping[str, Any], context: BuildContext) -> LogPrint:
    unknown = sorted(set(arguments) - {"logprint.prefix"})
    if unknown:
        from runtimekit.scheduler.framework.arguments import ArgumentError

        raise ArgumentError(f"logprint: unknown argument {unknown[0]!r}")
    return LogPrint(str(arguments.get("logprint.prefix", "")))


def register(registry: Registry) -> None:
    registry.register_plugin("logprint", build)
