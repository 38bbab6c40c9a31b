"""`kubectl get` prints kube's own columns (pkg/printers/internalversion/printers.go), in kube's order,
with and without `-o wide`; the kit's GPU columns come after them. The real kubectl prints what the
embedded server's Table says."""

from __future__ import annotations

import httpx2
import pytest

from fixtures.apiserver import Kubectl, make_node, make_pod

EVENT = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": {"name": "web.1"},
    "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default", "fieldPath": "spec.containers{c}"},
    "reason": "Pulled",
    "message": "  Container image pulled  ",
    "type": "Normal",
    "source": {"component": "kubelet", "host": "n1"},
    "count": 3,
    "firstTimestamp": "2024-01-01T00:00:00Z",
    "lastTimestamp": "2024-01-01T00:00:00Z",
}
CRONJOB = """\
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "@hourly"
  timeZone: Etc/UTC
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: backup, image: busybox:1.36}]
"""
REPLICASET = """\
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web}
spec:
  replicas: 0
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: nginx:1.27}]}
"""


def header(kubectl: Kubectl, *args: str) -> list[str]:
    """The header line, split on runs of two or more spaces (column names may hold one space)."""
    first = kubectl("get", *args).stdout.splitlines()[0]
    return [h for h in first.split("  ") if h.strip()]


def row(kubectl: Kubectl, *args: str) -> dict[str, str]:
    """The header and first row, cut where each header name starts (after two spaces or more)."""
    head, first = kubectl("get", *args).stdout.splitlines()[:2]
    starts = [i for i in range(len(head)) if head[i] != " " and (i == 0 or head[max(0, i - 2) : i] == "  ")]
    ends = [*starts[1:], None]
    return {head[a:b].strip(): first[a:b].strip() for a, b in zip(starts, ends, strict=True)}


def clean(names: list[str]) -> list[str]:
    return [n.strip() for n in names]


@pytest.fixture
def event(kube_http: httpx2.Client) -> None:
    assert kube_http.post("/api/v1/namespaces/default/events", json=EVENT).status_code == 201


@pytest.mark.usefixtures("event")
def test_events_have_no_name_column_unless_wide(kubectl: Kubectl) -> None:
    assert clean(header(kubectl, "events")) == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    wide = clean(header(kubectl, "events", "-o", "wide"))
    assert wide == [
        "LAST SEEN",
        "TYPE",
        "REASON",
        "OBJECT",
        "SUBOBJECT",
        "SOURCE",
        "MESSAGE",
        "FIRST SEEN",
        "COUNT",
        "NAME",
    ]
    out = kubectl("get", "events", "-o", "wide").stdout.splitlines()[1]
    for text in ("pod/web", "spec.containers{c}", "kubelet, n1", "Container image pulled", " 3 ", "web.1"):
        assert text in out


@pytest.mark.usefixtures("event")
def test_events_k8s_io_view_prints_the_same_columns(kubectl: Kubectl) -> None:
    assert clean(header(kubectl, "events.events.k8s.io")) == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]


def test_cronjob_columns(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=CRONJOB)
    cells = row(kubectl, "cronjobs", "-o", "wide")
    assert list(cells) == [
        "NAME",
        "SCHEDULE",
        "TIMEZONE",
        "SUSPEND",
        "ACTIVE",
        "LAST SCHEDULE",
        "AGE",
        "CONTAINERS",
        "IMAGES",
        "SELECTOR",
    ]
    assert cells["SCHEDULE"] == "@hourly"
    assert cells["TIMEZONE"] == "Etc/UTC"
    assert cells["SUSPEND"] == "False"  # defaulted, as kube does
    assert cells["ACTIVE"] == "0"
    assert cells["LAST SCHEDULE"] == "<none>"
    assert (cells["CONTAINERS"], cells["IMAGES"], cells["SELECTOR"]) == ("backup", "busybox:1.36", "<none>")


def test_pods_wide_puts_kubes_columns_first(kube_http: httpx2.Client, kubectl: Kubectl) -> None:
    assert kube_http.post("/api/v1/nodes", json=make_node("n1")).status_code == 201
    spec = {
        "nodeName": "n1",
        "containers": [{"name": "c", "image": "x"}],
        "readinessGates": [{"conditionType": "x/lb"}],
    }
    pod = {**make_pod("web"), "spec": spec}
    assert kube_http.post("/api/v1/namespaces/default/pods", json=pod).status_code == 201
    assert clean(header(kubectl, "pods")) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "GPU"]
    cells = row(kubectl, "pods", "-o", "wide")
    assert list(cells) == [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED NODE",
        "READINESS GATES",
        "GPU",
    ]
    assert (cells["NODE"], cells["READINESS GATES"], cells["GPU"]) == ("n1", "0/1", "<none>")
    nodes = clean(header(kubectl, "nodes", "-o", "wide"))
    assert nodes[:10] == [
        "NAME",
        "STATUS",
        "ROLES",
        "AGE",
        "VERSION",
        "INTERNAL-IP",
        "EXTERNAL-IP",
        "OS-IMAGE",
        "KERNEL-VERSION",
        "CONTAINER-RUNTIME",
    ]
    assert nodes[10:] == ["GPUS", "GPU ALLOCATED"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("deploy", "-o", "wide"),
            ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"],
        ),
        (("rs", "-o", "wide"), ["NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]),
        (("svc", "-o", "wide"), ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR"]),
        (
            ("jobs", "-o", "wide"),
            ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"],
        ),
    ],
    ids=["deployments", "replicasets", "services", "jobs"],
)
def test_workload_wide_columns(kubectl: Kubectl, args: tuple[str, ...], expected: list[str]) -> None:
    kubectl("create", "deployment", "web", "--image=nginx:1.27")
    kubectl("create", "service", "clusterip", "web", "--tcp=80:80")
    kubectl("create", "job", "once", "--image=busybox")
    kubectl("apply", "-f", "-", stdin=REPLICASET)
    assert clean(header(kubectl, *args)) == expected


def test_job_and_service_cells(kubectl: Kubectl) -> None:
    kubectl("create", "job", "once", "--image=busybox:1.36")
    cells = row(kubectl, "jobs", "-o", "wide")
    assert (cells["STATUS"], cells["COMPLETIONS"], cells["CONTAINERS"], cells["IMAGES"]) == (
        "Running",
        "0/1",
        "once",
        "busybox:1.36",
    )
    assert cells["SELECTOR"].startswith("batch.kubernetes.io/controller-uid=")
    kubectl("create", "service", "clusterip", "web", "--tcp=80:8080")
    assert row(kubectl, "svc", "web", "-o", "wide")["SELECTOR"] == "app=web"


def test_resource_quota_columns(kube_http: httpx2.Client, kubectl: Kubectl) -> None:
    kubectl("create", "quota", "q", "--hard=cpu=2,limits.memory=4Gi,pods=10")
    status = {"hard": {"cpu": "2", "limits.memory": "4Gi", "pods": "10"}, "used": {"cpu": "500m", "pods": "1"}}
    path = "/api/v1/namespaces/default/resourcequotas/q/status"
    assert kube_http.patch(
        path, json={"status": status}, headers={"Content-Type": "application/merge-patch+json"}
    ).is_success
    cells = row(kubectl, "quota", "q")
    assert list(cells) == ["NAME", "AGE", "REQUEST", "LIMIT"]
    assert (cells["REQUEST"], cells["LIMIT"]) == ("cpu: 500m/2, pods: 1/10", "limits.memory: 0/4Gi")
