"""Kubernetes scheduling semantics as pure functions, faithful to kube-scheduler (1.28-1.35): label
selectors, node affinity, taints and tolerations, host ports, inter-pod affinity and anti-affinity,
pod topology spread, and kube-scheduler's score arithmetic.

Nothing here knows the scheduler framework: modules take plain values (pod manifests, node labels,
numpy arrays over node rows) and are reused by the predicates and nodeorder plugins, the scheduler
caches and the simulator. `index.PodIndex` keeps the per-session topology counts that the filters
and scores read, updated as pods are placed and evicted in the session.
"""
