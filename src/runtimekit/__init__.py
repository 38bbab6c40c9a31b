"""LJ RuntimeKit: GPU sharing for Kubernetes.

Components live in sub-packages (see docs/architecture.md); `runtimekit.protocol`, `runtimekit.model`
and `runtimekit.kube` are shared by all of them.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("lj-runtimekit")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
