"""The kit's admission webhook in the embedded cluster, as `runtimekit up` runs it by default.

`start_webhook(cluster)` makes a CA and a serving certificate for 127.0.0.1 in `<state>/webhook/`
(the CA is kept with a kept state folder), serves the webhook on a free port of 127.0.0.1 with the
cluster's protocol in standalone mode (the embedded scheduler places GPU pods), watches the nodes
through its own client, and registers the `lj-runtimekit-webhook` configurations with a `url` and the
CA as `caBundle` (replacing any left from an earlier run). Its `stop()` deletes them again, so a kept
state folder never holds configurations pointing at a webhook that is gone; `remove_configurations`
does the same for a cluster started without the webhook.
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from runtimekit.cluster.apiserver.identity import service_account
from runtimekit.kube.errors import ConflictError, KubeError, NotFoundError
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informer import Informer
from runtimekit.kube.objects import JsonObject, Node
from runtimekit.protocol import KitProtocol
from runtimekit.webhook.fleet import FleetView
from runtimekit.webhook.registration import NAME, Client, configurations
from runtimekit.webhook.server import WebhookServer
from runtimekit.webhook.settings import SchedulerMode, WebhookSettings
from runtimekit.webhook.tlsfiles import ServingCertificate

log = logging.getLogger(__name__)
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
PLURALS = ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")


class WebhookHost(Protocol):
    """What the webhook needs of the embedded cluster (`runtimekit.cli.embedded.EmbeddedCluster`)."""

    state_dir: Path
    protocol: KitProtocol

    def http(self, agent: str) -> KubeHttp: ...


@dataclass
class StartedWebhook:
    server: WebhookServer
    nodes: Informer[Node]
    http: KubeHttp
    admin: KubeHttp

    @property
    def informers(self) -> list[Informer[Any]]:
        return [self.nodes]

    def stop(self) -> None:
        _remove(self.admin)
        self.server.stop()
        self.nodes.stop(2.0)
        self.http.close()
        self.admin.close()


def _put(admin: KubeHttp, plural: str, obj: JsonObject) -> None:
    try:
        admin.post(f"{ADMISSION}/{plural}", obj)
    except ConflictError:
        current = admin.get(f"{ADMISSION}/{plural}/{NAME}")
        obj["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        admin.put(f"{ADMISSION}/{plural}/{NAME}", obj)


def remove_configurations(cluster: WebhookHost) -> None:
    """Delete the kit's configurations if stored (a kept state folder of a run with the webhook)."""
    admin = cluster.http("runtimekit-up")
    try:
        _remove(admin)
    finally:
        admin.close()


def _remove(admin: KubeHttp) -> None:
    for plural in PLURALS:
        try:
            admin.delete(f"{ADMISSION}/{plural}/{NAME}")
        except NotFoundError:
            pass
        except KubeError as exc:
            log.warning("webhook: could not remove the %s %s: %s", plural, NAME, exc)


def start_webhook(cluster: WebhookHost) -> StartedWebhook:
    from runtimekit.webhook.certs import ensure_certificates  # cryptography: only when the webhook runs

    files = ensure_certificates(cluster.state_dir / "webhook", ["127.0.0.1", "localhost"])
    scheduler = service_account("kube-system", "lj-runtimekit-scheduler").username
    settings = WebhookSettings(cluster.protocol, SchedulerMode.STANDALONE, frozenset({scheduler}))
    view = FleetView(cluster.protocol)
    http, admin = cluster.http("runtimekit-webhook"), cluster.http("runtimekit-up")
    nodes = Informer(http, "/api/v1/nodes", view.on_event, name="webhook nodes").start()
    tls = ServingCertificate(files.cert, files.key)
    server = WebhookServer(settings, tls, view.fleet, "127.0.0.1", 0, ready=nodes.synced.is_set).start()
    started = StartedWebhook(server, nodes, http, admin)
    try:
        client = Client(base64.b64encode(files.ca_bundle()).decode(), url=server.url)
        for plural, obj in zip(PLURALS, configurations(client, hami=settings.hami), strict=True):
            _put(admin, plural, cast(dict[str, Any], obj))
    except BaseException:
        started.stop()
        raise
    log.info("webhook serving %s; configurations %s registered", server.url, NAME)
    return started
