"""Render the kit's manifests both ways (deploy/deploy-all.sh render, helm template) and compare them.

Objects are keyed by (kind, namespace, name). `normalise` removes what only Helm adds (its release
labels and the ConfigMap checksums on pod templates) and reads the YAML documents inside ConfigMaps,
so two renders of the same configuration compare equal however they are formatted. `normalised`
leaves out Secrets: the chart renders the assignment key Secret with a random key, deploy-all.sh
makes it with kubectl at deploy (never a key written in the repository).
"""

from __future__ import annotations

import copy
import functools
import os
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DEPLOY_ALL = DEPLOY / "deploy-all.sh"
CHART = ROOT / "charts" / "lj-runtimekit"
TOOLS = ROOT / ".tools" / "bin"
DEFAULT_IMAGE = "ghcr.io/lj-runtimekit/runtimekit:0.1.0"
DEFAULT_NAMESPACE = "kube-system"
# The Kubernetes versions whose schemas every manifest is validated against (docs/install.md, support matrix).
KUBERNETES_VERSIONS = ("1.28", "1.30", "1.32", "1.34", "1.35")
COMPONENTS = ("crds", "runtime", "deviceplugin", "scheduler", "exporter", "controller", "webhook")
HELM_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance")
YAML_DATA_KEYS = (".yaml", ".conf")

Obj = dict[str, Any]
Key = tuple[str, str, str]


def tool(name: str) -> Path:
    """A tool fetched by scripts/fetch_tools.sh; skips without it, fails under RUNTIMEKIT_REQUIRE_TOOLS (CI)."""
    path = TOOLS / name
    if not path.exists():
        if os.environ.get("RUNTIMEKIT_REQUIRE_TOOLS"):
            pytest.fail(f"{path} is missing: run scripts/fetch_tools.sh")
        pytest.skip(f"{name} not fetched (scripts/fetch_tools.sh)")
    return path


def documents(text: str) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


@functools.cache
def render_deploy(*args: str) -> str:
    """The stdout of `deploy-all.sh render ARGS` (fails the test on a non-zero exit). Cached: deploy/ does not
    change while the tests run."""
    done = run_deploy_all("render", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def run_deploy_all(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(DEPLOY_ALL), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
    )


def helm(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the real helm with HOME (and its caches) in `home`."""
    return subprocess.run(
        [str(tool("helm")), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home), "HELM_CACHE_HOME": str(home / "cache")},
        timeout=120,
        check=False,
    )


def render_helm(home: Path, *args: str) -> str:
    """`helm template lj-runtimekit charts/lj-runtimekit --include-crds ARGS`, with HOME in `home`."""
    done = helm(home, "template", "lj-runtimekit", str(CHART), "--include-crds", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


@functools.cache
def _helm_home() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="rk-helm-home-")  # removed when the test process exits


@functools.cache
def render_chart(*args: str) -> str:
    """`render_helm` with a HOME of its own, cached: for arguments that name no file (--set, --namespace)."""
    return render_helm(Path(_helm_home().name), *args)


def key(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (str(obj["kind"]), str(meta.get("namespace", "")), str(meta["name"]))


def by_key(objs: Iterable[Obj]) -> dict[Key, Obj]:
    out: dict[Key, Obj] = {}
    for obj in objs:
        assert key(obj) not in out, f"{key(obj)} is rendered twice"
        out[key(obj)] = obj
    return out


def _strip(meta: dict[str, Any], field: str, names: Sequence[str] = (), prefix: str = "") -> None:
    values = meta.get(field)
    if not isinstance(values, dict):
        return
    for name in list(values):
        if name in names or (prefix and name.startswith(prefix)):
            del values[name]
    if not values:
        del meta[field]


def normalise(obj: Obj) -> Obj:
    """A copy without Helm's release labels and checksums and the webhooks' CA, with YAML ConfigMap data parsed."""
    out = copy.deepcopy(obj)
    _strip(out.setdefault("metadata", {}), "labels", HELM_LABELS)
    template = (out.get("spec") or {}).get("template")
    if isinstance(template, dict) and isinstance(template.get("metadata"), dict):
        _strip(template["metadata"], "annotations", prefix="checksum/")
    if out["kind"].endswith("WebhookConfiguration"):  # the CA is made at install, by either
        for hook in out.get("webhooks") or []:
            hook.get("clientConfig", {}).pop("caBundle", None)
    if out["kind"] == "ConfigMap":
        out["data"] = {
            name: yaml.safe_load(text) if name.endswith(YAML_DATA_KEYS) else text
            for name, text in (out.get("data") or {}).items()
        }
    return out


def normalised(objs: Iterable[Obj]) -> dict[Key, Obj]:
    return {k: normalise(v) for k, v in by_key(objs).items() if k[0] != "Secret"}


def workloads(objs: Iterable[Obj]) -> list[Obj]:
    return [o for o in objs if o["kind"] in ("DaemonSet", "Deployment")]


def containers(obj: Obj) -> list[Obj]:
    spec = obj["spec"]["template"]["spec"]
    return list(spec.get("initContainers") or []) + list(spec["containers"])


def other_mounts(objs: Iterable[Obj], workload: Obj) -> dict[str, dict[str, str]]:
    """The ConfigMaps a workload mounts besides /etc/lj-runtimekit: mount path -> their data (empty for
    an optional ConfigMap that is not rendered, as Kubernetes mounts an empty folder then)."""
    spec = workload["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    rendered = by_key(objs)
    out: dict[str, dict[str, str]] = {}
    for mount in containers(workload)[0].get("volumeMounts") or []:
        source = volumes[mount["name"]].get("configMap")
        if source is None or mount["mountPath"] == "/etc/lj-runtimekit":
            continue
        found = rendered.get(("ConfigMap", workload["metadata"]["namespace"], source["name"]))
        assert found is not None or source.get("optional"), f"ConfigMap {source['name']} is not rendered"
        out[mount["mountPath"]] = dict((found or {}).get("data") or {})
    return out


def config_data(objs: Iterable[Obj], workload: Obj) -> dict[str, str]:
    """The data of the ConfigMap a workload mounts at /etc/lj-runtimekit."""
    volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"].get("volumes") or []}
    mount = next(m for m in containers(workload)[0]["volumeMounts"] if m["mountPath"] == "/etc/lj-runtimekit")
    name = volumes[mount["name"]]["configMap"]["name"]
    namespace = workload["metadata"]["namespace"]
    return dict(by_key(objs)[("ConfigMap", namespace, name)]["data"])
