"""Make a lightkube client for a kubeconfig file, an API server URL, or the pod's service account.

`make_client(None)` uses `$KUBECONFIG`, the in-cluster service account or `~/.kube/config`;
`make_client("http://127.0.0.1:8001")` talks to a server without authentication (the embedded
cluster, `kubectl proxy`); any other value is a kubeconfig file path. The configuration is read by
`runtimekit.kube.http.load_config`, the same as `KubeHttp`'s. Callers that want typed models use
this; the node daemons use `KubeNodeApi.connect` (raw JSON).
"""

from __future__ import annotations

import httpx2
from lightkube import Client

from runtimekit.kube.http import load_config

FIELD_MANAGER = "lj-runtimekit"


def make_client(kubeconfig: str | None, timeout_s: float = 10.0) -> Client:
    """A synchronous lightkube client; `timeout_s` bounds every request."""
    if kubeconfig is not None and kubeconfig.startswith(("http://", "https://")):
        config = load_config(server=kubeconfig)
    else:
        config = load_config(kubeconfig)
    return Client(config=config, timeout=httpx2.Timeout(timeout_s), field_manager=FIELD_MANAGER)
