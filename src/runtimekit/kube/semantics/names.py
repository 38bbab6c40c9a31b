"""Kubernetes' naming rules (apimachinery's `util/validation`), each written once: DNS subdomains,
DNS labels, qualified names (label and annotation keys), label values, and kubelet's extended
resource names.

Each `check_*` returns None when the value is valid, else a short reason; `is_extended_resource_name`
answers yes or no. Pure functions; callers: label selectors (`kube.semantics.labels`), the protocol's
name checks, the embedded API server's validation, the embedded kubelet and the runtime's requests.
"""

from __future__ import annotations

import functools
import re

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL_RE = re.compile(_DNS_LABEL)
_DNS_SUBDOMAIN_RE = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_NAME_PART_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_LABEL_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
MAX_LABEL_VALUE = 63
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character"
)
REQUESTS_PREFIX = "requests."  # quota names of requests; never an extended resource's name
NATIVE_DOMAIN = "kubernetes.io/"


def check_dns_label(value: str) -> str | None:
    """An RFC 1123 label (namespaces, container names): at most 63 characters."""
    if not value or len(value) > 63 or not _DNS_LABEL_RE.fullmatch(value):
        return "must be a DNS label (at most 63 lower-case alphanumerics or '-', alphanumeric at both ends)"
    return None


def check_dns_subdomain(value: str) -> str | None:
    """An RFC 1123 subdomain (object names, label key prefixes): at most 253 characters."""
    if not value or len(value) > 253 or not _DNS_SUBDOMAIN_RE.fullmatch(value):
        return "must be a DNS subdomain (lower-case alphanumerics, '-' and '.', at most 253 characters)"
    return None


def check_qualified_name(value: str) -> str | None:
    """A label or annotation key: optional DNS-subdomain prefix, '/', then a name of at most 63."""
    prefix, slash, name = value.rpartition("/")
    if slash and (problem := check_dns_subdomain(prefix)):
        return f"prefix {prefix!r} {problem}"
    if not name or len(name) > 63 or not _NAME_PART_RE.fullmatch(name):
        return "name part must be 1-63 characters, alphanumeric at both ends, with '-', '_' or '.' inside"
    return None


def check_label_value(value: str) -> str | None:
    """A label value: empty, or at most 63 alphanumerics with '-', '_' or '.' inside (apimachinery's
    `IsValidLabelValue`, whose messages these are)."""
    if len(value) > MAX_LABEL_VALUE:
        return f"must be no more than {MAX_LABEL_VALUE} characters"
    if not _LABEL_VALUE_RE.fullmatch(value):
        return LABEL_VALUE_MSG
    return None


@functools.lru_cache(maxsize=1024)
def is_extended_resource_name(name: str) -> bool:
    """`IsExtendedResourceName`: a domain-prefixed name outside `kubernetes.io` (so not cpu, memory,
    ephemeral-storage or hugepages-*), not a quota name, and a qualified name once `requests.` is put
    before it."""
    if "/" not in name or NATIVE_DOMAIN in name or name.startswith(REQUESTS_PREFIX):
        return False
    return check_qualified_name(REQUESTS_PREFIX + name) is None
