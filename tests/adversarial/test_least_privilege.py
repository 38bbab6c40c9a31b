"""What a taken-over component could do, read from the manifests as they are installed (deploy-all.sh
render and the Helm chart's defaults): the controller can make Jobs (so pods) only in its Jobs'
namespace, which holds no ServiceAccount to borrow; the exporter reaches only the runtime's exporter
socket, as a non-root user without group 0, read-only; the device plugin mounts the runtime's socket
folder read-only. The runtime side of the exporter socket is tested in test_runtime_sockets.py."""

from __future__ import annotations

from typing import Any

import pytest

from deploy.manifests import containers, documents, render_chart, render_deploy, workloads
from deploy.recorder import Attributes, RbacPolicy

JOBS_NAMESPACE = "lj-runtimekit-jobs"
RENDERS = ["deploy", "helm"]


@pytest.fixture(scope="module", params=RENDERS)
def objs(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return documents(render_deploy() if request.param == "deploy" else render_chart())


def workload(objs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in workloads(objs) if o["metadata"]["name"] == name)


def policy(objs: list[dict[str, Any]], name: str) -> RbacPolicy:
    obj = workload(objs, name)
    return RbacPolicy.for_service_account(
        objs, obj["metadata"]["namespace"], obj["spec"]["template"]["spec"]["serviceAccountName"]
    )


@pytest.mark.parametrize("namespace", ["kube-system", "default", "other"])
def test_the_controller_cannot_make_jobs_or_pods_outside_its_jobs_namespace(
    objs: list[dict[str, Any]], namespace: str
) -> None:
    controller = policy(objs, "lj-runtimekit-controller")
    assert controller.allows(Attributes("create", "batch", "jobs", JOBS_NAMESPACE, ""))
    for verb, group, resource in [("create", "batch", "jobs"), ("create", "", "pods"), ("create", "batch", "cronjobs")]:
        assert not controller.allows(Attributes(verb, group, resource, namespace, "")), (verb, resource, namespace)
    assert not controller.allows(Attributes("create", "", "pods", JOBS_NAMESPACE, ""))
    args = containers(workload(objs, "lj-runtimekit-controller"))[0]["args"]
    assert f"--namespace={JOBS_NAMESPACE}" in args


def test_the_jobs_namespace_holds_nothing_a_pod_could_borrow(objs: list[dict[str, Any]]) -> None:
    inside = sorted(
        (o["kind"], o["metadata"]["name"]) for o in objs if o["metadata"].get("namespace") == JOBS_NAMESPACE
    )
    assert inside == [("Role", "lj-runtimekit-controller-jobs"), ("RoleBinding", "lj-runtimekit-controller-jobs")]
    binding = next(o for o in objs if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == JOBS_NAMESPACE)
    assert [(s["kind"], s["name"]) for s in binding["subjects"]] == [("ServiceAccount", "lj-runtimekit-controller")]
    assert any(o["kind"] == "Namespace" and o["metadata"]["name"] == JOBS_NAMESPACE for o in objs)


def mounts(obj: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    """host path -> (mount path, read-only) of every hostPath volume a workload mounts."""
    spec = obj["spec"]["template"]["spec"]
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    return {
        host[m["name"]]: (m["mountPath"], bool(m.get("readOnly")))
        for c in containers(obj)
        for m in c.get("volumeMounts", [])
        if m["name"] in host
    }


def test_the_exporter_reaches_only_its_socket_as_a_plain_user(objs: list[dict[str, Any]]) -> None:
    exporter = workload(objs, "lj-runtimekit-exporter-ds")
    pod = exporter["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert 0 not in pod["securityContext"].get("supplementalGroups", [])
    assert pod["securityContext"]["runAsGroup"] != 0
    assert mounts(exporter) == {"/run/lj-runtimekit/exporter": ("/run/lj-runtimekit/exporter", True)}
    runtime_args = containers(workload(objs, "lj-runtimekit-runtime-ds"))[0]["args"]
    assert f"--exporter-socket-group={pod['securityContext']['runAsGroup']}" in runtime_args
    assert not pod.get("automountServiceAccountToken", True)  # and no API access at all


def test_the_device_plugin_mounts_the_runtime_socket_folder_read_only(objs: list[dict[str, Any]]) -> None:
    plugin = mounts(workload(objs, "lj-runtimekit-device-plugin-ds"))
    assert plugin["/run/lj-runtimekit"] == ("/run/lj-runtimekit", True)
    assert plugin["/var/lib/kubelet/device-plugins"] == ("/var/lib/kubelet/device-plugins", False)  # it binds there


SCHEDULER_CODE = [
    ("update", "", "configmaps", "lj-runtimekit-scheduler-config"),
    ("patch", "", "configmaps", "lj-runtimekit-scheduler-config"),
    ("update", "", "configmaps", "lj-runtimekit-scheduler-plugins"),
    ("patch", "", "configmaps", "lj-runtimekit-scheduler-plugins"),
    ("create", "", "configmaps", ""),
    ("update", "apps", "deployments", "lj-runtimekit-scheduler-framework"),
    ("patch", "apps", "deployments", "lj-runtimekit-scheduler-framework"),
    ("create", "", "pods/exec", ""),
]


def test_no_kit_component_can_change_the_code_the_scheduler_runs(objs: list[dict[str, Any]]) -> None:
    """The conf and the plugins ConfigMaps decide what code the scheduler imports (docs/security.md#custom-plugins):
    no ServiceAccount of the kit may write them, nor the scheduler's Deployment, nor exec into its pods; its
    root filesystem and both mounts are read-only, so nothing in the pod adds a module either."""
    scheduler = workload(objs, "lj-runtimekit-scheduler-framework")
    namespace = scheduler["metadata"]["namespace"]
    for obj in workloads(objs):
        grants = policy(objs, obj["metadata"]["name"])
        for verb, group, resource, name in SCHEDULER_CODE:
            attributes = Attributes(verb, group, resource, namespace, name)
            assert not grants.allows(attributes), (obj["metadata"]["name"], attributes)
    (container,) = containers(scheduler)
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    args = dict(a.split("=", 1) for a in container["args"] if a.startswith("--") and "=" in a)
    read_only = {m["mountPath"]: bool(m.get("readOnly")) for m in container["volumeMounts"]}
    assert read_only[args["--plugins-dir"]] is True
    assert read_only[args["--config"].rsplit("/", 1)[0]] is True
