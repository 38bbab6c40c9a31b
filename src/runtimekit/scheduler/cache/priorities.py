"""The cluster's PriorityClasses, kept as Volcano's scheduler cache keeps them, for the priority of a
job with a PodGroup: the value of the class its PodGroup names (`spec.priorityClassName`), else
the value of the class marked `globalDefault`, else 0 (Volcano's `Snapshot` in
pkg/scheduler/cache/cache.go; its pods' own priorities do not count). Fed by the cluster cache's
PriorityClass handler; read by the snapshot, under the cluster cache's lock.
"""

from __future__ import annotations

from runtimekit.kube.objects import PriorityClass, meta


class PriorityClasses:
    def __init__(self) -> None:
        self.values: dict[str, int] = {}
        # The class marked globalDefault: the last one added, as Volcano keeps it (the API server
        # admits one at a time, so there is one unless a second was created around admission).
        self.default: str | None = None

    def apply(self, kind: str, obj: PriorityClass) -> None:
        """A watch event of a PriorityClass: ADDED, MODIFIED or DELETED."""
        name = str(meta(obj).get("name", ""))
        value = obj.get("value")
        if kind == "DELETED" or not isinstance(value, int) or isinstance(value, bool):
            self.values.pop(name, None)
            if self.default == name:
                self.default = None
            return
        self.values[name] = value
        if obj.get("globalDefault") is True:
            self.default = name
        elif self.default == name:  # a class that is no longer the default
            self.default = None

    def job_priority(self, class_name: object) -> int:
        """The priority of a job whose PodGroup names `class_name` (anything, as read from it)."""
        if isinstance(class_name, str) and class_name in self.values:
            return self.values[class_name]
        return self.values.get(self.default, 0) if self.default is not None else 0
