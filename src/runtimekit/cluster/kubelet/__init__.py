"""The simulated kubelet of the embedded cluster's nodes (docs/user-guide/embedded-cluster.md).

`kubelet` (the `SimulatedKubelet`: Node registration, pod admission and life cycle, graceful
deletion) built from `nodestatus` (the Node object and its Lease), `admission` (the resource fit
check), `devices` (extended resources from device plugins or advertised directly), `status` (pod and
node status shapes) and `runner` (simulated run times and container runners); `devicemanager` (the
kubelet side of the device plugin API) and `podresources` (the PodResources API).
"""
