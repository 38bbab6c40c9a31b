"""Make a lightkube client for a kubeconfig file, an API server URL, or the pod's service account.

`make_client(None)` uses the in-cluster service account, else `$KUBECONFIG` / `~/.kube/config`;
`make_client("http://127.0.0.1:8001")` talks to a server without authentication (the embedded
cluster, `kubectl proxy`); any other value is a kubeconfig file path. A kubeconfig without
credentials (the embedded cluster writes one) is accepted. Callers: the node daemons' CLIs.
"""

from __future__ import annotations

import httpx2
from lightkube import Client, KubeConfig
from lightkube.config.kubeconfig import SingleConfig
from lightkube.config.models import Cluster, User

FIELD_MANAGER = "lj-runtimekit"


class KubeConfigError(ValueError):
    """A kubeconfig without a usable current context."""


def _single(config: KubeConfig, source: str) -> SingleConfig:
    single = config.get()
    if single is None:
        raise KubeConfigError(f"{source}: no current context")
    return single


def load_config(kubeconfig: str | None) -> SingleConfig:
    if kubeconfig is not None and kubeconfig.startswith(("http://", "https://")):
        return _single(KubeConfig.from_one(cluster=Cluster(server=kubeconfig), user=User()), kubeconfig)
    source = kubeconfig or "the in-cluster or default kubeconfig"
    config = _single(KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env(), source)
    if config.user is None:
        config = _single(KubeConfig.from_one(cluster=config.cluster, user=User(), namespace=config.namespace), source)
    return config


def make_client(kubeconfig: str | None, timeout_s: float = 10.0) -> Client:
    """A synchronous client; `timeout_s` bounds every request."""
    return Client(config=load_config(kubeconfig), timeout=httpx2.Timeout(timeout_s), field_manager=FIELD_MANAGER)
