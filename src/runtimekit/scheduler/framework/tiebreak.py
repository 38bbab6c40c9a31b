"""The order of two tasks that no TaskOrder plugin tells apart, as Volcano's session falls back to it
(`TaskOrderFn` -> `CompareTask`, pkg/controllers/job/helpers): the pod's index in its Volcano Job
task (the last `-` part of a name of at least three parts, `job-task-3`) when both have one and
they differ, else the older pod first. Where Volcano then compares UIDs, which are random, so the
same pods went in another order on each run, the namespace and name decide first (then the UID),
so an outcome does not change from run to run. Called by the session's `task_order`.
"""

from __future__ import annotations

import functools
import re

from runtimekit.scheduler.framework.info import TaskInfo

_DIGITS = re.compile(r"\+?[0-9]+")  # what Go's strconv.Atoi reads of a part without '-'


@functools.lru_cache(maxsize=65536)
def pod_index(name: str) -> int | None:
    """The index Volcano reads from a pod's name, None when it reads none."""
    parts = name.split("-")
    if len(parts) < 3 or not _DIGITS.fullmatch(parts[-1]):
        return None
    return int(parts[-1])


def compare_tasks(left: TaskInfo, right: TaskInfo) -> int:
    """Negative when `left` goes first, positive when `right` does; 0 only for the same task."""
    left_index, right_index = pod_index(left.name), pod_index(right.name)
    if left_index is not None and right_index is not None and left_index != right_index:
        return -1 if left_index < right_index else 1
    if left.created != right.created:
        return -1 if left.created < right.created else 1
    mine, theirs = (left.namespace, left.name, left.key), (right.namespace, right.name, right.key)
    return (mine > theirs) - (mine < theirs)
