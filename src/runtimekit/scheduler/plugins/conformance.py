"""`conformance`: never evict system-critical pods (system priority classes, or pods in
kube-system) for preemption or reclaim. Implements Preemptable and Reclaimable."""

from __future__ import annotations

from collections.abc import Sequence

from runtimekit.scheduler.framework.arguments import Arguments
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.interfaces import Plugin, Preemptable, Reclaimable
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.plugins.common import no_arguments


class Conformance(Plugin, Preemptable, Reclaimable):
    name = "conformance"

    @staticmethod
    def _evictable(candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return [t for t in candidates if not t.critical and t.namespace != "kube-system"]

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        return self._evictable(candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        return self._evictable(candidates)


def build(arguments: Arguments, context: BuildContext) -> Conformance:
    no_arguments("conformance", arguments)
    return Conformance()
