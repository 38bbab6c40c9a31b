"""kube-scheduler's NodeAffinity plugin over Kubernetes' node selection (`runtimekit.kube.semantics.
nodeaffinity`): the reason a node is filtered out. The preferred terms' raw score is the semantics'
`preferred_score`, normalised over the scored nodes by `scores.default_normalize`.

Pure; callers: the framework's node constraints and the predicates plugin.
"""

from __future__ import annotations

REASON = "node(s) didn't match Pod's node affinity/selector"
