"""A kubeconfig for the embedded API server: one cluster (plain http, no TLS), one user (with the
bearer token the server issued for it, or none), one context. kubectl and client libraries accept it as is.
Called by tests, the `runtimekit apiserver --kubeconfig-out` command and `ApiServer.write_kubeconfig`.
"""

from __future__ import annotations

from pathlib import Path

import yaml

CONTEXT = "runtimekit"


def kubeconfig(server_url: str, namespace: str = "default", token: str = "") -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {"server": server_url}}],
        "users": [{"name": CONTEXT, "user": {"token": token} if token else {}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace}}],
        "current-context": CONTEXT,
        "preferences": {},
    }


def write_kubeconfig(path: str | Path, server_url: str, namespace: str = "default", token: str = "") -> Path:
    """Write the kubeconfig (mode 0600, as kubectl writes its own) and return its path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(kubeconfig(server_url, namespace, token), sort_keys=False), encoding="utf-8")
    target.chmod(0o600)
    return target
