"""What a Volcano Job makes: its pods, its PodGroup and what its plugins add (Volcano's
`createJobPod`, `createOrUpdatePodGroup`, `calcPGMinResources` and the env and svc plugins).

- a pod `<job>-<task>-<index>` from the task's template, owned by the Job, `schedulerName` from the
  template or the Job (else the cluster's default for Volcano Jobs), the Job's `priorityClassName`
  when the template has none; annotations `volcano.sh/task-index`, `volcano.sh/task-spec`,
  `scheduling.k8s.io/group-name` (`<job>-<uid>`), `volcano.sh/job-name`, `volcano.sh/queue-name`,
  `volcano.sh/job-version`, `volcano.sh/template-uid`, `volcano.sh/job-retry-count`; labels
  `volcano.sh/task-index`, `volcano.sh/job-name`, `volcano.sh/task-spec`, `volcano.sh/job-namespace`,
  `volcano.sh/queue-name`; a volume and mount per `spec.volumes` entry;
- the PodGroup `<job>-<uid>`: `minMember` (the Job's `minAvailable`), `minTaskMember`, `queue`,
  `priorityClassName`, `minResources` (the requests of the first `minAvailable` pods by task
  priority, counted as Volcano's quota usage: `cpu`, `memory`, extended resources, `requests.*`,
  `limits.*`, `pods`, `count/pods`);
- plugin `env`: `VK_TASK_INDEX` and `VC_TASK_INDEX`; plugin `svc`: hostname and subdomain, a
  headless Service `<job>`, a ConfigMap `<job>-svc` of the task hosts mounted at `/etc/volcano`,
  and `VC_<TASK>_HOSTS` / `VC_<TASK>_NUM` from it (`--inject-hosts-env=false` leaves those out).
  Plugin `ssh` is accepted and does nothing (the embedded cluster runs no containers to log into).
Pure functions; `controller.py` writes what they return.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from fractions import Fraction

from runtimekit.kube.objects import (
    Container,
    JsonObject,
    OwnerReference,
    Pod,
    PodGroup,
    PodSpec,
    ResourceList,
    TaskSpec,
    VolcanoJob,
    VolcanoJobSpec,
    VolumeSpec,
    annotations_of,
    labels_of,
    meta,
)
from runtimekit.kube.semantics.quantity import parse_quantity

API_VERSION = "batch.volcano.sh/v1alpha1"
TASK_SPEC, TASK_INDEX, JOB_NAME = "volcano.sh/task-spec", "volcano.sh/task-index", "volcano.sh/job-name"
JOB_NAMESPACE, QUEUE_NAME, JOB_VERSION = "volcano.sh/job-namespace", "volcano.sh/queue-name", "volcano.sh/job-version"
TEMPLATE_UID, RETRY_COUNT = "volcano.sh/template-uid", "volcano.sh/job-retry-count"
GROUP_NAME = "scheduling.k8s.io/group-name"
HOSTS_MOUNT = "/etc/volcano"
_NATIVE = ("cpu", "memory", "ephemeral-storage")


def group_name(job: VolcanoJob) -> str:
    return f"{meta(job).get('name')}-{meta(job).get('uid')}"


def pod_name(job: VolcanoJob, task: str, index: int) -> str:
    return f"{meta(job).get('name')}-{task}-{index}"


def job_owner(job: VolcanoJob) -> OwnerReference:
    return {
        "apiVersion": API_VERSION,
        "kind": "Job",
        "name": meta(job).get("name", ""),
        "uid": meta(job).get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def volume_claims(job: VolcanoJob) -> list[tuple[str, VolumeSpec]]:
    """(claim name, volume spec) per `spec.volumes` entry; unnamed claims are `<job>-pvc-<index>`."""
    volumes = (job.get("spec") or {}).get("volumes") or []
    return [(str(v.get("volumeClaimName") or f"{meta(job).get('name')}-pvc-{i}"), v) for i, v in enumerate(volumes)]


def _containers(spec: PodSpec) -> list[Container]:
    """The containers, then the init containers: what the plugins add environment and mounts to."""
    every = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    return [c for c in every if isinstance(c, dict)]


def make_pod(job: VolcanoJob, task: TaskSpec, index: int, default_scheduler: str) -> Pod:
    """The pod of `task` at `index` (see the module docstring), with the job's plugins applied."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    template = copy.deepcopy(task.get("template") or {})
    task_name = str(task.get("name") or "default")
    template_meta = template.get("metadata") or {}
    pod_spec: PodSpec = template.get("spec") or {}
    pod_spec["schedulerName"] = pod_spec.get("schedulerName") or spec.get("schedulerName") or default_scheduler
    if not pod_spec.get("priorityClassName") and spec.get("priorityClassName"):
        pod_spec["priorityClassName"] = spec["priorityClassName"]
    for position, (claim, volume) in enumerate(volume_claims(job)):
        name = f"{meta(job).get('name')}-volume-{position}"
        pod_spec.setdefault("volumes", []).append({"name": name, "persistentVolumeClaim": {"claimName": claim}})
        for container in pod_spec.get("containers") or []:
            container.setdefault("volumeMounts", []).append({"name": name, "mountPath": volume.get("mountPath", "")})
    name = str(meta(job).get("name"))
    annotations = dict(template_meta.get("annotations") or {})
    annotations.update(
        {
            TASK_INDEX: str(index),
            TASK_SPEC: task_name,
            GROUP_NAME: group_name(job),
            JOB_NAME: name,
            QUEUE_NAME: str(spec.get("queue") or "default"),
            JOB_VERSION: str(int(status.get("version") or 0)),
            TEMPLATE_UID: f"{name}-{task_name}",
            RETRY_COUNT: str(int(status.get("retryCount") or 0)),
        }
    )
    labels = dict(template_meta.get("labels") or {})
    labels.update(
        {
            TASK_INDEX: str(index),
            JOB_NAME: name,
            TASK_SPEC: task_name,
            JOB_NAMESPACE: str(meta(job).get("namespace")),
            QUEUE_NAME: str(spec.get("queue") or "default"),
        }
    )
    pod: Pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(job, task_name, index),
            "namespace": meta(job).get("namespace", ""),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [job_owner(job)],
        },
        "spec": pod_spec,
    }
    plugins = spec.get("plugins") or {}
    if "env" in plugins:
        _env_plugin(pod, index)
    if "svc" in plugins:
        _svc_plugin(pod, job, list(plugins.get("svc") or []))
    return pod


def _env_plugin(pod: Pod, index: int) -> None:
    for container in _containers(pod["spec"]):
        env = container.setdefault("env", [])
        env += [{"name": "VK_TASK_INDEX", "value": str(index)}, {"name": "VC_TASK_INDEX", "value": str(index)}]


def _env_key(task: str) -> str:
    return task.replace("-", "_")


def _svc_plugin(pod: Pod, job: VolcanoJob, arguments: Sequence[str]) -> None:
    spec = pod["spec"]
    spec["hostname"] = spec.get("hostname") or pod["metadata"]["name"]
    spec["subdomain"] = spec.get("subdomain") or meta(job).get("name", "")
    config = f"{meta(job).get('name')}-svc"
    if "--inject-hosts-env=false" not in arguments:
        names = []
        for task in (job.get("spec") or {}).get("tasks") or []:
            key = _env_key(str(task.get("name"))).upper()
            names += [f"VC_{key}_HOSTS", f"VC_{key}_NUM"]
        for container in _containers(spec):
            container.setdefault("env", []).extend(
                {"name": n, "valueFrom": {"configMapKeyRef": {"name": config, "key": n}}} for n in names
            )
    spec.setdefault("volumes", []).append({"name": config, "configMap": {"name": config}})
    for container in _containers(spec):
        container.setdefault("volumeMounts", []).append({"name": config, "mountPath": HOSTS_MOUNT})


def hosts(job: VolcanoJob) -> dict[str, str]:
    """The svc plugin's ConfigMap data: per task `<task>.host`, `VC_<TASK>_HOSTS`, `VC_<TASK>_NUM`."""
    data: dict[str, str] = {}
    name = str(meta(job).get("name"))
    for task in (job.get("spec") or {}).get("tasks") or []:
        task_spec = (task.get("template") or {}).get("spec") or {}
        names = []
        for index in range(int(task.get("replicas") or 0)):
            host = task_spec.get("hostname") or pod_name(job, str(task.get("name")), index)
            names.append(f"{host}.{task_spec.get('subdomain') or name}")
            if task_spec.get("hostname"):
                break
        key = _env_key(str(task.get("name")))
        data[f"{key}.host"] = "\n".join(names)
        data[f"VC_{key.upper()}_HOSTS"] = ",".join(names)
        data[f"VC_{key.upper()}_NUM"] = str(len(names))
    return data


def svc_objects(job: VolcanoJob) -> list[tuple[str, JsonObject]]:
    """(plural, body) of the svc plugin's headless Service and hosts ConfigMap (kinds the kit does not type)."""
    name, namespace = meta(job).get("name"), meta(job).get("namespace")
    arguments = list(((job.get("spec") or {}).get("plugins") or {}).get("svc") or [])
    service: JsonObject = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "ownerReferences": [job_owner(job)]},
        "spec": {
            "clusterIP": "None",
            "selector": {JOB_NAME: name, JOB_NAMESPACE: namespace},
            "publishNotReadyAddresses": "--publish-not-ready-addresses=true" in arguments,
        },
    }
    config: JsonObject = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-svc", "namespace": namespace, "ownerReferences": [job_owner(job)]},
        "data": hosts(job),
    }
    return [("services", service), ("configmaps", config)]


# -- the PodGroup --------------------------------------------------------------------------------
def _usage(pod_spec: PodSpec) -> dict[str, Fraction]:
    """Volcano's pod quota usage: requests (defaulted from limits) as `<name>` and `requests.<name>`,
    cpu and memory limits as `limits.<name>`, and one each of `pods` and `count/pods`."""
    usage: dict[str, Fraction] = {"pods": Fraction(1), "count/pods": Fraction(1)}
    for container in pod_spec.get("containers") or []:
        resources = container.get("resources") or {}
        limits = resources.get("limits") or {}
        requests = {**limits, **(resources.get("requests") or {})}
        for name, amount in requests.items():
            value = parse_quantity(amount)
            for key in (name, f"requests.{name}"):
                usage[key] = usage.get(key, Fraction(0)) + value
        for name, amount in limits.items():
            if name in _NATIVE:
                usage[f"limits.{name}"] = usage.get(f"limits.{name}", Fraction(0)) + parse_quantity(amount)
    return usage


def _add(total: dict[str, Fraction], usage: Mapping[str, Fraction], times: int) -> None:
    for name, value in usage.items():
        total[name] = total.get(name, Fraction(0)) + value * times


def format_quantity(value: Fraction) -> str:
    """A quantity as Kubernetes would print it: whole numbers (in Ki/Mi/Gi when exact), else milli."""
    if value.denominator == 1:
        whole = int(value)
        for suffix, size in (("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
            if whole and whole % size == 0:
                return f"{whole // size}{suffix}"
        return str(whole)
    return f"{int(value * 1000)}m"


def _task_min(task: TaskSpec) -> int:
    value = task.get("minAvailable")
    return int(value) if value is not None else int(task.get("replicas") or 0)


def min_resources(spec: VolcanoJobSpec, priorities: Mapping[str, int]) -> ResourceList:
    """The PodGroup's `minResources`: the usage of `minAvailable` pods, tasks in priority order (their
    template's PriorityClass value, from `priorities`). When `minAvailable` is below the tasks' summed
    minAvailable, the first pods of each task count (up to its replicas); else each task's
    minAvailable first, then its other replicas."""
    tasks = sorted(
        spec.get("tasks") or [],
        key=lambda t: -priorities.get(str(((t.get("template") or {}).get("spec") or {}).get("priorityClassName")), 0),
    )
    wanted = int(spec.get("minAvailable") or 0)
    total: dict[str, Fraction] = {}
    if wanted < sum(_task_min(t) for t in tasks):
        steps = [(t, int(t.get("replicas") or 0)) for t in tasks]
    else:
        steps = [(t, _task_min(t)) for t in tasks]
        steps += [(t, int(t.get("replicas") or 0) - _task_min(t)) for t in tasks]
    counted = 0
    for task, available in steps:
        take = min(max(0, available), wanted - counted)
        _add(total, _usage((task.get("template") or {}).get("spec") or {}), take)
        counted += take
        if counted >= wanted:
            break
    return {name: format_quantity(value) for name, value in sorted(total.items()) if value}


def podgroup(job: VolcanoJob, priorities: Mapping[str, int]) -> PodGroup:
    """The PodGroup of a Job (see the module docstring)."""
    spec = job.get("spec") or {}
    tasks = spec.get("tasks") or []
    body: PodGroup = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": group_name(job),
            "namespace": meta(job).get("namespace", ""),
            "labels": dict(labels_of(job)),
            "annotations": {k: v for k, v in annotations_of(job).items() if not k.startswith("kubectl.kubernetes.io/")},
            "ownerReferences": [job_owner(job)],
        },
        "spec": {
            "minMember": int(spec.get("minAvailable") or 0),
            "minTaskMember": {str(t.get("name")): _task_min(t) for t in tasks},
            "queue": spec.get("queue") or "default",
            "minResources": min_resources(spec, priorities),
        },
    }
    if spec.get("priorityClassName"):
        body["spec"]["priorityClassName"] = spec["priorityClassName"]
    return body
