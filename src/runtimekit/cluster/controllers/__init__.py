"""The embedded cluster's workload controllers, as kube-controller-manager runs them: Deployments,
ReplicaSets, StatefulSets and the garbage collector of owner references, on informers they share
(`informers.Informers`), each with its own queue and worker (`base.Controller`). `manager` starts
them together; the batch/v1 Job controller (`runtimekit.cluster.jobs`) and the Volcano Job
controller (`runtimekit.cluster.vcjob`) are started beside them."""
