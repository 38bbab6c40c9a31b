"""LJ RuntimeKit: GPU sharing for Kubernetes.

Components live in sub-packages (see docs/architecture.md); `runtimekit.protocol`, `runtimekit.model`
and `runtimekit.kube` are shared by all of them.
"""

from runtimekit._version import __version__

__all__ = ["__version__"]
