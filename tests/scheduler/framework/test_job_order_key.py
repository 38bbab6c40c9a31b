"""The session's job sort key with the built-in job-order plugins (priority, gang, sla, drf): it
orders exactly as the comparison through the plugins does, in a sort and in the allocate action's
queue, also after a popped job's allocation changes its dominant share and it is pushed back."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from runtimekit.scheduler.actions.ordering import OrderedQueue
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.framework import BuildContext, Framework, TaskStatus, parse_conf
from runtimekit.scheduler.framework.info import JobInfo
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.plugins.drf import Drf, dominant_share
from scheduler.helpers import job_of, share, static_cache

CONF = """
actions: "allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: sla
- plugins:
  - name: drf
  - name: gpushare
"""

PENDING, PLACED = TaskStatus.PENDING, (TaskStatus.ALLOCATED, TaskStatus.PIPELINED, TaskStatus.BOUND, TaskStatus.RUNNING)
STATUSES = (PENDING, PENDING, *PLACED)  # pending twice: a popped job has tasks to allocate
Job = tuple[int, int, int, list[tuple[TaskStatus, int]], float | None]
JOB = st.tuples(
    st.integers(0, 2),  # priority
    st.integers(0, 3),  # created
    st.integers(1, 3),  # min member
    st.lists(st.tuples(st.sampled_from(STATUSES), st.sampled_from([100, 250, 500])), min_size=1, max_size=3),
    st.sampled_from([None, 5.0, 20.0]),  # its own sla waiting time
)


def open_session(jobs: list[Job]) -> Session:
    cache = static_cache("n1", "n2", gpus=2)
    for i, (priority, created, min_member, tasks, wait) in enumerate(jobs):
        job = job_of(
            f"j{i}",
            *[share(milli, cpu=milli) for _, milli in tasks],
            min_member=min_member,
            priority=priority,
            created=float(created),
        )
        job.waiting_time = wait
        for task, (status, _) in zip(job.tasks.values(), tasks, strict=True):
            task.status = status
        cache.add_job(job)
    return Framework(parse_conf(CONF), builtin_registry(), BuildContext()).open_session(cache)


def drain(queue: OrderedQueue[JobInfo]) -> list[str]:
    return [queue.pop().key for _ in range(len(queue))]


@settings(max_examples=25, deadline=None)
@given(st.lists(JOB, min_size=1, max_size=10), st.data())
def test_the_plugins_sort_key_orders_as_the_comparison(jobs: list[Job], data: st.DataObject) -> None:
    ssn = open_session(jobs)
    key = ssn.job_key
    assert key is not None  # every built-in job order has a key: no comparison through the plugins per sift
    infos = list(ssn.jobs.values())
    assert [j.key for j in sorted(infos, key=key)] == [j.key for j in ssn.sorted_jobs(infos)]
    by_key, by_compare = OrderedQueue(ssn.job_order, infos, key), OrderedQueue(ssn.job_order, infos)
    # as allocate does: pop a job, change its allocation (its dominant share), push it back
    popped_key, popped_compare = by_key.pop(), by_compare.pop()
    assert popped_key is popped_compare
    pending = [t for t in popped_key.tasks.values() if t.status is TaskStatus.PENDING]
    for task in pending[: data.draw(st.integers(min(1, len(pending)), len(pending)))]:
        task.status = TaskStatus.ALLOCATED
        ssn.fire(True, task)
    by_key.push(popped_key)
    by_compare.push(popped_compare)
    assert drain(by_key) == drain(by_compare)
    (drf,) = [plugin for plugin in ssn.plugins.job_order.flat if isinstance(plugin, Drf)]
    assert all(drf.share(job.key) == dominant_share(job.allocated(), drf.total) for job in infos)  # none stale
