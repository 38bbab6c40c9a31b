"""`runtimekit webhook` as a process: it serves reviews over HTTPS with the certificate files given,
watches the nodes through the kubeconfig, and exits 2 for files that do not load."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import trustme

from runtimekit.cluster.apiserver import ApiServer


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def webhook(*args: str, log: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "runtimekit.cli.main", "webhook", *args],
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
        text=True,
        env={**os.environ, "KUBERNETES_SERVICE_HOST": ""},
    )


def test_the_command_serves_reviews_and_stops_on_sigterm(
    apiserver: ApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1")
    issued.cert_chain_pems[0].write_to_path(str(tmp_path / "tls.crt"))
    issued.private_key_pem.write_to_path(str(tmp_path / "tls.key"))
    port = free_port()
    args = ("--listen", f"127.0.0.1:{port}", "--tls-cert-file", str(tmp_path / "tls.crt"))
    process = webhook(
        *args,
        "--tls-private-key-file",
        str(tmp_path / "tls.key"),
        "--kubeconfig",
        str(kubeconfig),
        log=tmp_path / "log",
    )
    try:
        context = ssl.create_default_context()
        ca.configure_trust(context)
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "1",
                "operation": "CREATE",
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "object": {"spec": {}},
            },
        }
        deadline = time.monotonic() + 30
        while True:
            try:
                connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
                connection.request("GET", "/readyz")
                if connection.getresponse().status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "log").read_text()
            time.sleep(0.2)
        connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
        connection.request("POST", "/validate", json.dumps(review))
        answer = json.loads(connection.getresponse().read())
        assert answer["response"] == {"uid": "1", "allowed": True}
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(30)
    assert code == 0, (tmp_path / "log").read_text()
    assert "webhook serving https://127.0.0.1:" in (tmp_path / "log").read_text()


def test_files_that_do_not_load_are_exit_2(tmp_path: Path) -> None:
    (tmp_path / "bad.crt").write_text("not a certificate")
    (tmp_path / "bad.key").write_text("not a key")
    process = webhook(
        "--tls-cert-file",
        str(tmp_path / "bad.crt"),
        "--tls-private-key-file",
        str(tmp_path / "bad.key"),
        log=tmp_path / "log",
    )
    assert process.wait(30) == 2
    assert f"cannot load {tmp_path / 'bad.crt'}" in (tmp_path / "log").read_text()
    process = webhook(
        "--tls-cert-file", str(tmp_path / "missing.crt"), "--tls-private-key-file", "x", log=tmp_path / "log"
    )
    assert process.wait(30) == 2
    assert "No such file" in (tmp_path / "log").read_text()
