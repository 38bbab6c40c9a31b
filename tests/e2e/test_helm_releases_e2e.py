"""Helm (the real binary, scripts/fetch_tools.sh helm) against the embedded API server: install,
list, status, upgrade, rollback and uninstall of a public-style chart (tests/e2e/charts/webserver,
laid out as bitnami/nginx: Deployment, Service, ConfigMap, ServiceAccount, a post-install hook) and of
the kit's own chart, and `helm template | kubectl apply`. Helm keeps each release revision in a Secret
labelled owner=helm, which it writes in protobuf (client-go's typed clients do since 1.35).

Helm 4 installs with server-side apply by default (application/apply-patch+yaml); the public chart
also goes round with `--server-side=false` (client-side three-way merge, Helm 3's way).
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from deploy.manifests import CHART, tool
from fixtures.apiserver import Kubectl

pytestmark = pytest.mark.e2e

WEBSERVER = Path(__file__).resolve().parent / "charts" / "webserver"
APPLY_MODES = {"server-side": (), "client-side": ("--server-side=false",)}


class Helm:
    def __init__(self, kubeconfig: Path, home: Path) -> None:
        self.binary, self.kubeconfig, self.home = tool("helm"), kubeconfig, home

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HOME": str(self.home), "HELM_CACHE_HOME": str(self.home / "cache")}
        env["KUBECONFIG"] = str(self.kubeconfig)
        command = [str(self.binary), *args]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done


@pytest.fixture
def helm(kubeconfig: Path, tmp_path: Path) -> Helm:
    home = tmp_path / "helm-home"
    home.mkdir()
    return Helm(kubeconfig, home)


def _get(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def _release(kubectl: Kubectl, namespace: str, name: str, revision: int) -> Any:
    """The release Helm stored: base64 (the Secret's) of base64 of gzipped JSON."""
    secret = _get(kubectl, "secret", "-n", namespace, f"sh.helm.release.v1.{name}.v{revision}")
    assert secret["type"] == "helm.sh/release.v1"
    assert secret["metadata"]["labels"]["owner"] == "helm"
    raw = base64.b64decode(base64.b64decode(secret["data"]["release"]))
    return json.loads(gzip.decompress(raw))


@pytest.mark.parametrize("mode", sorted(APPLY_MODES))
def test_a_public_chart_round_trip(helm: Helm, kubectl: Kubectl, mode: str) -> None:
    apply = APPLY_MODES[mode]
    installed = helm("install", "web", str(WEBSERVER), *apply)
    assert "STATUS: deployed" in installed.stdout
    assert "answers on port 80" in installed.stdout  # NOTES.txt
    assert _get(kubectl, "serviceaccount", "web-webserver")["automountServiceAccountToken"] is False
    assert _get(kubectl, "service", "web-webserver")["spec"]["ports"][0]["port"] == 80
    assert _get(kubectl, "configmap", "web-webserver-installed")["data"]["revision"] == "1"  # the hook ran
    release = _release(kubectl, "default", "web", 1)
    assert (release["name"], release["version"], release["info"]["status"]) == ("web", 1, "deployed")
    listed = json.loads(helm("list", "-o", "json").stdout)
    assert [(r["name"], r["revision"], r["status"]) for r in listed] == [("web", "1", "deployed")]
    assert "STATUS: deployed" in helm("status", "web").stdout

    helm("upgrade", "web", str(WEBSERVER), "--set", "greeting=bonjour", "--set", "replicaCount=2")
    assert _get(kubectl, "configmap", "web-webserver")["data"]["greeting"] == "bonjour"
    assert _get(kubectl, "deployment", "web-webserver")["spec"]["replicas"] == 2
    assert _get(kubectl, "configmap", "web-webserver-installed")["data"]["revision"] == "2"
    assert _release(kubectl, "default", "web", 1)["info"]["status"] == "superseded"

    helm("rollback", "web", "1")
    assert _get(kubectl, "configmap", "web-webserver")["data"]["greeting"] == "hello"
    assert _get(kubectl, "deployment", "web-webserver")["spec"]["replicas"] == 1
    history = json.loads(helm("history", "web", "-o", "json").stdout)
    assert [(h["revision"], h["status"]) for h in history] == [(1, "superseded"), (2, "superseded"), (3, "deployed")]

    helm("uninstall", "web")
    for kind in ("deployment", "service", "configmap", "serviceaccount"):
        assert kubectl("get", kind, "web-webserver", check=False).returncode == 1, kind
    assert _get(kubectl, "secrets", "-l", "owner=helm")["items"] == []
    assert json.loads(helm("list", "-o", "json").stdout) == []


def test_the_kits_chart_round_trip(helm: Helm, kubectl: Kubectl) -> None:
    namespace = ("-n", "runtimekit-system")
    helm("install", "rk", str(CHART), *namespace, "--create-namespace")
    assert kubectl("get", "crd", "podgroups.scheduling.volcano.sh").returncode == 0
    scheduler = _get(kubectl, "deployment", "-n", "kube-system", "lj-runtimekit-scheduler-framework")
    assert scheduler["metadata"]["annotations"]["meta.helm.sh/release-name"] == "rk"
    helm("upgrade", "rk", str(CHART), *namespace, "--reuse-values", "--set", "webhook.replicas=3")
    assert _get(kubectl, "deployment", "-n", "kube-system", "lj-runtimekit-webhook")["spec"]["replicas"] == 3
    helm("rollback", "rk", "1", *namespace)
    assert _get(kubectl, "deployment", "-n", "kube-system", "lj-runtimekit-webhook")["spec"]["replicas"] == 2
    helm("uninstall", "rk", *namespace)
    assert kubectl("get", "deployment", "-n", "kube-system", "lj-runtimekit-webhook", check=False).returncode == 1


def test_helm_template_piped_to_kubectl_apply(helm: Helm, kubectl: Kubectl) -> None:
    rendered = helm("template", "tpl", str(WEBSERVER), "--set", "greeting=hi").stdout
    applied = kubectl("apply", "--validate=strict", "-f", "-", stdin=rendered)
    assert "deployment.apps/tpl-webserver created" in applied.stdout
    assert applied.stderr == ""
    assert _get(kubectl, "configmap", "tpl-webserver")["data"]["greeting"] == "hi"
