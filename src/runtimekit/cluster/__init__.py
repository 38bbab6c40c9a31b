"""The embedded cluster: a Kubernetes-compatible API server and simulated nodes and kubelets."""
