"""Generated wire-format stubs: kubelet device plugin v1beta1, kubelet PodResources v1 and the runtime's
own `runtimekit.v1` API, generated from proto/ with their typing stubs when the package is built
(setup.py) or by `make proto`. Never edit the generated modules; change proto/ instead."""
