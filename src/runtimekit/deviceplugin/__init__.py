"""The kubelet device plugin: registration, ListAndWatch, Allocate forwarding to the runtime."""
