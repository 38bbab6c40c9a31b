"""The other half of the RBAC derivation (test_deploy_rbac.py records what the components call when driven):
an inventory of every API call site in the code the deployed components run, read from the source
with `ast`. Each site is in the table below with the component(s) that reach it and the permission
it needs; a new call site (or one that changed) fails here until it is added to the table, and every
permission of the table must be granted by the component's Roles in deploy/ — so a call the
scenarios of test_deploy_rbac.py do not drive still cannot ship without its RBAC."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

import pytest

from deploy.manifests import ROOT, documents, render_deploy, workloads
from deploy.recorder import RbacPolicy
from runtimekit.deviceplugin.kubeapi import NodeApi
from runtimekit.runtime.pods import EventSink, PodSource

SRC = ROOT / "src" / "runtimekit"
# The modules of the deployed components that may talk to the API server (the embedded cluster and
# the simulator are not deployed).
SCANNED = sorted(
    path
    for pattern in (
        "kube/*.py",
        "controller/*.py",
        "scheduler/**/*.py",
        "deviceplugin/*.py",
        "runtime/*.py",
        "exporter/*.py",
        "cli/runtime.py",
        "cli/device_plugin.py",
        "cli/scheduler.py",
        "cli/exporter.py",
        "cli/controller.py",
        "cli/job_agent.py",
        "cli/webhook.py",
    )
    for path in SRC.glob(pattern)
)
HTTP_METHODS = {"get", "post", "put", "patch", "delete", "list", "watch"}
WORKLOAD = {
    "runtime": "lj-runtimekit-runtime-ds",
    "device-plugin": "lj-runtimekit-device-plugin-ds",
    "scheduler": "lj-runtimekit-scheduler-framework",
    "controller": "lj-runtimekit-controller",
    "webhook": "lj-runtimekit-webhook",
}
Site = tuple[str, str, str, str]  # module, function, call, first argument
Need = tuple[str, str, str]  # verb, API group, resource

LEASE = [
    ("get", "coordination.k8s.io", "leases"),
    ("create", "coordination.k8s.io", "leases"),
    ("update", "coordination.k8s.io", "leases"),
]
TABLE: dict[Site, tuple[tuple[str, ...], list[Need]]] = {
    # runtimekit.kube.nodeapi: the node daemons, through the methods of their interfaces (checked below).
    ("kube/nodeapi.py", "list_node_pods", "list", "object_path('v1', 'pods')"): (
        ("runtime", "device-plugin"),
        [("list", "", "pods")],
    ),
    ("kube/nodepods.py", "__init__", "Informer", "object_path('v1', 'pods')"): (
        ("device-plugin",),
        [("list", "", "pods"), ("watch", "", "pods")],
    ),
    ("kube/nodeapi.py", "record_pod_event", "post", "object_path('v1', 'events', namespace)"): (
        ("runtime",),
        [("create", "", "events")],
    ),
    ("kube/nodeapi.py", "record_pod_event", "patch", "object_path('v1', 'events', namespace, seen[0])"): (
        ("runtime",),
        [("patch", "", "events")],
    ),
    ("kube/nodeapi.py", "get_pod", "get", "object_path('v1', 'pods', namespace, name)"): (
        ("device-plugin",),
        [("get", "", "pods")],
    ),
    ("kube/nodeapi.py", "patch_pod_annotations", "patch", "path"): (("device-plugin",), [("patch", "", "pods")]),
    ("kube/nodeapi.py", "get_node", "get", "object_path('v1', 'nodes', name=node)"): ((), [("get", "", "nodes")]),
    ("kube/nodeapi.py", "patch_node_metadata", "patch", "object_path('v1', 'nodes', name=node)"): (
        ("device-plugin",),
        [("patch", "", "nodes")],
    ),
    # runtimekit.kube.draapi: the DRA kubelet plugin (deploy/draplugin, opt-in: test_dra_deploy.py checks its grants).
    ("kube/draapi.py", "get_claim", "get", "object_path(API, 'resourceclaims', namespace, name)"): (
        ("dra-plugin",),
        [("get", "resource.k8s.io", "resourceclaims")],
    ),
    ("kube/draapi.py", "get_node", "get", "object_path('v1', 'nodes', name=node)"): (
        ("dra-plugin",),
        [("get", "", "nodes")],
    ),
    ("kube/draapi.py", "list_slices", "list", "object_path(API, 'resourceslices')"): (
        ("dra-plugin",),
        [("list", "resource.k8s.io", "resourceslices")],
    ),
    ("kube/draapi.py", "create_slice", "post", "object_path(API, 'resourceslices')"): (
        ("dra-plugin",),
        [("create", "resource.k8s.io", "resourceslices")],
    ),
    ("kube/draapi.py", "update_slice", "put", "object_path(API, 'resourceslices', name=name)"): (
        ("dra-plugin",),
        [("update", "resource.k8s.io", "resourceslices")],
    ),
    ("kube/draapi.py", "delete_slice", "delete", "object_path(API, 'resourceslices', name=name)"): (
        ("dra-plugin",),
        [("delete", "resource.k8s.io", "resourceslices")],
    ),
    ("kube/draapi.py", "ensure_device_class", "post", "object_path(API, 'deviceclasses')"): (
        ("dra-plugin",),
        [("create", "resource.k8s.io", "deviceclasses")],
    ),
    # runtimekit.kube.scheduling: the scheduler's binder.
    ("kube/scheduling.py", "bind", "post", "object_path('v1', 'pods', task.namespace, task.name, 'binding')"): (
        ("scheduler", "extender"),
        [("create", "", "pods/binding")],
    ),
    ("kube/scheduling.py", "bind", "patch", "object_path('v1', 'pods', task.namespace, task.name)"): (
        ("scheduler", "extender"),
        [("patch", "", "pods")],  # HAMi's `hami.io/vgpu-node` label, written before the binding
    ),
    ("kube/scheduling.py", "evict", "delete", "object_path('v1', 'pods', task.namespace, task.name)"): (
        ("scheduler",),
        [("delete", "", "pods")],
    ),
    ("kube/scheduling.py", "event", "post", "object_path('v1', 'events', task.namespace)"): (
        ("scheduler",),
        [("create", "", "events")],
    ),
    # runtimekit.kube.events: the scheduler's Events, written off the binding path ...
    ("kube/events.py", "_drain", "post", "object_path('v1', 'events', body['metadata']['namespace'])"): (
        ("scheduler",),
        [("create", "", "events")],
    ),
    # ... the controller's Events on Nodes, written at once (NodeController.event -> post_event), and
    # the scheduler's Warning Event about a refused conf reload (on its Pod or Lease).
    ("kube/events.py", "post_event", "post", "object_path('v1', 'events', body['metadata']['namespace'])"): (
        ("controller", "scheduler"),
        [("create", "", "events")],
    ),
    ("kube/scheduling.py", "report", "patch", "object_path('v1', 'pods', task.namespace, task.name, 'status')"): (
        ("scheduler",),
        [("patch", "", "pods/status")],
    ),
    ("kube/scheduling.py", "update_group", "patch", "path"): (
        ("scheduler",),
        [("patch", "scheduling.volcano.sh", "podgroups/status")],
    ),
    ("kube/scheduling.py", "update_queue", "patch", "path"): (
        ("scheduler",),
        [("patch", "scheduling.volcano.sh", "queues/status")],
    ),
    ("kube/scheduling.py", "update_volume", "put", "path"): (
        ("scheduler",),
        [("update", "", "persistentvolumes")],
    ),
    ("kube/scheduling.py", "update_claim", "put", "path"): (
        ("scheduler",),
        [("update", "", "persistentvolumeclaims")],
    ),
    ("kube/scheduling.py", "ensure_queue", "post", "object_path('scheduling.volcano.sh/v1beta1', 'queues')"): (
        ("scheduler",),
        [("create", "scheduling.volcano.sh", "queues")],
    ),
    # runtimekit.kube.lease and .informer: generic; what they touch is named where they are built (below).
    ("kube/lease.py", "try_acquire_or_renew", "get", "f'{self._path}/{self.name}'"): ((), []),
    ("kube/lease.py", "try_acquire_or_renew", "post", "self._path"): ((), []),
    ("kube/lease.py", "try_acquire_or_renew", "put", "f'{self._path}/{self.name}'"): ((), []),
    ("kube/lease.py", "release", "get", "f'{self._path}/{self.name}'"): ((), []),
    ("kube/lease.py", "release", "put", "f'{self._path}/{self.name}'"): ((), []),
    ("kube/informer.py", "_relist", "list", "self.path"): ((), []),
    ("kube/informer.py", "_watch", "watch", "self.path"): ((), []),
    # runtimekit.kube.informers: generic too; no deployed component builds shared informers yet (when one
    # does, its `Informers.resource(path)` calls need scanning here as `Informer` is).
    ("kube/informers.py", "__init__", "Informer", "path"): ((), []),
    # The controller.
    ("controller/reconciler.py", "_drive", "post", "object_path('batch/v1', 'jobs', self.options.namespace)"): (
        ("controller",),
        [("create", "batch", "jobs")],
    ),
    (
        "controller/reconciler.py",
        "_patch_node",
        "patch",
        "object_path('v1', 'nodes', None, str(meta(node)['name']))",
    ): (("controller",), [("patch", "", "nodes")]),
    ("controller/reconciler.py", "_delete_job", "delete", "object_path('batch/v1', 'jobs', namespace, name)"): (
        ("controller",),
        [("delete", "batch", "jobs")],
    ),
    ("controller/reconciler.py", "_delete_job", "list", "object_path('v1', 'pods', namespace)"): (
        ("controller",),
        [("list", "", "pods")],
    ),
    (
        "controller/reconciler.py",
        "_delete_job",
        "delete",
        "object_path('v1', 'pods', namespace, str(meta(pod)['name']))",
    ): (("controller",), [("delete", "", "pods")]),
    ("controller/reconciler.py", "_failure_reason", "list", "object_path('v1', 'pods', self.options.namespace)"): (
        ("controller",),
        [("list", "", "pods")],
    ),
    ("controller/server.py", "__init__", "Informer", "'/api/v1/nodes'"): (
        ("controller",),
        [("list", "", "nodes"), ("watch", "", "nodes")],
    ),
    ("controller/server.py", "__init__", "Informer", "object_path('batch/v1', 'jobs', namespace)"): (
        ("controller",),
        [("list", "batch", "jobs"), ("watch", "batch", "jobs")],
    ),
    ("cli/controller.py", "run", "LeaderElector", "'lj-runtimekit-controller'"): (("controller",), LEASE),
    # The scheduler.
    ("scheduler/server.py", "__init__", "Informer", "'/api/v1/nodes'"): (
        ("scheduler",),
        [("list", "", "nodes"), ("watch", "", "nodes")],
    ),
    ("scheduler/server.py", "__init__", "Informer", "'/api/v1/pods'"): (
        ("scheduler",),
        [("list", "", "pods"), ("watch", "", "pods")],
    ),
    ("scheduler/server.py", "__init__", "Informer", "'/api/v1/namespaces'"): (
        ("scheduler",),
        [("list", "", "namespaces"), ("watch", "", "namespaces")],
    ),
    ("scheduler/server.py", "__init__", "Informer", "f'{VOLCANO}/podgroups'"): (
        ("scheduler",),
        [("list", "scheduling.volcano.sh", "podgroups"), ("watch", "scheduling.volcano.sh", "podgroups")],
    ),
    ("scheduler/server.py", "__init__", "Informer", "f'{VOLCANO}/queues'"): (
        ("scheduler",),
        [("list", "scheduling.volcano.sh", "queues"), ("watch", "scheduling.volcano.sh", "queues")],
    ),
    ("scheduler/server.py", "__init__", "Informer", "PRIORITY_CLASSES"): (
        ("scheduler",),
        [("list", "scheduling.k8s.io", "priorityclasses"), ("watch", "scheduling.k8s.io", "priorityclasses")],
    ),
    # the informers of what plugins read besides: PodDisruptionBudgets (pdb), ResourceQuotas (resourcequota),
    # the storage kinds (predicates' volume filters), the DRA kinds (dynamicresources)
    ("scheduler/server.py", "_watch", "Informer", "path"): (
        ("scheduler",),
        [
            ("list", "policy", "poddisruptionbudgets"),
            ("watch", "policy", "poddisruptionbudgets"),
            ("list", "", "resourcequotas"),
            ("watch", "", "resourcequotas"),
            *[
                (verb, group, resource)
                for group, resource in (
                    ("", "persistentvolumeclaims"),
                    ("", "persistentvolumes"),
                    ("storage.k8s.io", "storageclasses"),
                    ("storage.k8s.io", "csinodes"),
                    ("resource.k8s.io", "resourceclaims"),
                    ("resource.k8s.io", "deviceclasses"),
                    ("resource.k8s.io", "resourceslices"),
                )
                for verb in ("list", "watch")
            ],
        ],
    ),
    # dynamicresources' PreBind writes claims' allocation and reservedFor
    ("scheduler/cache/dra.py", "update_status", "put", "path"): (
        ("scheduler",),
        [("update", "resource.k8s.io", "resourceclaims/status")],
    ),
    ("scheduler/server.py", "__init__", "LeaderElector", "self.options.lease_name"): (("scheduler",), LEASE),
    # The extender (scheduler mode extender; test_deploy_extender.py checks its grants).
    ("scheduler/extender/server.py", "__init__", "Informer", "'/api/v1/nodes'"): (
        ("extender",),
        [("list", "", "nodes"), ("watch", "", "nodes")],
    ),
    ("scheduler/extender/server.py", "__init__", "Informer", "'/api/v1/pods'"): (
        ("extender",),
        [("list", "", "pods"), ("watch", "", "pods")],
    ),
    ("scheduler/extender/server.py", "__init__", "Informer", "'/api/v1/namespaces'"): (
        ("extender",),
        [("list", "", "namespaces"), ("watch", "", "namespaces")],
    ),
    ("scheduler/extender/server.py", "__init__", "LeaderElector", "o.lease_name"): (("extender",), LEASE),
    # The webhook: the nodes' GPU inventories, for the memory no node could give.
    ("cli/webhook.py", "run", "Informer", "'/api/v1/nodes'"): (
        ("webhook",),
        [("list", "", "nodes"), ("watch", "", "nodes")],
    ),
}


class CallSites(ast.NodeVisitor):
    """Every `<x>.http.<verb>(...)` / `<x>._http.<verb>(...)` call and every Informer/LeaderElector built."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.functions: list[str] = []
        self.sites: list[Site] = []

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        where = self.functions[-1] if self.functions else "<module>"
        client = f.value if isinstance(f, ast.Attribute) else None
        if (
            isinstance(f, ast.Attribute)
            and f.attr in HTTP_METHODS
            and (
                (isinstance(client, ast.Attribute) and client.attr in ("http", "_http"))
                or (isinstance(client, ast.Name) and client.id == "http")  # a function given the client
            )
        ):
            self.sites.append((self.module, where, f.attr, ast.unparse(node.args[0]) if node.args else ""))
        if isinstance(f, ast.Name) and f.id in ("Informer", "LeaderElector") and len(node.args) > 1:
            self.sites.append((self.module, where, f.id, ast.unparse(node.args[1])))
        self.generic_visit(node)


def call_sites() -> Iterator[Site]:
    for path in SCANNED:
        visitor = CallSites(path.relative_to(SRC).as_posix())
        visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
        yield from visitor.sites


def test_every_api_call_site_is_in_the_table() -> None:
    found = set(call_sites())
    new = sorted(found - set(TABLE))
    stale = sorted(set(TABLE) - found)
    assert not new, (
        "API calls not in the RBAC table — add each with the permission it needs, grant that in deploy/ and "
        "charts/, and drive it in test_deploy_rbac.py if you can:\n" + "\n".join(map(str, new))
    )
    assert not stale, "table entries whose call site is gone or changed:\n" + "\n".join(map(str, stale))


@pytest.mark.parametrize(
    ("component", "interfaces"), [("runtime", (PodSource, EventSink)), ("device-plugin", (NodeApi,))]
)
def test_the_node_daemons_reach_nodeapi_only_through_their_interfaces(component: str, interfaces: Any) -> None:
    declared = {name for interface in interfaces for name in vars(interface) if not name.startswith("_")}
    reached = {
        site[1] for site, (components, _) in TABLE.items() if site[0] == "kube/nodeapi.py" and component in components
    }
    assert reached == declared


@pytest.fixture(scope="module")
def manifests() -> list[dict[str, Any]]:
    return documents(render_deploy())


@pytest.mark.parametrize("component", sorted(WORKLOAD))
def test_deploy_grants_every_permission_of_the_table(manifests: list[dict[str, Any]], component: str) -> None:
    obj = next(o for o in workloads(manifests) if o["metadata"]["name"] == WORKLOAD[component])
    account = obj["spec"]["template"]["spec"]["serviceAccountName"]
    policy = RbacPolicy.for_service_account(manifests, obj["metadata"]["namespace"], account)
    needed = {need for components, needs in TABLE.values() if component in components for need in needs}
    assert needed
    missing = [
        need
        for need in sorted(needed)
        if not any(g.verb == need[0] and g.group == need[1] and g.resource == need[2] for g in policy.grants)
    ]
    assert not missing, f"{component} needs, and deploy/ does not grant: {missing}"
    granted = {(g.verb, g.group, g.resource) for g in policy.grants}
    assert granted <= needed, f"{component} is granted what no call site needs: {sorted(granted - needed)}"
