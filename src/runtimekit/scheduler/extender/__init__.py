"""The kit's scheduler as a kube-scheduler HTTP extender (`runtimekit extender`): kube-scheduler stays
the cluster's scheduler and asks the kit's GPU plugins (the same framework, policies and ledger as the
standalone scheduler) to filter, score, bind and preempt for the pods that ask for the kit's
resources. See docs/user-guide/extender.md.

Modules: `wire` (kube-scheduler's messages), `interest` (which pods), `verdicts` (why a node fails),
`scores` (0..10), `snapshot` (per-call views of the cluster cache), `service` (the verbs), `http`
(the HTTP server), `server` (terms, leader election, informers), `schedconfig` (kube-scheduler's
configuration that wires the extender in).
"""
