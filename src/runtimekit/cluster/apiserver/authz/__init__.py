"""Authorization, as kube-apiserver's RBAC mode does it, for requests that carry credentials.

`access` is the glue the HTTP handlers call (who asks, impersonation, the 403); `authorizer` decides
from the Roles, ClusterRoles and bindings in the store; `rules` is the pure rule matching; `policy` the
bootstrap ClusterRoles and bindings; `reviews` answers the authorization.k8s.io and
authentication.k8s.io review kinds and TokenRequests. Requests without credentials are the admin's and
skip all of it (docs/security.md).
"""
