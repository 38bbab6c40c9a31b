"""The kit's version: the one place it is written (pyproject.toml reads it from here at build time).

Files that cannot import it spell it out and are checked against it (tests/packaging/test_metadata.py):
the image tags in deploy/ and deploy-all.sh, the Helm chart's appVersion and the Dockerfile's
default VERSION.
"""

__version__ = "0.1.0"

# The kit's image as the manifests and the controller's job-agent Jobs name it by default.
IMAGE_REPOSITORY = "ghcr.io/lj-runtimekit/runtimekit"
DEFAULT_IMAGE = f"{IMAGE_REPOSITORY}:{__version__}"
