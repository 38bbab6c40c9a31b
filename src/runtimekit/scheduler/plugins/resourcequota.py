"""`resourcequota`: a pod group is admitted (enqueue) only while its `minResources` fit in every
ResourceQuota of its namespace (Volcano's resourcequota plugin).

For each quota of the namespace, the group's minResources under the quota's hard names (`cpu` also
counts as `requests.cpu`, and the other way round) plus what the namespace already uses (the quota's
`status.used`, or what its bound pods use where no quota controller writes it) plus what this
session admitted before it must stay within `hard`. A group without minResources, or a namespace
without quotas, is admitted. Implements JobEnqueueable and JobEnqueued; reads ResourceQuotas (the
live scheduler watches them while this plugin is configured).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from fractions import Fraction

from runtimekit.scheduler.framework.arguments import Arguments
from runtimekit.scheduler.framework.info import JobInfo
from runtimekit.scheduler.framework.interfaces import JobEnqueueable, JobEnqueued, Plugin, Vote, Watches
from runtimekit.scheduler.framework.policy import NamespaceQuota
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.plugins.common import no_arguments

NAME = "resourcequota"
log = logging.getLogger(__name__)


class ResourceQuota(Plugin, JobEnqueueable, JobEnqueued, Watches):
    name = NAME
    watches: tuple[str, ...] = ("resourcequotas",)

    def __init__(self) -> None:
        self.quotas: Mapping[str, tuple[NamespaceQuota, ...]] = {}
        self.admitted: dict[str, dict[str, Fraction]] = {}  # namespace -> admitted in this session

    def on_session_open(self, ssn: SessionView) -> None:
        self.quotas = ssn.snapshot.quotas
        self.admitted = {}

    def job_enqueueable(self, job: JobInfo) -> Vote:
        request = job.quota_request
        if not request:
            return Vote.PERMIT
        admitted = self.admitted.get(job.namespace, {})
        for quota in self.quotas.get(job.namespace, ()):
            used = quota.used or {}
            over = [
                name
                for name, amount in request.items()
                if name in quota.hard and used.get(name, 0) + admitted.get(name, 0) + amount > quota.hard[name]
            ]
            if over:
                log.info(
                    "pod group %s/%s waits: ResourceQuota %s has no room for %s",
                    job.namespace,
                    job.name,
                    quota.name,
                    ", ".join(
                        f"{n} {float(request[n]):g} (used {float(used.get(n, 0)):g} of {float(quota.hard[n]):g})"
                        for n in over
                    ),
                )
                return Vote.REJECT
        return Vote.PERMIT

    def job_enqueued(self, job: JobInfo) -> None:
        if job.quota_request and job.namespace in self.quotas:
            admitted = self.admitted.setdefault(job.namespace, {})
            for name, amount in job.quota_request.items():
                admitted[name] = admitted.get(name, Fraction(0)) + amount


def build(arguments: Arguments, context: BuildContext) -> ResourceQuota:
    no_arguments(NAME, arguments)
    return ResourceQuota()
