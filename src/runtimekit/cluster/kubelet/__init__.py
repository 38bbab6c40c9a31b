"""Simulated kubelet parts for the embedded cluster: the device manager (kubelet side of the device
plugin API) and the PodResources API."""
