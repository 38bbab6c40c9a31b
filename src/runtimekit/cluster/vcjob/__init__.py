"""Volcano's `batch.volcano.sh/v1alpha1` Job controller for the embedded cluster: tasks of pods under
a PodGroup, the job state machine and its lifecycle policies (`controller`, `states`, `policies`,
`jobpods`)."""
