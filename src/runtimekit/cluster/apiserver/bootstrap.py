"""The objects a real cluster has before anyone writes one, as kube-apiserver and kube-controller-manager
create them: the RBAC bootstrap policy (`authz.policy`), the `kubernetes` Service in `default` with the
Endpoints (and, when the server serves them, the EndpointSlice) that point at this server, and in every
namespace, existing or new, the `default` ServiceAccount (the serviceaccount controller's) and the
`kube-root-ca.crt` ConfigMap holding `ca.crt` (the root-ca-cert-publisher's), a CA this server makes up
once and keeps in those ConfigMaps.

Only missing objects are created (a kept state folder keeps what a user changed). The per-namespace
objects appear within the write that creates the namespace: a store listener notices the namespaces'
bucket changed (one integer compare on every other write). Bootstrap objects draw their uids from their
own random stream, so the uids of everything else stay as they were for a given seed. Called by
`server.ApiServer` (`bootstrap` when it is built, `publish_endpoints` each time it starts serving).
"""

from __future__ import annotations

import datetime
import ipaddress
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from runtimekit.cluster.apiserver.authz import policy
from runtimekit.cluster.apiserver.errors import ApiError
from runtimekit.cluster.apiserver.operations import Api
from runtimekit.cluster.apiserver.resources import ResourceInfo
from runtimekit.cluster.apiserver.store import Bucket
from runtimekit.kube.objects import JsonObject

KUBERNETES_SERVICE_IP = "10.96.0.1"  # the first address of kubeadm's default service range
ROOT_CA = "kube-root-ca.crt"
_RBAC = "rbac.authorization.k8s.io"
_SKIP_MIRROR = "endpointslice.kubernetes.io/skip-mirror"
_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"


def make_ca_pem(now: datetime.datetime) -> str:
    """A self-signed CA certificate (ECDSA P-256, ten years), PEM; its key is not kept: the embedded server
    serves plain HTTP, so the CA only has to be there for clients that read it."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


class Bootstrap:
    """Creates the missing bootstrap objects; `on_write` is the store listener for new namespaces."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self._rng = random.Random("runtimekit-bootstrap")
        self._namespaces: ResourceInfo = api.resource("", "v1", "namespaces")
        self._bucket: Bucket = api.store.bucket(self._namespaces)
        self._seen = -1
        self._busy = False
        self._ca = ""

    @contextmanager
    def _own_uids(self) -> Iterator[None]:
        with self.api.store.lock:
            kept, self.api.rng = self.api.rng, self._rng
            try:
                yield
            finally:
                self.api.rng = kept

    def _ensure(self, info: ResourceInfo, namespace: str, body: JsonObject) -> None:
        if self.api.store.get(info, namespace, body["metadata"]["name"]) is None:
            with self._own_uids():
                self.api.create(info, namespace, body)

    def policy(self) -> None:
        roles = self.api.resource(_RBAC, "v1", "clusterroles")
        bindings = self.api.resource(_RBAC, "v1", "clusterrolebindings")
        for role in policy.cluster_roles():
            self._ensure(roles, "", dict(role))
        for binding in policy.cluster_role_bindings():
            self._ensure(bindings, "", dict(binding))

    def on_write(self, storage: str = "") -> None:
        """After any write (the store's listener, given the storage key written): when a namespace was
        written, give every active namespace its objects."""
        if self._bucket.writes == self._seen or self._busy:
            return
        self._busy = True
        try:
            self._seen = self._bucket.writes
            self.namespaces()
        finally:
            self._busy = False

    def namespaces(self) -> None:
        accounts = self.api.resource("", "v1", "serviceaccounts")
        configmaps = self.api.resource("", "v1", "configmaps")
        for stored in self.api.store.objects(self._namespaces):
            if stored.name in self.api.terminating:
                continue
            try:
                self._ensure(accounts, stored.name, {"metadata": {"name": "default", "namespace": stored.name}})
                root_ca = {"metadata": {"name": ROOT_CA, "namespace": stored.name}, "data": {"ca.crt": self._ca_pem()}}
                self._ensure(configmaps, stored.name, root_ca)
            except ApiError:  # the namespace went away or started terminating meanwhile
                continue

    def _ca_pem(self) -> str:
        if not self._ca:
            configmaps = self.api.resource("", "v1", "configmaps")
            found = self.api.store.get(configmaps, "default", ROOT_CA)
            kept = found.obj().get("data", {}).get("ca.crt", "") if found is not None else ""
            self._ca = kept or make_ca_pem(datetime.datetime.fromtimestamp(self.api.clock(), datetime.UTC))
        return self._ca


def bootstrap(api: Api) -> Bootstrap:
    """Create the bootstrap objects now and keep the per-namespace ones coming for new namespaces."""
    made = Bootstrap(api)
    made.policy()
    made.on_write()
    api.store.add_listener(made.on_write)
    return made


def publish_endpoints(api: Api, host: str, port: int) -> None:
    """The `kubernetes` Service in `default` and its Endpoints (and EndpointSlice) at `host:port`."""
    ip = _address(host)
    services = api.resource("", "v1", "services")
    labels = {"component": "apiserver", "provider": "kubernetes"}
    service = {
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
        "spec": {
            "type": "ClusterIP",
            "clusterIP": KUBERNETES_SERVICE_IP,
            "sessionAffinity": "None",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}],
        },
    }
    ports = [{"name": "https", "port": port, "protocol": "TCP"}]
    endpoints = {
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": {_SKIP_MIRROR: "true"}},
        "subsets": [{"addresses": [{"ip": ip}], "ports": ports}],
    }
    _put(api, services, service)
    _put(api, api.resource("", "v1", "endpoints"), endpoints)
    slices = api.table.lookup("discovery.k8s.io", "v1", "endpointslices")
    if slices is not None:
        labels = {"kubernetes.io/service-name": "kubernetes", _MANAGED_BY: "endpointslicemirroring-controller.k8s.io"}
        endpoint_slice = {
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
            "addressType": "IPv6" if ":" in ip else "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
            "ports": ports,
        }
        _put(api, slices, endpoint_slice)


def _put(api: Api, info: ResourceInfo, body: JsonObject) -> None:
    """Create the object, or replace what it says when that differs (the port may change between starts)."""
    meta = body["metadata"]
    found = api.store.get(info, meta["namespace"], meta["name"])
    if found is None:
        api.create(info, meta["namespace"], body)
        return
    current = found.obj()
    keys = [key for key in body if key != "metadata"]
    if all(_contains(current.get(key), body[key]) for key in keys):
        return
    updated = {**current, **{key: body[key] for key in keys}}
    api.update(info, meta["namespace"], meta["name"], updated)


def _contains(have: Any, want: Any) -> bool:
    """Whether `have` holds everything `want` says (defaults the server added may be extra)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(_contains(have.get(k), v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(have) == len(want) and all(map(_contains, have, want))
    return bool(have == want)


def _address(host: str) -> str:
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return "127.0.0.1"
    return "127.0.0.1" if ip.is_unspecified else str(ip)
