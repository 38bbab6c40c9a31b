"""Who each part of the embedded cluster is to its API server.

Every client `EmbeddedCluster.http(agent)` makes carries the bearer token of its own user, so that
admission webhooks see who writes (as they would on a real cluster): the kit's components are their
deploy/ ServiceAccounts (`system:serviceaccount:kube-system:lj-runtimekit-scheduler`, ...; a node's
runtime and device plugin too), a node's kubelet is `system:node:<name>`, the controllers
kube-controller-manager's users, anything else `kubernetes-admin`. The API server enforces RBAC for all
but the last (runtimekit.cli.embedded_rbac loads the grants of deploy/). The kubeconfig of each user is written to
`<state>/credentials/<user>.kubeconfig` (a kubectl can act as that part with it); `<state>/kubeconfig`
stays the admin's.
"""

from __future__ import annotations

import re
from pathlib import Path

from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.apiserver.identity import ADMIN, UserInfo, node, service_account, user
from runtimekit.kube.http import KubeHttp

NAMESPACE = "kube-system"
_COMPONENTS = {
    "runtimekit-scheduler": service_account(NAMESPACE, "lj-runtimekit-scheduler"),
    "runtimekit-controller": service_account(NAMESPACE, "lj-runtimekit-controller"),
    "runtimekit-webhook": service_account(NAMESPACE, "lj-runtimekit-webhook"),
    "runtimekit-job-controller": service_account(NAMESPACE, "job-controller"),
    "runtimekit-controller-manager": user("system:kube-controller-manager"),
}

_NODE_COMPONENTS = {  # agent kind -> user; the agent is `<kind>/<node>`
    "runtimekit-runtime": service_account(NAMESPACE, "lj-runtimekit-runtime"),
    "runtimekit-device-plugin": service_account(NAMESPACE, "lj-runtimekit-device-plugin"),
    "runtimekit-dra-plugin": service_account(NAMESPACE, "lj-runtimekit-dra-plugin"),
}


def identity_of(agent: str) -> UserInfo:
    """The user of a client with this user agent (`runtimekit-node/<node>`: that node)."""
    found = _COMPONENTS.get(agent)
    if found is not None:
        return found
    kind, _, name = agent.partition("/")
    if kind in ("runtimekit-node", "runtimekit-kubelet") and name:
        return node(name)
    if kind in _NODE_COMPONENTS and name:
        return _NODE_COMPONENTS[kind]
    return ADMIN


def connect_as(api: ApiServer, state_dir: Path, agent: str) -> KubeHttp:
    """A client of the cluster's API server with `agent`'s user and user agent."""
    who = identity_of(agent)
    path = state_dir / "credentials" / (re.sub(r"[^A-Za-z0-9_.-]+", "-", who.username) + ".kubeconfig")
    api.write_kubeconfig(path, user=who)
    return KubeHttp.connect(kubeconfig=str(path), user_agent=agent)
