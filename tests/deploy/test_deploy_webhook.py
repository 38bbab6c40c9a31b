"""The webhook's certificates both ways: deploy-all.sh deploy makes the Secret (a CA of its own) and
patches the CA into the configurations' caBundle, which a re-apply keeps; --webhook-tls=cert-manager and
secret:NAME, and the chart's generate, certManager and secret modes."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from deploy.manifests import by_key, documents, render_chart, render_deploy, run_deploy_all
from fixtures.apiserver import Kubectl

NAME = "lj-runtimekit-webhook"


def verifies(cert_pem: bytes, ca_pem: bytes, tmp_path: Path) -> bool:
    """Whether `cert_pem` is a server certificate for the webhook's Service that `ca_pem` signed."""
    (tmp_path / "ca.crt").write_bytes(ca_pem)
    (tmp_path / "tls.crt").write_bytes(cert_pem)
    done = subprocess.run(
        ["openssl", "verify", "-CAfile", str(tmp_path / "ca.crt"), "-purpose", "sslserver", str(tmp_path / "tls.crt")],
        capture_output=True,
        text=True,
        check=False,
    )
    names = subprocess.run(
        ["openssl", "x509", "-noout", "-ext", "subjectAltName", "-in", str(tmp_path / "tls.crt")],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return done.returncode == 0 and f"DNS:{NAME}.kube-system.svc" in names


def configurations(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"].endswith("WebhookConfiguration")]


@pytest.mark.slow  # deploy-all.sh makes a CA and certificate with openssl, deploys, redeploys and deletes
def test_deploy_makes_the_certificate_and_patches_its_ca_in(kubectl: Kubectl, tmp_path: Path) -> None:
    env = {"HOME": str(kubectl.home), "KUBECTL": str(kubectl.default_binary)}
    done = run_deploy_all("deploy", "--components=webhook", f"--kubeconfig={kubectl.kubeconfig}", env=env)
    assert done.returncode == 0, done.stderr
    assert f"created the Secret kube-system/{NAME}-tls" in done.stderr
    secret = json.loads(kubectl("-n", "kube-system", "get", "secret", f"{NAME}-tls", "-o", "json").stdout)
    assert secret["type"] == "kubernetes.io/tls"
    ca = secret["data"]["ca.crt"]
    assert verifies(base64.b64decode(secret["data"]["tls.crt"]), base64.b64decode(ca), tmp_path)
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        live = json.loads(kubectl("get", kind, NAME, "-o", "json").stdout)
        assert {hook["clientConfig"]["caBundle"] for hook in live["webhooks"]} == {ca}
    again = run_deploy_all("deploy", "--components=webhook", f"--kubeconfig={kubectl.kubeconfig}", env=env)
    assert all(line.endswith(" unchanged") for line in again.stdout.strip().splitlines()), again.stdout
    assert "created the Secret" not in again.stderr  # the certificate stays
    live = json.loads(kubectl("get", "validatingwebhookconfiguration", NAME, "-o", "json").stdout)
    assert live["webhooks"][0]["clientConfig"]["caBundle"] == ca
    gone = run_deploy_all("delete", "--components=webhook", f"--kubeconfig={kubectl.kubeconfig}", env=env)
    assert gone.returncode == 0, gone.stderr
    assert kubectl("-n", "kube-system", "get", "secret", f"{NAME}-tls", check=False).returncode != 0


def test_cert_manager_and_a_secret_of_ones_own() -> None:
    managed = by_key(documents(render_deploy("--components=webhook", "--webhook-tls=cert-manager")))
    assert ("Issuer", "kube-system", NAME) in managed
    assert managed[("Certificate", "kube-system", NAME)]["spec"]["secretName"] == f"{NAME}-tls"
    own = by_key(documents(render_deploy("--components=webhook", "--webhook-tls=secret:mine")))
    volumes = own[("Deployment", "kube-system", NAME)]["spec"]["template"]["spec"]["volumes"]
    assert {"name": "tls", "secret": {"secretName": "mine", "defaultMode": 0o440}} in volumes
    bad = run_deploy_all("render", "--webhook-tls=sometimes")
    assert bad.returncode == 2
    assert "--webhook-tls 'sometimes' must be generate, cert-manager or secret:NAME" in bad.stderr


def test_the_chart_makes_its_ca_or_leaves_it_to_cert_manager_or_to_you(tmp_path: Path) -> None:
    generated = by_key(documents(render_chart()))
    secret = generated[("Secret", "kube-system", f"{NAME}-tls")]
    ca = secret["data"]["ca.crt"]
    assert verifies(base64.b64decode(secret["data"]["tls.crt"]), base64.b64decode(ca), tmp_path)
    for obj in configurations(list(generated.values())):
        assert {hook["clientConfig"]["caBundle"] for hook in obj["webhooks"]} == {ca}
    managed = by_key(documents(render_chart("--set", "webhook.certificates.mode=certManager")))
    assert ("Certificate", "kube-system", NAME) in managed
    assert ("Secret", "kube-system", f"{NAME}-tls") not in managed
    for obj in configurations(list(managed.values())):
        assert obj["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"kube-system/{NAME}"
        assert all("caBundle" not in hook["clientConfig"] for hook in obj["webhooks"])
    yours = by_key(
        documents(
            render_chart(
                "--set",
                "webhook.certificates.mode=secret",
                "--set",
                "webhook.certificates.secretName=mine",
                "--set",
                "webhook.certificates.caBundle=Q0E=",
            )
        )
    )
    assert ("Secret", "kube-system", "mine") not in yours
    for obj in configurations(list(yours.values())):
        assert {hook["clientConfig"]["caBundle"] for hook in obj["webhooks"]} == {"Q0E="}
