"""The kit's version: the one place it is written (pyproject.toml reads it from here at build time).

The image tags in deploy/, the Helm chart's appVersion and the Dockerfile's default VERSION must
match it (tests/deploy/test_versions.py).
"""

__version__ = "0.1.0"
