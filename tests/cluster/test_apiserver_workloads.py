"""The API server's part of running workloads: the scale subresource, deletion propagation recorded as
finalizers, apps/v1 workload defaults and validation, and Volcano Jobs with their webhooks' defaults
and checks. Expected values are kube-apiserver's and Volcano's (their docs and tests)."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from fixtures.apiserver import Kubectl

NS = "/apis/apps/v1/namespaces/default"
VCJOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
MERGE = {"Content-Type": "application/merge-patch+json"}
JSONPATCH = {"Content-Type": "application/json-patch+json"}


def workload(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
            **spec,
        },
    }
    return body


def vcjob(name: str, **spec: Any) -> dict[str, Any]:
    task = {
        "replicas": 2,
        "name": "worker",
        "template": {"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "OnFailure"}},
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"tasks": [task], **spec},
    }


def created(http: httpx2.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = http.post(path, json=body)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


def refused(http: httpx2.Client, path: str, body: dict[str, Any], code: int = 422) -> str:
    response = http.post(path, json=body)
    assert response.status_code == code, response.text
    message: str = response.json()["message"]
    return message


# scale ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("plural", "kind"), [("deployments", "Deployment"), ("replicasets", "ReplicaSet"), ("statefulsets", "StatefulSet")]
)
def test_scale_subresource_reads_and_writes_spec_replicas(kube_http: httpx2.Client, plural: str, kind: str) -> None:
    body = workload(kind, "web", replicas=2)
    body["spec"]["selector"] = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}],
    }
    body["spec"]["template"]["metadata"]["labels"]["tier"] = "a"
    obj = created(kube_http, f"{NS}/{plural}", body)
    scale = kube_http.get(f"{NS}/{plural}/web/scale").json()
    assert (scale["apiVersion"], scale["kind"]) == ("autoscaling/v1", "Scale")
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 0, "selector": "app=web,tier in (a,b)"}
    assert scale["metadata"]["uid"] == obj["metadata"]["uid"]

    patched = kube_http.patch(f"{NS}/{plural}/web/scale", content=b'{"spec":{"replicas":5}}', headers=MERGE)
    assert patched.status_code == 200, patched.text
    assert patched.json()["spec"]["replicas"] == 5
    after = kube_http.get(f"{NS}/{plural}/web").json()
    assert after["spec"]["replicas"] == 5
    assert after["metadata"]["generation"] == 2

    stale = dict(scale, spec={"replicas": 1})
    conflict = kube_http.put(f"{NS}/{plural}/web/scale", json=stale)
    assert conflict.status_code == 409
    fresh = kube_http.get(f"{NS}/{plural}/web/scale").json()
    put = kube_http.put(f"{NS}/{plural}/web/scale", json=dict(fresh, spec={"replicas": 1}))
    assert put.status_code == 200, put.text
    assert kube_http.get(f"{NS}/{plural}/web").json()["spec"]["replicas"] == 1


def test_scale_refuses_negative_replicas_and_bad_patches(kube_http: httpx2.Client) -> None:
    created(kube_http, f"{NS}/deployments", workload("Deployment", "web"))
    negative = kube_http.patch(f"{NS}/deployments/web/scale", content=b'{"spec":{"replicas":-1}}', headers=MERGE)
    assert negative.status_code == 422
    assert "spec.replicas" in negative.json()["message"]
    ops = json.dumps([{"op": "replace", "path": "/spec/replicas", "value": 3}]).encode()
    assert (
        kube_http.patch(f"{NS}/deployments/web/scale", content=ops, headers=JSONPATCH).json()["spec"]["replicas"] == 3
    )
    missing = kube_http.get(f"{NS}/deployments/nope/scale")
    assert missing.status_code == 404
    assert kube_http.get("/api/v1/namespaces/default/pods/x/scale").status_code == 404  # pods have no scale


def test_discovery_lists_the_scale_subresource_as_autoscaling_v1(kube_http: httpx2.Client) -> None:
    resources = {r["name"]: r for r in kube_http.get("/apis/apps/v1").json()["resources"]}
    for plural in ("deployments", "replicasets", "statefulsets"):
        entry = resources[f"{plural}/scale"]
        assert (entry["group"], entry["version"], entry["kind"]) == ("autoscaling", "v1", "Scale")
        assert sorted(entry["verbs"]) == ["get", "patch", "update"]
    assert "daemonsets/scale" not in resources
    assert resources["controllerrevisions"]["kind"] == "ControllerRevision"


def test_kubectl_scale_changes_the_replicas(kubectl: Kubectl, kube_http: httpx2.Client) -> None:
    created(kube_http, f"{NS}/deployments", workload("Deployment", "web"))
    created(kube_http, f"{NS}/statefulsets", workload("StatefulSet", "db"))
    assert "scaled" in kubectl("scale", "deployment/web", "--replicas=4").stdout
    assert "scaled" in kubectl("scale", "sts/db", "--replicas=3", "--current-replicas=1").stdout
    failed = kubectl("scale", "sts/db", "--replicas=5", "--current-replicas=1", check=False)
    assert failed.returncode != 0
    assert "3" in failed.stderr
    assert kube_http.get(f"{NS}/deployments/web").json()["spec"]["replicas"] == 4
    assert kube_http.get(f"{NS}/statefulsets/db").json()["spec"]["replicas"] == 3


# propagation ------------------------------------------------------------------------------------


def configmap(http: httpx2.Client, name: str, finalizers: list[str] | None = None) -> None:
    meta: dict[str, Any] = {"name": name}
    if finalizers:
        meta["finalizers"] = finalizers
    created(http, CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})


def delete(http: httpx2.Client, name: str, **options: Any) -> httpx2.Response:
    return http.request("DELETE", f"{CONFIGMAPS}/{name}", json=options or None)


@pytest.mark.parametrize(
    ("before", "options", "after"),
    [
        ([], {"propagationPolicy": "Orphan"}, ["orphan"]),
        ([], {"propagationPolicy": "Foreground"}, ["foregroundDeletion"]),
        ([], {"orphanDependents": True}, ["orphan"]),
        (["example.com/keep"], {"propagationPolicy": "Foreground"}, ["example.com/keep", "foregroundDeletion"]),
        (["orphan"], {"propagationPolicy": "Foreground"}, ["foregroundDeletion"]),
        (["example.com/keep", "orphan"], {"propagationPolicy": "Background"}, ["example.com/keep"]),
        (["orphan"], {}, ["orphan"]),
    ],
    ids=["orphan", "foreground", "orphanDependents", "own finalizer kept", "switch", "background drops", "no policy"],
)
def test_propagation_policy_is_recorded_as_finalizers(
    kube_http: httpx2.Client, before: list[str], options: dict[str, Any], after: list[str]
) -> None:
    configmap(kube_http, "cm", before)
    assert delete(kube_http, "cm", **options).status_code == 200
    obj = kube_http.get(f"{CONFIGMAPS}/cm").json()
    assert obj["metadata"]["finalizers"] == after
    assert obj["metadata"]["deletionTimestamp"]


@pytest.mark.parametrize("options", [{"propagationPolicy": "Background"}, {}], ids=["background", "none"])
def test_background_deletes_at_once(kube_http: httpx2.Client, options: dict[str, Any]) -> None:
    configmap(kube_http, "cm")
    assert delete(kube_http, "cm", **options).status_code == 200
    assert kube_http.get(f"{CONFIGMAPS}/cm").status_code == 404


def test_background_after_orphan_finishes_the_deletion(kube_http: httpx2.Client) -> None:
    configmap(kube_http, "cm")
    delete(kube_http, "cm", propagationPolicy="Orphan")
    assert delete(kube_http, "cm", propagationPolicy="Background").status_code == 200
    assert kube_http.get(f"{CONFIGMAPS}/cm").status_code == 404


def test_bad_propagation_options_are_refused(kube_http: httpx2.Client) -> None:
    configmap(kube_http, "cm")
    bad = delete(kube_http, "cm", propagationPolicy="Sometimes")
    assert bad.status_code == 422
    assert 'supported values: "Foreground", "Background", "Orphan"' in bad.json()["message"]
    both = delete(kube_http, "cm", propagationPolicy="Orphan", orphanDependents=True)
    assert both.status_code == 422
    assert kube_http.get(f"{CONFIGMAPS}/cm").status_code == 200
    query = kube_http.delete(f"{CONFIGMAPS}/cm", params={"propagationPolicy": "Orphan"})
    assert query.status_code == 200
    assert kube_http.get(f"{CONFIGMAPS}/cm").json()["metadata"]["finalizers"] == ["orphan"]


# workload defaults and validation ---------------------------------------------------------------


def test_statefulset_and_replicaset_defaults(kube_http: httpx2.Client) -> None:
    sts = created(kube_http, f"{NS}/statefulsets", workload("StatefulSet", "db"))["spec"]
    assert sts["replicas"] == 1
    assert sts["podManagementPolicy"] == "OrderedReady"
    assert sts["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert sts["revisionHistoryLimit"] == 10
    assert sts["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert sts["template"]["spec"]["schedulerName"] == "default-scheduler"
    assert created(kube_http, f"{NS}/replicasets", workload("ReplicaSet", "rs"))["spec"]["replicas"] == 1
    partial = workload("Deployment", "d", strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2}})
    strategy = created(kube_http, f"{NS}/deployments", partial)["spec"]["strategy"]
    assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2, "maxUnavailable": "25%"}}


def _without_selector() -> dict[str, Any]:
    body = workload("Deployment", "bad")
    del body["spec"]["selector"]
    return body


def _mismatch() -> dict[str, Any]:
    body = workload("Deployment", "bad")
    body["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    return body


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (_without_selector(), "spec.selector: Required value"),
        (
            _mismatch(),
            'spec.template.metadata.labels: Invalid value: map[string]string{"app":"bad"}: '
            "`selector` does not match template `labels`",
        ),
        (workload("Deployment", "bad", replicas=-1), "spec.replicas: Invalid value: -1"),
        (
            workload("Deployment", "bad", strategy={"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}}),
            "may not be 0 when `maxSurge` is 0",
        ),
        (
            workload("Deployment", "bad", strategy={"rollingUpdate": {"maxSurge": "5"}}),
            "must be an integer or a percentage",
        ),
        (
            workload("Deployment", "bad", strategy={"type": "Recreate", "rollingUpdate": {}}),
            "may not be specified when strategy `type` is 'Recreate'",
        ),
        (workload("StatefulSet", "bad", podManagementPolicy="Random"), 'Unsupported value: "Random"'),
    ],
    ids=["no selector", "selector mismatch", "negative replicas", "both zero", "not a percent", "recreate", "policy"],
)
def test_invalid_workloads_are_refused(kube_http: httpx2.Client, body: dict[str, Any], expected: str) -> None:
    plural = {"Deployment": "deployments", "StatefulSet": "statefulsets"}[body["kind"]]
    message = refused(kube_http, f"{NS}/{plural}", body)
    assert expected in message
    assert message.startswith(f'{body["kind"]}.apps "bad" is invalid')


def test_template_must_restart_always_and_selector_is_immutable(kube_http: httpx2.Client) -> None:
    body = workload("ReplicaSet", "rs")
    body["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    assert 'spec.template.spec.restartPolicy: Unsupported value: "Never"' in refused(
        kube_http, f"{NS}/replicasets", body
    )
    obj = created(kube_http, f"{NS}/replicasets", workload("ReplicaSet", "rs"))
    obj["spec"]["selector"]["matchLabels"]["extra"] = "x"
    obj["spec"]["template"]["metadata"]["labels"]["extra"] = "x"
    update = kube_http.put(f"{NS}/replicasets/rs", json=obj)
    assert update.status_code == 422
    assert "spec.selector" in update.json()["message"]
    assert "field is immutable" in update.json()["message"]


def test_statefulset_spec_outside_the_mutable_fields_is_forbidden(kube_http: httpx2.Client) -> None:
    created(kube_http, f"{NS}/statefulsets", workload("StatefulSet", "db", serviceName="db"))
    changed = kube_http.patch(f"{NS}/statefulsets/db", content=b'{"spec":{"serviceName":"other"}}', headers=MERGE)
    assert changed.status_code == 422
    assert "updates to statefulset spec for fields other than 'replicas'" in changed.json()["message"]
    scaled = kube_http.patch(f"{NS}/statefulsets/db", content=b'{"spec":{"replicas":3}}', headers=MERGE)
    assert scaled.status_code == 200


# Volcano Jobs -----------------------------------------------------------------------------------


def test_volcano_job_is_served_with_its_webhook_defaults(kube_http: httpx2.Client) -> None:
    job = vcjob("train")
    job["spec"]["tasks"].append({"replicas": 1, "template": job["spec"]["tasks"][0]["template"]})
    obj = created(kube_http, VCJOBS, job)
    spec = obj["spec"]
    assert (spec["queue"], spec["maxRetry"], spec["minAvailable"]) == ("default", 3, 3)
    assert [(t["name"], t["minAvailable"], t["maxRetry"]) for t in spec["tasks"]] == [
        ("worker", 2, 3),
        ("default1", 1, 3),
    ]
    assert "schedulerName" not in spec
    assert obj["metadata"]["generation"] == 1
    resources = {r["name"]: r for r in kube_http.get("/apis/batch.volcano.sh/v1alpha1").json()["resources"]}
    assert resources["jobs"]["shortNames"] == ["vcjob", "vj"]
    assert "jobs/status" in resources


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"minAvailable": 5}, "job 'minAvailable' should not be greater than total replicas in tasks;"),
        ({"tasks": []}, "No task specified in job spec"),
        ({"policies": [{"event": "PodEvicted", "action": "Explode"}]}, "invalid policy action 'Explode'"),
        (
            {"policies": [{"event": "PodEvicted", "action": "RestartJob", "exitCode": 3}]},
            "must not specify event and exitCode",
        ),
        ({"policies": [{"exitCode": 0, "action": "RestartJob"}]}, "0 is not a valid error code"),
        ({"plugins": {"mpi": []}}, "unable to find job plugin: mpi"),
    ],
    ids=["minAvailable", "no tasks", "bad action", "event and exit code", "exit code 0", "unknown plugin"],
)
def test_volcano_job_webhook_refusals(kube_http: httpx2.Client, spec: dict[str, Any], expected: str) -> None:
    message = refused(kube_http, VCJOBS, vcjob("bad", **spec), code=400)
    assert message.startswith('admission webhook "validatejob.volcano.sh" denied the request:')
    assert expected in message


def test_volcano_duplicate_task_names_are_refused(kube_http: httpx2.Client) -> None:
    job = vcjob("bad")
    job["spec"]["tasks"].append(dict(job["spec"]["tasks"][0]))
    assert "duplicated task name worker" in refused(kube_http, VCJOBS, job, code=400)


def test_volcano_job_updates_may_change_only_replicas_and_min_available(kube_http: httpx2.Client) -> None:
    created(kube_http, VCJOBS, vcjob("train"))
    grow = kube_http.patch(f"{VCJOBS}/train", content=b'{"spec":{"minAvailable":3}}', headers=MERGE)
    assert grow.status_code == 400  # more than the replicas
    ops = json.dumps(
        [
            {"op": "replace", "path": "/spec/tasks/0/replicas", "value": 4},
            {"op": "replace", "path": "/spec/minAvailable", "value": 3},
        ]
    ).encode()
    assert kube_http.patch(f"{VCJOBS}/train", content=ops, headers=JSONPATCH).status_code == 200
    queue = kube_http.patch(f"{VCJOBS}/train", content=b'{"spec":{"queue":"other"}}', headers=MERGE)
    assert queue.status_code == 400
    assert "job updates may not change fields other than `minAvailable`" in queue.json()["message"]


def test_kubectl_lists_volcano_jobs_with_their_columns(kubectl: Kubectl, kube_http: httpx2.Client) -> None:
    created(kube_http, VCJOBS, vcjob("train"))
    kube_http.patch(
        f"{VCJOBS}/train/status",
        content=b'{"status":{"state":{"phase":"Running"},"minAvailable":2,"running":2}}',
        headers=MERGE,
    )
    table = kubectl("get", "vcjob").stdout.splitlines()
    assert table[0].split() == ["NAME", "STATUS", "MINAVAILABLE", "RUNNINGS", "AGE"]
    assert table[1].split()[:4] == ["train", "Running", "2", "2"]
    assert "QUEUE" in kubectl("get", "vj", "-o", "wide").stdout
    assert "Running" in kubectl("describe", "vcjob", "train").stdout
