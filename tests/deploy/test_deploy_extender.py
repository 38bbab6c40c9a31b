"""Extender mode as installed (`deploy-all.sh --scheduler-mode=extender`, Helm `scheduler.mode=extender`,
`kubectl apply -k deploy/scheduler/extender`): the scheduler component becomes the extender behind its
Service plus kube-scheduler with a KubeSchedulerConfiguration that wires the extender in (what
`runtimekit extender --print-kube-scheduler-config` prints), the same objects every way, manifests
that validate, args that build, checksums that roll both workloads, and RBAC that grants the extender
exactly what it calls (run from the rendered args behind a recording proxy)."""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import kubernetes_validate
import kubernetes_validate.utils
import pytest
import yaml

from deploy.containers import materialise, parse_args
from deploy.manifests import (
    CHART,
    DEPLOY,
    KUBERNETES_VERSIONS,
    by_key,
    config_data,
    containers,
    documents,
    helm,
    normalised,
    other_mounts,
    render_chart,
    render_deploy,
    run_deploy_all,
    workloads,
)
from deploy.recorder import RbacPolicy, RecordingProxy
from deploy.test_deploy_rbac_table import TABLE
from deploy.test_deploy_rollout import annotation, configmap_checksums, data_checksum
from fixtures.apiserver import KUBECTL_BINARIES, Kubectl, http_client, make_node
from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.model import NodeInventory
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.extender.interest import managed_resources
from runtimekit.scheduler.extender.schedconfig import kube_scheduler_config

P = KitProtocol.default()
MODE = "--scheduler-mode=extender"
FOLDER = DEPLOY / "scheduler" / "extender"
EXTENDER, KUBE_SCHEDULER = "lj-runtimekit-extender", "lj-runtimekit-kube-scheduler"
KUBE_SCHEDULER_IMAGE = "registry.k8s.io/kube-scheduler:v1.32.0"
SCHEDULER_OBJECTS = {
    ("ServiceAccount", "kube-system", EXTENDER),
    ("ClusterRole", "", EXTENDER),
    ("ClusterRoleBinding", "", EXTENDER),
    ("Role", "kube-system", EXTENDER),
    ("RoleBinding", "kube-system", EXTENDER),
    ("ServiceAccount", "kube-system", KUBE_SCHEDULER),
    ("ClusterRoleBinding", "", KUBE_SCHEDULER),
    ("ClusterRoleBinding", "", f"{KUBE_SCHEDULER}-volumes"),
    ("Role", "kube-system", KUBE_SCHEDULER),
    ("RoleBinding", "kube-system", KUBE_SCHEDULER),
    ("ConfigMap", "kube-system", "lj-runtimekit-extender-config"),
    ("Deployment", "kube-system", EXTENDER),
    ("Service", "kube-system", EXTENDER),
    ("Deployment", "kube-system", KUBE_SCHEDULER),
}


def workload(objs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in workloads(objs) if o["metadata"]["name"] == name)


def configmap(objs: list[dict[str, Any]], namespace: str = "kube-system") -> dict[str, str]:
    return dict(by_key(objs)[("ConfigMap", namespace, "lj-runtimekit-extender-config")]["data"])


def test_extender_mode_replaces_the_scheduler_component_only() -> None:
    standalone, extender = by_key(documents(render_deploy())), by_key(documents(render_deploy(MODE)))
    scheduler = set(by_key(documents(render_deploy("--components=scheduler"))))
    assert set(by_key(documents(render_deploy(MODE, "--components=scheduler")))) == SCHEDULER_OBJECTS
    assert set(extender) == (set(standalone) - scheduler) | SCHEDULER_OBJECTS
    for k in set(standalone) - scheduler:
        assert extender[k] == standalone[k], k
    assert render_deploy(MODE).count("# Source: deploy/scheduler/extender/") == 3


@pytest.mark.parametrize(
    ("args", "namespace"),
    [pytest.param((), "kube-system", id="defaults"), pytest.param(("--namespace=gpu-system",), "gpu-system", id="ns")],
)
def test_kube_schedulers_configuration_is_what_the_extender_prints(args: tuple[str, ...], namespace: str) -> None:
    objs = documents(render_deploy(MODE, "--components=scheduler", *args))
    data = configmap(objs, namespace)
    url = f"http://lj-runtimekit-extender.{namespace}.svc:8888/lj-runtimekit"
    assert yaml.safe_load(data["kube-scheduler-config.yaml"]) == kube_scheduler_config(
        P, url, lease_namespace=namespace
    )
    service = by_key(objs)[("Service", namespace, EXTENDER)]
    assert service["spec"]["ports"][0]["port"] == 8888
    chart = yaml.safe_load((DEPLOY.parent / "charts" / "lj-runtimekit" / "values.yaml").read_text())
    assert chart["scheduler"]["extender"]["managedResources"] == managed_resources(P)


def test_the_protocol_of_extender_mode_agrees_with_the_other_components(capsys: pytest.CaptureFixture[str]) -> None:
    from runtimekit.cli.main import main

    code = main(["protocol", "check", str(FOLDER / "02-configmap.yaml"), str(DEPLOY / "scheduler/02-configmap.yaml")])
    assert code == 0, capsys.readouterr()


def test_images_are_replaced_and_the_checksums_roll_both_workloads() -> None:
    image, kube = "registry.example.com/gpu/runtimekit:2", "registry.example.com/kube-scheduler:v1.35.1"
    rendered = render_deploy(MODE, "--components=scheduler", f"--image={image}", f"--kube-scheduler-image={kube}")
    objs = documents(rendered)
    assert {c["image"] for c in containers(workload(objs, EXTENDER))} == {image}
    assert {c["image"] for c in containers(workload(objs, KUBE_SCHEDULER))} == {kube}
    (checksum,) = configmap_checksums(rendered).values()
    assert {annotation(w) for w in workloads(objs)} == {checksum}
    written = data_checksum((FOLDER / "02-configmap.yaml").read_text())
    assert {annotation(w) for w in workloads(documents((FOLDER / "03-deployment.yaml").read_text()))} == {written}
    default = documents(render_deploy(MODE, "--components=scheduler"))
    assert {c["image"] for c in containers(workload(default, KUBE_SCHEDULER))} == {KUBE_SCHEDULER_IMAGE}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param([MODE.replace("extender", "both")], "neither standalone nor extender", id="bad-mode"),
        pytest.param([MODE, "--preset=hami"], "takes neither --preset", id="preset"),
        pytest.param(
            [MODE, f"--scheduler-plugins={DEPLOY.parent / 'examples' / 'plugins'}"], "takes neither", id="plugins"
        ),
        pytest.param(["--kube-scheduler-image=kube-scheduler"], "not an image reference", id="bad-image"),
    ],
)
def test_usage_errors(args: list[str], message: str) -> None:
    done = run_deploy_all("render", *args)
    assert done.returncode == 2
    assert message in done.stderr


def test_the_chart_renders_the_objects_of_deploy_all() -> None:
    helm = normalised(documents(render_chart("--set", "scheduler.mode=extender")))
    deploy = normalised(documents(render_deploy(MODE)))
    assert set(helm) == set(deploy)
    for k, obj in deploy.items():
        assert helm[k] == obj, k
    namespaced = normalised(
        documents(render_chart("--set", "scheduler.mode=extender", "--set", "namespace=gpu-system"))
    )
    assert namespaced == normalised(documents(render_deploy(MODE, "--namespace=gpu-system")))


def test_the_chart_refuses_a_preset_in_extender_mode(tmp_path: Path) -> None:
    done = helm(
        tmp_path, "template", "x", str(CHART), "--set", "scheduler.mode=extender", "--set", "protocol.preset=hami"
    )
    assert done.returncode != 0
    assert "--print-kube-scheduler-config" in done.stderr


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_manifest_validates(version: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            kubernetes_validate.utils, "schema_contents", functools.cache(kubernetes_validate.utils.schema_contents)
        )
        for obj in documents(render_deploy(MODE, "--components=scheduler")):
            kubernetes_validate.validate(obj, version, strict=True)


def test_the_extenders_args_build_the_extender(tmp_path: Path) -> None:
    from runtimekit.cli.extender import extender_config
    from runtimekit.scheduler.build import KubeConnection, build_extender

    objs = documents(render_deploy(MODE))
    obj = workload(objs, EXTENDER)
    args = materialise(containers(obj)[0]["args"], config_data(objs, obj), tmp_path, other_mounts(objs, obj))
    command, parsed = parse_args(args)
    assert command == "extender"
    config = extender_config(parsed)
    assert config.scheduler.leader_election.enabled
    inner = replace(config.scheduler, kube=KubeConnection(master="http://127.0.0.1:9"))
    built = build_extender(replace(config, scheduler=inner, listen="127.0.0.1:0"))  # never started
    try:
        assert [p.name for p in built.framework.plugins.every.flat] == ["gpushare", "mig"]
        assert built.options.signer is not None
        assert built.options.url_prefix == "/lj-runtimekit"
    finally:
        built.stop()


# -- RBAC ---------------------------------------------------------------------------------------------
def policy(objs: list[dict[str, Any]]) -> RbacPolicy:
    obj = workload(objs, EXTENDER)
    return RbacPolicy.for_service_account(objs, "kube-system", obj["spec"]["template"]["spec"]["serviceAccountName"])


def test_the_extender_is_granted_every_permission_of_the_call_site_table() -> None:
    grants = policy(documents(render_deploy(MODE))).grants
    needed = {need for components, needs in TABLE.values() if "extender" in components for need in needs}
    assert {(g.verb, g.group, g.resource) for g in grants} == needed


@pytest.fixture
def proxy(apiserver: ApiServer) -> Iterator[RecordingProxy]:
    recorder = RecordingProxy(apiserver.url).start()
    yield recorder
    recorder.stop()


def test_the_extender_is_granted_exactly_what_it_calls(
    apiserver: ApiServer, proxy: RecordingProxy, tmp_path: Path
) -> None:
    from deploy.test_deploy_rbac import HAMI_ONLY, assert_exact
    from runtimekit.cli.extender import extender_config
    from runtimekit.kube.http import KubeHttp
    from runtimekit.scheduler.build import build_extender
    from runtimekit.scheduler.extender.caller import KubeSchedulerCaller

    objs = documents(render_deploy(MODE))
    obj = workload(objs, EXTENDER)
    args = materialise(containers(obj)[0]["args"], config_data(objs, obj), tmp_path, other_mounts(objs, obj))
    config = extender_config(parse_args(args)[1])
    election = replace(config.scheduler.leader_election, renew_every=0.2)
    http = KubeHttp.connect(server=proxy.url)
    inner = replace(config.scheduler, kube=http, leader_election=election)
    with http_client(apiserver.url) as api:
        devices = NodeInventory.simulated("n1", "H200", 1).to_annotation()
        node = make_node("n1", labels={P.labels.gpu_model: "H200"}, annotations={P.annotations.node_devices: devices})
        assert api.post("/api/v1/nodes", json=node).status_code == 201
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "schedulerName": P.scheduler_name,
                "containers": [{"name": "main", "image": "cuda", "resources": {"limits": {P.resources.gpu: "1"}}}],
            },
        }
        created = api.post("/api/v1/namespaces/default/pods", json=pod).json()
        extender = build_extender(replace(config, scheduler=inner, listen="127.0.0.1:0")).start()
        caller = KubeSchedulerCaller(f"http://127.0.0.1:{extender.port}/lj-runtimekit")
        try:
            assert extender.serving(15)
            wait_for(lambda: extender.term is not None and extender.term.live.queue.get(created["metadata"]["uid"]))
            assert caller.schedule(created, [node]) == "n1"
        finally:
            caller.close()
            extender.stop()  # releases the Lease: get and update
            http.close()
        assert api.get("/api/v1/namespaces/default/pods/p").json()["spec"]["nodeName"] == "n1"
    assert_exact(policy(objs), proxy.seen(), HAMI_ONLY)


# -- kustomize and kubectl -----------------------------------------------------------------------------
@pytest.mark.parametrize("version", sorted(KUBECTL_BINARIES)[-1:])
def test_the_kustomize_base_renders_what_deploy_all_renders(version: str) -> None:
    done = subprocess.run(
        [str(KUBECTL_BINARIES[version]), "kustomize", str(FOLDER)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert by_key(documents(done.stdout)) == by_key(documents(render_deploy(MODE, "--components=scheduler")))


def test_the_kustomize_base_lists_every_manifest() -> None:
    listed = yaml.safe_load((FOLDER / "kustomization.yaml").read_text())["resources"]
    assert listed == sorted(p.name for p in FOLDER.glob("[0-9][0-9]-*.yaml"))


def test_deploy_is_idempotent_and_restart_restarts_both_workloads(kubectl: Kubectl) -> None:
    env = {"HOME": str(kubectl.home), "KUBECTL": str(kubectl.default_binary)}

    def deploy_all(*args: str) -> str:
        done = run_deploy_all(*args, MODE, "--components=scheduler", f"--kubeconfig={kubectl.kubeconfig}", env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    assert deploy_all("deploy").count(" created\n") == len(SCHEDULER_OBJECTS)
    assert all(line.endswith(" unchanged") for line in deploy_all("deploy").strip().splitlines())
    assert deploy_all("restart").count(" restarted\n") == 2
    deploy_all("delete")
