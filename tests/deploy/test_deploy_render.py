"""deploy/deploy-all.sh render and the Helm chart: the same objects both ways, overrides applied everywhere,
component selection, and clear usage errors."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.manifests import (
    CHART,
    DEFAULT_IMAGE,
    DEFAULT_NAMESPACE,
    DEPLOY,
    DEPLOY_ALL,
    ROOT,
    by_key,
    containers,
    documents,
    helm,
    normalised,
    render_chart,
    render_deploy,
    render_helm,
    run_deploy_all,
    tool,
    workloads,
)

EXPECTED = {
    "crds": {
        ("CustomResourceDefinition", "", "podgroups.scheduling.volcano.sh"),
        ("CustomResourceDefinition", "", "queues.scheduling.volcano.sh"),
    },
    "runtime": {
        ("ServiceAccount", "kube-system", "lj-runtimekit-runtime"),
        ("ClusterRole", "", "lj-runtimekit-runtime"),
        ("ClusterRoleBinding", "", "lj-runtimekit-runtime"),
        ("ConfigMap", "kube-system", "lj-runtimekit-runtime-config"),
        ("DaemonSet", "kube-system", "lj-runtimekit-runtime-ds"),
    },
    "deviceplugin": {
        ("ServiceAccount", "kube-system", "lj-runtimekit-device-plugin"),
        ("ClusterRole", "", "lj-runtimekit-device-plugin"),
        ("ClusterRoleBinding", "", "lj-runtimekit-device-plugin"),
        ("ConfigMap", "kube-system", "lj-runtimekit-device-plugin-config"),
        ("DaemonSet", "kube-system", "lj-runtimekit-device-plugin-ds"),
    },
    "scheduler": {
        ("ServiceAccount", "kube-system", "lj-runtimekit-scheduler"),
        ("ClusterRole", "", "lj-runtimekit-scheduler"),
        ("ClusterRoleBinding", "", "lj-runtimekit-scheduler"),
        ("Role", "kube-system", "lj-runtimekit-scheduler"),
        ("RoleBinding", "kube-system", "lj-runtimekit-scheduler"),
        ("ConfigMap", "kube-system", "lj-runtimekit-scheduler-config"),
        ("Deployment", "kube-system", "lj-runtimekit-scheduler-framework"),
    },
    "exporter": {
        ("ServiceAccount", "kube-system", "lj-runtimekit-exporter"),
        ("ConfigMap", "kube-system", "lj-runtimekit-exporter-config"),
        ("DaemonSet", "kube-system", "lj-runtimekit-exporter-ds"),
        ("Service", "kube-system", "lj-runtimekit-exporter"),
    },
    "controller": {
        ("Namespace", "", "lj-runtimekit-jobs"),
        ("Role", "lj-runtimekit-jobs", "lj-runtimekit-controller-jobs"),
        ("RoleBinding", "lj-runtimekit-jobs", "lj-runtimekit-controller-jobs"),
        ("ServiceAccount", "kube-system", "lj-runtimekit-controller"),
        ("ClusterRole", "", "lj-runtimekit-controller"),
        ("ClusterRoleBinding", "", "lj-runtimekit-controller"),
        ("Role", "kube-system", "lj-runtimekit-controller"),
        ("RoleBinding", "kube-system", "lj-runtimekit-controller"),
        ("Role", "default", "lj-runtimekit-controller-events"),
        ("RoleBinding", "default", "lj-runtimekit-controller-events"),
        ("ConfigMap", "kube-system", "lj-runtimekit-controller-config"),
        ("Deployment", "kube-system", "lj-runtimekit-controller"),
    },
    "webhook": {
        ("ServiceAccount", "kube-system", "lj-runtimekit-webhook"),
        ("ClusterRole", "", "lj-runtimekit-webhook"),
        ("ClusterRoleBinding", "", "lj-runtimekit-webhook"),
        ("ConfigMap", "kube-system", "lj-runtimekit-webhook-config"),
        ("Deployment", "kube-system", "lj-runtimekit-webhook"),
        ("Service", "kube-system", "lj-runtimekit-webhook"),
        ("MutatingWebhookConfiguration", "", "lj-runtimekit-webhook"),
        ("ValidatingWebhookConfiguration", "", "lj-runtimekit-webhook"),
    },
}
ALL = set().union(*EXPECTED.values())


def args_of(objs: list[dict[str, Any]], name: str) -> list[str]:
    workload = next(o for o in workloads(objs) if o["metadata"]["name"] == name)
    return list(containers(workload)[0]["args"])


@pytest.fixture(scope="module")
def helm_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("helm-home")


# -- deploy-all.sh render ----------------------------------------------------------------------


def test_render_prints_every_component_in_install_order() -> None:
    text = render_deploy()
    objs = documents(text)
    assert set(by_key(objs)) == ALL
    sources = [line.split("deploy/", 1)[1].split("/")[0] for line in text.splitlines() if line.startswith("# Source:")]
    assert list(dict.fromkeys(sources)) == list(EXPECTED)
    assert objs[0]["kind"] == "CustomResourceDefinition"


def test_the_seed_names_of_the_workloads() -> None:
    names = {(o["kind"], o["metadata"]["name"]) for o in workloads(documents(render_deploy()))}
    assert names == {
        ("DaemonSet", "lj-runtimekit-runtime-ds"),
        ("DaemonSet", "lj-runtimekit-device-plugin-ds"),
        ("DaemonSet", "lj-runtimekit-exporter-ds"),
        ("Deployment", "lj-runtimekit-scheduler-framework"),
        ("Deployment", "lj-runtimekit-controller"),
        ("Deployment", "lj-runtimekit-webhook"),
    }


@pytest.mark.parametrize(
    ("components", "expected"),
    [
        pytest.param("scheduler", ["scheduler"], id="one"),
        pytest.param("controller,crds", ["crds", "controller"], id="install-order"),
        pytest.param("device-plugin,runtime", ["runtime", "deviceplugin"], id="alias"),
    ],
)
def test_components_select_a_subset(components: str, expected: list[str]) -> None:
    objs = documents(render_deploy(f"--components={components}"))
    assert set(by_key(objs)) == set().union(*(EXPECTED[c] for c in expected))


def test_image_and_namespace_are_replaced_everywhere() -> None:
    image, namespace = "registry.example.com/gpu/runtimekit:1.2.3", "gpu-system"
    text = render_deploy(f"--image={image}", f"--namespace={namespace}")
    assert DEFAULT_IMAGE not in text
    # kube-system stays only where the webhook leaves namespaces alone (see the test below)
    excluded = f"values: [{DEFAULT_NAMESPACE}, {namespace}, lj-runtimekit-jobs]"
    assert DEFAULT_NAMESPACE not in text.replace(excluded, "")
    objs = documents(text)
    for workload in workloads(objs):
        assert {c["image"] for c in containers(workload)} == {image}
    for obj in objs:
        ns = obj["metadata"].get("namespace")
        if ns is not None and not obj["metadata"]["name"].endswith(("-events", "-jobs")):
            assert ns == namespace, obj["metadata"]
        for subject in obj.get("subjects") or []:
            assert subject["namespace"] == namespace
    assert f"--image={image}" in args_of(objs, "lj-runtimekit-controller")
    assert "--namespace=lj-runtimekit-jobs" in args_of(objs, "lj-runtimekit-controller")
    assert f"--lease-namespace={namespace}" in args_of(objs, "lj-runtimekit-controller")
    assert f"--lease-namespace={namespace}" in args_of(objs, "lj-runtimekit-scheduler-framework")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param([], "give an action", id="no-action"),
        pytest.param(["install"], "unknown argument 'install'", id="bad-action"),
        pytest.param(["render", "delete"], "one action only", id="two-actions"),
        pytest.param(["render", "--components=gpu"], "unknown component 'gpu'", id="bad-component"),
        pytest.param(["render", "--namespace=Kube_System"], "not a valid namespace", id="bad-namespace"),
        pytest.param(["render", "--image=runtimekit"], "no repository path", id="image-without-repo"),
        pytest.param(["render", "--image=a/b:c d"], "not an image reference", id="bad-image"),
        pytest.param(["render", "--kubeconfig=/nonexistent"], "cannot be read", id="bad-kubeconfig"),
        pytest.param(["render", "--frobnicate"], "unknown argument '--frobnicate'", id="bad-flag"),
        pytest.param(["render", "--scheduler-plugins=/nonexistent"], "is not a folder", id="no-plugins-folder"),
        pytest.param(["render", f"--scheduler-plugins={DEPLOY}"], "has no Python module", id="no-plugin-modules"),
    ],
)
def test_usage_errors_exit_2_with_a_message(args: list[str], message: str) -> None:
    done = run_deploy_all(*args)
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stdout == ""


def test_help_prints_usage() -> None:
    done = run_deploy_all("--help")
    assert done.returncode == 0
    assert "deploy|delete|render|restart" in done.stdout


def test_deploy_needs_kubectl() -> None:
    done = run_deploy_all("deploy", env={"KUBECTL": "/nonexistent/kubectl"})
    assert done.returncode == 2
    assert "not found" in done.stderr


# -- Helm against deploy/ ----------------------------------------------------------------------


def test_chart_defaults_render_the_objects_of_deploy() -> None:
    helm_objs = normalised(documents(render_chart()))
    deploy_objs = normalised(documents(render_deploy()))
    assert set(helm_objs) == set(deploy_objs)
    for k, obj in deploy_objs.items():
        assert helm_objs[k] == obj, k


def test_chart_overrides_match_deploy_all_overrides() -> None:
    image, namespace = "registry.example.com/gpu/runtimekit", "gpu-system"
    helm_objs = normalised(
        documents(
            render_chart(
                "--set",
                f"image.repository={image}",
                "--set",
                "image.tag=2.0.0",
                "--set",
                f"namespace={namespace}",
            )
        )
    )
    deploy_objs = normalised(documents(render_deploy(f"--image={image}:2.0.0", f"--namespace={namespace}")))
    assert helm_objs == deploy_objs


@pytest.mark.parametrize("namespace", [DEFAULT_NAMESPACE, "gpu-system"])
def test_the_webhook_never_judges_kube_system_nor_the_kits_namespaces(namespace: str) -> None:
    objs = documents(render_deploy(f"--namespace={namespace}"))
    configurations = [o for o in objs if o["kind"].endswith("WebhookConfiguration")]
    assert configurations
    for configuration in configurations:
        for webhook in configuration["webhooks"]:
            (expression,) = webhook["namespaceSelector"]["matchExpressions"]
            assert expression["operator"] == "NotIn"
            assert {DEFAULT_NAMESPACE, namespace, "lj-runtimekit-jobs"} == set(expression["values"])


def test_namespace_defaults_to_the_release_namespace() -> None:
    objs = documents(render_chart("--set", "namespace=", "--namespace", "gpu"))
    assert {o["metadata"].get("namespace") for o in objs} == {None, "gpu", "default", "lj-runtimekit-jobs"}


@pytest.mark.parametrize(
    ("flag", "component"),
    [
        ("runtime.enabled", "runtime"),
        ("devicePlugin.enabled", "deviceplugin"),
        ("scheduler.enabled", "scheduler"),
        ("exporter.enabled", "exporter"),
        ("controller.enabled", "controller"),
        ("webhook.enabled", "webhook"),
    ],
)
def test_component_flags_leave_a_component_out(flag: str, component: str) -> None:
    objs = normalised(documents(render_chart("--set", f"{flag}=false")))
    others = ",".join(c for c in EXPECTED if c != component)
    assert objs == normalised(documents(render_deploy(f"--components={others}")))


def test_chart_crds_are_the_deploy_crds() -> None:
    chart = sorted(p.name for p in (CHART / "crds").glob("*.yaml"))
    assert chart == sorted(p.name for p in (DEPLOY / "crds").glob("[0-9][0-9]-*.yaml"))
    for name in chart:
        assert (CHART / "crds" / name).read_text() == (DEPLOY / "crds" / name).read_text(), name


def test_chart_values_customise_every_place_that_uses_them(helm_home: Path, tmp_path: Path) -> None:
    values = {
        "protocol": {
            "resources": {"gpu": "example.com/gpu"},
            "memoryUnit": "512Mi",
            "sockets": {"runtime": "/run/gpu-kit/rt.sock"},
        },
        "runtime": {"isolation": "mps", "backend": "simulated", "simulateGpus": "4xA100-80GB"},
        "scheduler": {"conf": 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gpushare\n'},
        "gpuNodeSelector": {"gpu": "on", "runtimekit.aliyun.com/gpu-node": None},  # null drops a default key
        "kubeletDir": "/var/lib/k8s/kubelet",
        "imagePullSecrets": [{"name": "registry-credentials"}],
        "controller": {"jobAgentImage": "registry.example.com/agent:1"},
    }
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    objs = documents(render_helm(helm_home, "-f", str(path)))
    for cm in (o for o in objs if o["kind"] == "ConfigMap"):
        protocol = yaml.safe_load(cm["data"]["protocol.yaml"])
        assert protocol["resources.gpu"] == "example.com/gpu"
        assert protocol["memoryUnit"] == "512Mi"
        assert protocol["sockets.runtime"] == "/run/gpu-kit/rt.sock"
    scheduler_cm = next(o for o in objs if o["metadata"]["name"] == "lj-runtimekit-scheduler-config")
    assert yaml.safe_load(scheduler_cm["data"]["scheduler.conf"])["actions"] == "allocate"
    runtime = args_of(objs, "lj-runtimekit-runtime-ds")
    assert {"--isolation=mps", "--backend=simulated", "--simulate-gpus=4xA100-80GB"} <= set(runtime)
    assert "--mps-pipe-dir=/run/gpu-kit/mps/pipe" in runtime
    assert "--pod-resources-socket=/var/lib/k8s/kubelet/pod-resources/kubelet.sock" in runtime
    assert "--plugin-dir=/var/lib/k8s/kubelet/device-plugins/" in args_of(objs, "lj-runtimekit-device-plugin-ds")
    assert "--image=registry.example.com/agent:1" in args_of(objs, "lj-runtimekit-controller")
    for ds in (o for o in workloads(objs) if o["kind"] == "DaemonSet"):
        spec = ds["spec"]["template"]["spec"]
        assert spec["nodeSelector"] == {"gpu": "on"}
        assert spec["imagePullSecrets"] == [{"name": "registry-credentials"}]
        sockets = [v for v in spec["volumes"] if v["name"] in ("runtime-socket", "runtime-exporter-socket")]
        folder = "/run/gpu-kit/exporter" if ds["metadata"]["name"] == "lj-runtimekit-exporter-ds" else "/run/gpu-kit"
        assert [v["hostPath"]["path"] for v in sockets] == [folder]


def test_a_config_change_changes_the_pod_checksum() -> None:
    def checksums(*args: str) -> dict[str, str]:
        return {
            w["metadata"]["name"]: w["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
            for w in workloads(documents(render_chart(*args)))
        }

    before = checksums()
    after = checksums("--set", "protocol.memoryUnit=2Gi")
    assert all(before[name] != after[name] for name in before)


def test_deploy_all_is_valid_bash() -> None:
    assert subprocess.run(["bash", "-n", str(DEPLOY_ALL)], check=False).returncode == 0
    shellcheck = tool("shellcheck")
    done = subprocess.run([str(shellcheck), str(DEPLOY_ALL)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout


def test_custom_scheduler_plugins_reach_the_scheduler_the_same_both_ways(helm_home: Path) -> None:
    """The example plugins as a Helm value (--set-file) and as deploy-all.sh --scheduler-plugins: one
    ConfigMap with every module, mounted where the scheduler's --plugins-dir points."""
    folder = ROOT / "examples" / "plugins"
    files = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
    sets = [arg for f in files for arg in ("--set-file", "scheduler.plugins." + f.name.replace(".", "\\.") + f"={f}")]
    helm_objs = normalised(documents(render_helm(helm_home, *sets)))
    assert helm_objs == normalised(documents(render_deploy(f"--scheduler-plugins={folder}")))
    configmap = helm_objs[("ConfigMap", DEFAULT_NAMESPACE, "lj-runtimekit-scheduler-plugins")]
    assert configmap["data"] == {f.name: f.read_text() for f in files}
    deployment = helm_objs[("Deployment", DEFAULT_NAMESPACE, "lj-runtimekit-scheduler-framework")]
    (container,) = containers(deployment)
    plugins_dir = next(a.split("=", 1)[1] for a in container["args"] if a.startswith("--plugins-dir="))
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == plugins_dir)
    volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == "lj-runtimekit-scheduler-plugins"


def test_a_changed_plugin_restarts_the_scheduler(helm_home: Path, tmp_path: Path) -> None:
    def checksum(source: str) -> str:
        module = tmp_path / "mine.py"
        module.write_text(source)
        objs = documents(render_helm(helm_home, "--set-file", f"scheduler.plugins.mine\\.py={module}"))
        deployment = next(o for o in workloads(objs) if o["metadata"]["name"] == "lj-runtimekit-scheduler-framework")
        return str(deployment["spec"]["template"]["metadata"]["annotations"]["checksum/plugins"])

    assert checksum("X = 1\n") != checksum("X = 2\n")


def test_the_values_schema_refuses_a_plugin_that_is_not_a_module_file_name(helm_home: Path) -> None:
    done = helm(helm_home, "template", "x", str(CHART), "--set", "scheduler.plugins.my-plugin=X")
    assert done.returncode != 0
    assert "invalid propertyName 'my-plugin'" in done.stderr


@pytest.mark.parametrize(("isolation", "mounted"), [("hami-core", True), ("mps", False), ("none", False)])
def test_under_hami_core_the_runtime_sees_the_library_folder_at_the_hosts_path(isolation: str, mounted: bool) -> None:
    """The runtime makes each container's HAMi-core folder in `/usr/local/vgpu` (its default
    `--hami-lib-dir`), so the chart mounts that host folder at the same path, only under hami-core."""
    objs = documents(render_chart("--set", f"runtime.isolation={isolation}"))
    (ds,) = [o for o in objs if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "lj-runtimekit-runtime-ds"]
    spec = ds["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
    assert ("hami-lib" in volumes, "hami-lib" in mounts) == (mounted, mounted)
    if mounted:
        assert volumes["hami-lib"]["hostPath"] == {"path": "/usr/local/vgpu", "type": "DirectoryOrCreate"}
        assert mounts["hami-lib"]["mountPath"] == "/usr/local/vgpu"
