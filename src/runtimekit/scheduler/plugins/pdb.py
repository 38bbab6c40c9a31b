"""`pdb`: preemption and reclaim keep PodDisruptionBudgets (Volcano's pdb plugin, kube-scheduler's
rule for victims): a running pod is not chosen as a victim when evicting it would leave a budget
that selects it with fewer disruptions allowed than zero.

A budget's allowance is its `status.disruptionsAllowed` once the disruption controller has written
it; before that (or where no such controller runs, as on the embedded cluster) it is worked out
here from `minAvailable`/`maxUnavailable` (counts or percentages, rounded up as Kubernetes does)
and the session's pods it selects: the running ones are healthy. A pod in the budget's
`disruptedPods` is already counted. A budget with no selector, or an empty one, selects nothing
(as in Volcano and kube-scheduler); a pod without labels matches no budget. Victims are counted
against the allowance for the rest of the session, and given back if their eviction is undone.

Implements Preemptable, Reclaimable and EventHandler. Put it in the tier of the plugins that choose
victims (priority, gang, conformance): the first tier with an answer decides which victims stand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from runtimekit.kube.objects import labels_of
from runtimekit.kube.semantics import intstr
from runtimekit.model import PodKey
from runtimekit.scheduler.framework.arguments import Arguments
from runtimekit.scheduler.framework.info import OCCUPYING, TaskInfo, TaskStatus
from runtimekit.scheduler.framework.interfaces import EventHandler, Plugin, Preemptable, Reclaimable, Watches
from runtimekit.scheduler.framework.policy import DisruptionBudget
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.plugins.common import no_arguments

NAME = "pdb"


def pod_labels(task: TaskInfo) -> Mapping[str, str]:
    labels = labels_of(task.pod) if task.pod is not None else {}
    return labels if isinstance(labels, Mapping) else {}


def selects(budget: DisruptionBudget, task: TaskInfo) -> bool:
    if budget.namespace != task.namespace or budget.selector.everything:
        return False
    labels = pod_labels(task)
    return bool(labels) and budget.selector.matches(labels)


def allowance(budget: DisruptionBudget, tasks: Sequence[TaskInfo]) -> int:
    """Disruptions the budget allows now: the controller's figure, else worked out from the spec."""
    if budget.allowed is not None:
        return budget.allowed
    selected = [t for t in tasks if t.status in OCCUPYING and selects(budget, t)]
    expected = len(selected)
    healthy = sum(1 for t in selected if t.status is TaskStatus.RUNNING)
    if budget.min_available is not None:
        return max(0, healthy - intstr.scaled_value(budget.min_available, expected, round_up=True))
    if budget.max_unavailable is not None:
        return max(0, healthy - (expected - intstr.scaled_value(budget.max_unavailable, expected, round_up=True)))
    return 0


class Pdb(Plugin, Preemptable, Reclaimable, EventHandler, Watches):
    name = NAME
    watches: tuple[str, ...] = ("poddisruptionbudgets",)

    def __init__(self) -> None:
        self.budgets: tuple[DisruptionBudget, ...] = ()
        self.left: list[int] = []  # disruptions each budget still allows in this session
        self.evicted: set[PodKey] = set()

    def on_session_open(self, ssn: SessionView) -> None:
        self.budgets = ssn.snapshot.budgets
        tasks = [t for job in ssn.jobs.values() for t in job.tasks.values()] if self.budgets else []
        self.left = [allowance(b, tasks) for b in self.budgets]
        self.evicted = set()

    def _counted(self, task: TaskInfo) -> list[int]:
        """The budgets an eviction of `task` counts against."""
        return [i for i, b in enumerate(self.budgets) if task.name not in b.disrupted and selects(b, task)]

    def _filter(self, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        left = list(self.left)
        victims = []
        for task in candidates:
            hit = self._counted(task)
            for i in hit:
                left[i] -= 1
            if all(left[i] >= 0 for i in hit):
                victims.append(task)
        return victims

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        return self._filter(candidates) if self.budgets else list(candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        return self._filter(candidates) if self.budgets else list(candidates)

    def on_allocate(self, task: TaskInfo) -> None:
        if task.key in self.evicted:  # an eviction undone
            self.evicted.discard(task.key)
            for i in self._counted(task):
                self.left[i] += 1

    def on_deallocate(self, task: TaskInfo) -> None:
        if task.status is TaskStatus.RELEASING and self.budgets and task.key not in self.evicted:
            self.evicted.add(task.key)
            for i in self._counted(task):
                self.left[i] -= 1


def build(arguments: Arguments, context: BuildContext) -> Pdb:
    no_arguments(NAME, arguments)
    return Pdb()
