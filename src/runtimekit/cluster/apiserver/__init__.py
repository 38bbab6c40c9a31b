"""The embedded Kubernetes-compatible API server (docs/user-guide/embedded-cluster.md).

A single-process server that speaks enough of the real Kubernetes API for kubectl, lightkube and
the kit's components to run unchanged: discovery, CRUD with real resourceVersion/conflict/finalizer
semantics, selectors, paging, watches with bookmarks and 410 Gone, the pod binding subresource,
server-side tables, CustomResourceDefinitions, and optional SQLite persistence.

Modules, each with one job: `server` (lifecycle), `handlers` (HTTP glue), `routing` (paths, query,
content negotiation), `operations` and `deletion` (write semantics), `store` (objects, RV, history),
`watch` (streams), `listing` (filters, list and table encoding), `resources` and `discovery` (the
resource table), `selectors`, `patch` and `patchschema`, `validation`, `defaults`, `conversion`,
`crds`, `tables` and `printers`, `errors`, `persist`, `kubeconfig` (JSON: `runtimekit.kube.jsoncodec`).
"""

from runtimekit.cluster.apiserver.deletion import KubeletHook
from runtimekit.cluster.apiserver.kubeconfig import write_kubeconfig
from runtimekit.cluster.apiserver.operations import Api
from runtimekit.cluster.apiserver.resources import ResourceInfo, ResourceTable
from runtimekit.cluster.apiserver.server import ApiServer

__all__ = ["Api", "ApiServer", "KubeletHook", "ResourceInfo", "ResourceTable", "write_kubeconfig"]
