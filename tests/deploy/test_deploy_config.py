"""What the rendered containers will do when they start: their args parse with the real CLI, their
ConfigMap files load (protocol, scheduler.conf into a Framework, exporter.yaml, the job-agent Job
template), the runtime's socket folder is mounted where the protocol says, and each component runs
with the privileges it needs and no more."""

from __future__ import annotations

import functools
import posixpath
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
    config_data,
    containers,
    documents,
    other_mounts,
    render_chart,
    render_deploy,
    render_helm,
    workloads,
)
from runtimekit.controller.jobs import FileJobTemplate, JobSpec
from runtimekit.exporter.config import load_config
from runtimekit.protocol import load_protocol
from runtimekit.scheduler.framework import load_conf

COMMAND_OF = {
    "lj-runtimekit-runtime-ds": "runtime",
    "lj-runtimekit-device-plugin-ds": "device-plugin",
    "lj-runtimekit-exporter-ds": "exporter",
    "lj-runtimekit-scheduler-framework": "scheduler",
    "lj-runtimekit-controller": "controller",
}
CUSTOM = {
    "protocol": {"sockets": {"runtime": "/run/gpu-kit/rt.sock"}, "memoryUnit": "512Mi"},
    "runtime": {"isolation": "hami-core", "backend": "simulated", "simulateGpus": "2xH200"},
    "exporter": {"port": 9500},
    "scheduler": {"leaderElect": False},
}
GPU_NODE_LABEL = {"runtimekit.aliyun.com/gpu-node": "true"}


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    home = tmp_path_factory.mktemp("helm-home")
    values = home / "custom.yaml"
    values.write_text(yaml.safe_dump(CUSTOM))
    return {
        "deploy": documents(render_deploy()),
        "helm": documents(render_chart()),
        "helm-custom": documents(render_helm(home, "-f", str(values))),
    }


def workload(objs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in workloads(objs) if o["metadata"]["name"] == name)


def started(objs: list[dict[str, Any]], name: str, folder: Path) -> tuple[str, Any]:
    obj = workload(objs, name)
    args = materialise(containers(obj)[0]["args"], config_data(objs, obj), folder, other_mounts(objs, obj))
    return parse_args(args)


@pytest.mark.parametrize("render", ["deploy", "helm", "helm-custom"])
@pytest.mark.parametrize("name", sorted(COMMAND_OF))
def test_args_parse_and_config_files_load(
    renders: dict[str, list[dict[str, Any]]], render: str, name: str, tmp_path: Path
) -> None:
    command, args = started(renders[render], name, tmp_path)
    assert command == COMMAND_OF[name]
    protocol = load_protocol(args.protocol)
    if command == "scheduler":
        from runtimekit.cli.scheduler import scheduler_config
        from runtimekit.scheduler.build import KubeConnection, build_scheduler

        scheduler = build_scheduler(replace(scheduler_config(args), kube=KubeConnection(master="http://127.0.0.1:9")))
        scheduler.stop()  # never started: built to see what the args make of it
        built_protocol, framework, options = scheduler.protocol, scheduler.framework, scheduler.options
        assert built_protocol == protocol
        assert framework.action_names
        assert load_conf(args.config).actions == framework.action_names
        assert options.leader_elect == (render != "helm-custom")
    elif command == "exporter":
        config = load_config(args.config)
        assert config.health.enabled
        assert args.listen.endswith(f":{9500 if render == 'helm-custom' else 9445}")
    elif command == "controller":
        template = FileJobTemplate(args.job_template)
        spec = JobSpec(
            "lj-runtimekit-enable-n1-1", args.namespace, "n1", "enable", 1, args.image, protocol.sockets.runtime
        )
        job = template.render(spec)
        assert job["spec"]["template"]["spec"]["containers"][0]["image"] == args.image
        assert args.leader_elect
    elif command == "device-plugin":
        from runtimekit.cli.device_plugin import memory_unit

        assert memory_unit(protocol, args.memory_unit) == protocol.memory_unit_mib
    elif command == "runtime":
        assert args.backend == ("simulated" if render == "helm-custom" else "nvml")
        assert args.mps_pipe_dir.startswith(posixpath.dirname(protocol.sockets.runtime) + "/")


@pytest.mark.parametrize("version", ["1.28", "1.35"])
def test_the_job_agent_job_from_the_template_validates(
    renders: dict[str, list[dict[str, Any]]], version: str, tmp_path: Path
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            kubernetes_validate.utils, "schema_contents", functools.cache(kubernetes_validate.utils.schema_contents)
        )
        _, args = started(renders["deploy"], "lj-runtimekit-controller", tmp_path)
        protocol = load_protocol(args.protocol)
        spec = JobSpec(
            "lj-runtimekit-enable-n1-1", args.namespace, "n1", "enable", 1, args.image, protocol.sockets.runtime
        )
        job = FileJobTemplate(args.job_template).render(spec)
        kubernetes_validate.validate(job, version, strict=True)
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeName"] == "n1"
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["supplementalGroups"] == [0]  # the runtime's socket is 0660 root:root
    assert pod["volumes"][0]["hostPath"]["path"] == "/run/lj-runtimekit"
    assert pod["containers"][0]["args"] == ["job-agent", "--action", "enable", "--socket", protocol.sockets.runtime]


def socket_mounts(obj: dict[str, Any]) -> Iterator[tuple[str, str, bool]]:
    """(mount path, host path, read-only) of the runtime's socket folders a workload mounts."""
    volumes = {v["name"]: v for v in obj["spec"]["template"]["spec"]["volumes"]}
    for mount in containers(obj)[0]["volumeMounts"]:
        if mount["name"] in ("runtime-socket", "runtime-exporter-socket"):
            yield mount["mountPath"], volumes[mount["name"]]["hostPath"]["path"], bool(mount.get("readOnly"))


@pytest.mark.parametrize("render", ["deploy", "helm", "helm-custom"])
def test_the_runtime_socket_folder_is_mounted_where_the_protocol_puts_it(
    renders: dict[str, list[dict[str, Any]]], render: str, tmp_path: Path
) -> None:
    objs = renders[render]
    for name in ("lj-runtimekit-runtime-ds", "lj-runtimekit-device-plugin-ds", "lj-runtimekit-exporter-ds"):
        obj = workload(objs, name)
        materialise([], config_data(objs, obj), tmp_path / name)
        protocol = load_protocol(tmp_path / name / "protocol.yaml")
        folder = posixpath.dirname(protocol.sockets.runtime)
        expected = {
            # the runtime makes both sockets; the device plugin only connects to the main one; the exporter
            # sees its own socket only
            "lj-runtimekit-runtime-ds": (folder, folder, False),
            "lj-runtimekit-device-plugin-ds": (folder, folder, True),
            "lj-runtimekit-exporter-ds": (f"{folder}/exporter", f"{folder}/exporter", True),
        }[name]
        assert list(socket_mounts(obj)) == [expected], name
        assert posixpath.dirname(protocol.sockets.exporter) == f"{folder}/exporter"


# (privileged, runAsUser, runAsNonRoot, readOnlyRootFilesystem, host namespaces) per workload.
PRIVILEGES = {
    "lj-runtimekit-runtime-ds": (True, 0, None, None, True),
    "lj-runtimekit-device-plugin-ds": (None, 0, None, True, False),
    "lj-runtimekit-exporter-ds": (None, 65532, True, True, False),
    "lj-runtimekit-scheduler-framework": (None, 65532, True, True, False),
    "lj-runtimekit-controller": (None, 65532, True, True, False),
}


@pytest.mark.parametrize("render", ["deploy", "helm"])
@pytest.mark.parametrize("name", sorted(PRIVILEGES))
def test_each_component_runs_with_the_privileges_it_needs(
    renders: dict[str, list[dict[str, Any]]], render: str, name: str
) -> None:
    obj = workload(renders[render], name)
    pod = obj["spec"]["template"]["spec"]
    ctx = {**(pod.get("securityContext") or {}), **(containers(obj)[0].get("securityContext") or {})}
    privileged, user, non_root, read_only, host = PRIVILEGES[name]
    assert ctx.get("privileged") == privileged
    assert ctx.get("runAsUser") == user
    assert ctx.get("runAsNonRoot") == non_root
    assert ctx.get("readOnlyRootFilesystem") == read_only
    assert bool(pod.get("hostPID")) == host
    assert bool(pod.get("hostIPC")) == host
    assert not pod.get("hostNetwork")
    if not privileged:
        assert ctx["allowPrivilegeEscalation"] is False
        assert ctx["capabilities"] == {"drop": ["ALL"]}


@pytest.mark.parametrize("render", ["deploy", "helm"])
def test_node_daemons_run_on_labelled_gpu_nodes_and_the_rest_anywhere(
    renders: dict[str, list[dict[str, Any]]], render: str
) -> None:
    for obj in workloads(renders[render]):
        selector = obj["spec"]["template"]["spec"].get("nodeSelector")
        assert selector == (GPU_NODE_LABEL if obj["kind"] == "DaemonSet" else None), obj["metadata"]["name"]


@pytest.mark.parametrize("render", ["deploy", "helm", "helm-custom"])
def test_the_exporter_port_is_the_same_everywhere(renders: dict[str, list[dict[str, Any]]], render: str) -> None:
    objs = renders[render]
    obj = workload(objs, "lj-runtimekit-exporter-ds")
    (container,) = containers(obj)
    (listen,) = [a for a in container["args"] if a.startswith("--listen=")]
    port = int(listen.rpartition(":")[2])
    assert port == container["ports"][0]["containerPort"]
    assert obj["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == str(port)
    services = [o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == "lj-runtimekit-exporter"]
    assert [s["spec"]["ports"][0]["port"] for s in services] == [port]
    assert services[0]["spec"]["selector"] == obj["spec"]["selector"]["matchLabels"]


def test_the_prometheus_example_keeps_the_exporter_pods() -> None:
    from deploy.manifests import DEPLOY

    config = yaml.safe_load((DEPLOY / "exporter" / "prometheus-scrape-config.yaml").read_text())
    (job,) = config["scrape_configs"]
    keep = job["relabel_configs"][0]
    labels = workload(documents(render_deploy()), "lj-runtimekit-exporter-ds")["spec"]["template"]["metadata"]["labels"]
    assert keep["regex"] == f"{labels['app.kubernetes.io/name']};{labels['app.kubernetes.io/component']}"
    assert job["kubernetes_sd_configs"][0]["namespaces"]["names"] == ["kube-system"]
