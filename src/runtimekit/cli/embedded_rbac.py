"""The RBAC of the kit's manifests, loaded into the embedded cluster before its components start.

`runtimekit up` runs the scheduler, controller, webhook, runtime and device plugin under the
ServiceAccounts of `deploy/` (runtimekit.cli.embedded_identity), and the API server enforces RBAC for
them, so the ServiceAccounts, Roles, ClusterRoles and bindings (and the controller's Jobs namespace) of
`deploy/<component>/*.yaml` must be there: a permission the manifests lack then fails here as it would
on a production install. Without a `deploy/` folder (an installed wheel), the kit's ServiceAccounts are
bound to `cluster-admin` instead, with a warning. Called by `runtimekit.cli.embedded`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube.objects import JsonObject

log = logging.getLogger(__name__)

KINDS = {
    "Namespace": ("", "namespaces"),
    "ServiceAccount": ("", "serviceaccounts"),
    "ClusterRole": ("rbac.authorization.k8s.io", "clusterroles"),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io", "clusterrolebindings"),
    "Role": ("rbac.authorization.k8s.io", "roles"),
    "RoleBinding": ("rbac.authorization.k8s.io", "rolebindings"),
}
ACCOUNTS = (
    "lj-runtimekit-scheduler",
    "lj-runtimekit-controller",
    "lj-runtimekit-webhook",
    "lj-runtimekit-runtime",
    "lj-runtimekit-device-plugin",
)


def manifest_objects(deploy: Path) -> Iterator[JsonObject]:
    """The objects of `KINDS` in `deploy/<component>/*.yaml`, namespaces first."""
    import yaml

    found: list[JsonObject] = []
    for path in sorted(deploy.glob("*/*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if isinstance(doc, dict) and doc.get("kind") in KINDS:
                found.append(doc)
    yield from sorted(found, key=lambda doc: doc["kind"] != "Namespace")


def load_rbac(server: ApiServer, deploy: Path) -> int:
    """Create what `deploy/` declares (and is not there yet); returns how many objects were created."""
    api = server.api
    objects = list(manifest_objects(deploy)) if deploy.is_dir() else []
    if not objects:
        log.warning("no RBAC manifests under %s: the kit's ServiceAccounts are bound to cluster-admin", deploy)
        objects = _fallback()
    created = 0
    for obj in objects:
        group, plural = KINDS[obj["kind"]]
        info = api.resource(group, "v1", plural)
        namespace = obj["metadata"].get("namespace", "") if info.namespaced else ""
        if api.store.get(info, namespace, obj["metadata"]["name"]) is None:
            api.create(info, namespace, obj)
            created += 1
    return created


def _fallback() -> list[JsonObject]:
    accounts = [{"kind": "ServiceAccount", "metadata": {"name": n, "namespace": "kube-system"}} for n in ACCOUNTS]
    binding = {
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "lj-runtimekit-cluster-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": n, "namespace": "kube-system"} for n in ACCOUNTS],
    }
    jobs = {"kind": "Namespace", "metadata": {"name": "lj-runtimekit-jobs"}}
    return [jobs, *accounts, binding]
