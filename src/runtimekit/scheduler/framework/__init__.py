"""The scheduling framework: configuration, registry, session, statement and extension points."""

from runtimekit.scheduler.framework.conf import ConfError, SchedulerConf, load_conf, parse_conf
from runtimekit.scheduler.framework.framework import Framework
from runtimekit.scheduler.framework.info import JobInfo, NodeMeta, QueueInfo, Snapshot, TaskInfo, TaskStatus
from runtimekit.scheduler.framework.registry import BuildContext, Registry, RegistryError
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.framework.status import Code, FitErrors, Status

__all__ = [
    "BuildContext",
    "Code",
    "ConfError",
    "FitErrors",
    "Framework",
    "JobInfo",
    "NodeMeta",
    "QueueInfo",
    "Registry",
    "RegistryError",
    "SchedulerConf",
    "Session",
    "Snapshot",
    "Status",
    "TaskInfo",
    "TaskStatus",
    "load_conf",
    "parse_conf",
]
