"""Kubernetes scheduling semantics as pure functions, faithful to kube-scheduler (1.28-1.35): host ports,
inter-pod affinity and anti-affinity, pod topology spread, the TaintToleration and NodeAffinity
plugins' reasons and scores, and kube-scheduler's score arithmetic. Label selectors, node affinity and
tolerations themselves are Kubernetes' meaning, shared by every component: `runtimekit.kube.semantics`.

Nothing here knows the scheduler framework: modules take plain values (pod manifests, node labels,
numpy arrays over node rows) and are reused by the predicates and nodeorder plugins, the scheduler
caches and the simulator. `index.PodIndex` keeps the per-session topology counts that the filters
and scores read, updated as pods are placed and evicted in the session.
"""
