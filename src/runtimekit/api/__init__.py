"""Generated wire-format stubs (`make proto`): kubelet device plugin v1beta1, kubelet PodResources v1
and the runtime's own `runtimekit.v1` API. Never edit the generated modules; change proto/ instead."""
