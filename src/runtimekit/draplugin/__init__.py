"""The DRA kubelet plugin: ResourceSlices of the node's GPUs, NodePrepareResources through the runtime, CDI."""
