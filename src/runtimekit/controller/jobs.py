"""The Job the controller runs on a node, and the names and labels that tie it to its node and change.

Names are deterministic: `<prefix>-<action>-<node>-<change>` (with a hash when the node name is
long), so a restarted controller finds the Job it already made instead of making another. The Job
template is an extension point: `JobTemplate` builds the default (the kit's image running
`runtimekit job-agent`, pinned to the node, tolerating every taint of the node, the runtime socket
folder mounted); `FileJobTemplate` renders a YAML file with `{{node}}`, `{{action}}`, `{{image}}`,
`{{name}}`, `{{namespace}}`, `{{socket}}`, `{{socketDir}}` and `{{change}}` placeholders.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, cast

import yaml

from runtimekit.kube.objects import Job, PodSpec, Taint, Toleration

MANAGED_BY = "app.kubernetes.io/managed-by"
CONTROLLER = "lj-runtimekit-controller"
NODE_LABEL = "runtimekit.aliyun.com/node"
ACTION_LABEL = "runtimekit.aliyun.com/action"
CHANGE_LABEL = "runtimekit.aliyun.com/change"
NODE_ANNOTATION = "runtimekit.aliyun.com/node-name"
REQUEST_ANNOTATION = "runtimekit.aliyun.com/runtime-request"  # on the node: "<change>:<enable|disable>"
DONE_ANNOTATION = "runtimekit.aliyun.com/runtime-done"  # on the node: the last change whose Job finished
ACTIONS = ("enable", "disable")


def _dns_safe(text: str, limit: int) -> str:
    clean = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-") or "x"
    if len(clean) <= limit:
        return clean
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{clean[: limit - 9].rstrip('-')}-{digest}"


def job_name(prefix: str, action: str, node: str, change: int) -> str:
    """Deterministic, at most 52 characters (room for Job-generated pod suffixes)."""
    head = f"{prefix}-{action}"
    tail = f"-{change}"
    return f"{head}-{_dns_safe(node, 52 - len(head) - len(tail) - 1)}{tail}"


def node_label_value(node: str) -> str:
    return _dns_safe(node, 63)


@dataclass(frozen=True)
class JobSpec:
    name: str
    namespace: str
    node: str
    action: str
    change: int
    image: str
    socket: str
    taints: Sequence[Taint] = ()

    def labels(self) -> dict[str, str]:
        return {
            MANAGED_BY: CONTROLLER,
            NODE_LABEL: node_label_value(self.node),
            ACTION_LABEL: self.action,
            CHANGE_LABEL: str(self.change),
        }


class Template(Protocol):
    def render(self, spec: JobSpec) -> Job:
        """The Job manifest for a change; must carry `spec.labels()` on the Job and its pod template."""


def tolerations_for(taints: Sequence[Taint]) -> list[Toleration]:
    """One toleration per taint of the node, so the Job runs whatever the node is tainted with."""
    out = []
    for taint in taints:
        toleration: Toleration = {"key": taint.get("key", ""), "effect": taint.get("effect", "")}
        if taint.get("value"):
            toleration |= {"operator": "Equal", "value": taint["value"]}
        else:
            toleration["operator"] = "Exists"
        out.append(toleration)
    return out


class JobTemplate:
    """The default Job: `runtimekit job-agent --action A --socket S` in the kit's image."""

    def __init__(self, backoff_limit: int = 2, deadline_seconds: int = 300, service_account: str = "") -> None:
        self.backoff_limit, self.deadline_seconds, self.service_account = (
            backoff_limit,
            deadline_seconds,
            service_account,
        )

    def render(self, spec: JobSpec) -> Job:
        labels = spec.labels()
        socket_dir = posixpath.dirname(spec.socket)
        pod_spec: PodSpec = {
            "nodeName": spec.node,
            "restartPolicy": "Never",
            "tolerations": tolerations_for(spec.taints),
            "containers": [
                {
                    "name": "job-agent",
                    "image": spec.image,
                    "command": ["runtimekit", "job-agent", "--action", spec.action, "--socket", spec.socket],
                    "volumeMounts": [{"name": "runtime-socket", "mountPath": socket_dir}],
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
                }
            ],
            "volumes": [{"name": "runtime-socket", "hostPath": {"path": socket_dir, "type": "Directory"}}],
        }
        if self.service_account:
            pod_spec["serviceAccountName"] = self.service_account
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": spec.name,
                "namespace": spec.namespace,
                "labels": labels,
                "annotations": {NODE_ANNOTATION: spec.node},
            },
            "spec": {
                "backoffLimit": self.backoff_limit,
                "activeDeadlineSeconds": self.deadline_seconds,
                "template": {
                    "metadata": {"labels": labels, "annotations": {NODE_ANNOTATION: spec.node}},
                    "spec": pod_spec,
                },
            },
        }


class FileJobTemplate:
    """A Job manifest from a YAML file with `{{placeholder}}`s; the controller's labels are added."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.text = self.path.read_text(encoding="utf-8")
        self.render(JobSpec("check", "default", "node", "enable", 0, "image", "/run/x.sock"))  # fail fast

    def render(self, spec: JobSpec) -> Job:
        values = {
            "node": spec.node,
            "action": spec.action,
            "image": spec.image,
            "name": spec.name,
            "namespace": spec.namespace,
            "socket": spec.socket,
            "socketDir": posixpath.dirname(spec.socket),
            "change": str(spec.change),
        }
        text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: values.get(m.group(1), m.group(0)), self.text)
        job = yaml.safe_load(text)
        if not isinstance(job, dict) or job.get("kind") != "Job":
            raise ValueError(f"{self.path}: the template must be one batch/v1 Job manifest")
        job.setdefault("metadata", {})
        job["metadata"].update(name=spec.name, namespace=spec.namespace)
        job["metadata"].setdefault("labels", {}).update(spec.labels())
        template = job.setdefault("spec", {}).setdefault("template", {})
        template.setdefault("metadata", {}).setdefault("labels", {}).update(spec.labels())
        job["metadata"].setdefault("annotations", {})[NODE_ANNOTATION] = spec.node
        return cast(Job, dict(job))  # a Job by its kind, checked above; the file's other fields are its own
