"""The self-signed CA and serving certificate `runtimekit up` makes: a TLS client trusting the CA
verifies the server for each name; the CA is kept, the serving certificate made again only when its
names change; keys are private."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

from runtimekit.webhook.certs import ensure_certificates


def handshake(files_dir: Path, server_name: str) -> None:
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(files_dir / "tls.crt", files_dir / "tls.key")
    client_context = ssl.create_default_context(cafile=str(files_dir / "ca.crt"))
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        raw, _ = listener.accept()
        try:
            with server_context.wrap_socket(raw, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError):
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with (
            socket.create_connection(("127.0.0.1", port)) as raw,
            client_context.wrap_socket(raw, server_hostname=server_name) as tls,
        ):
            tls.sendall(b"x")
    finally:
        thread.join(5)
        listener.close()


def test_the_server_verifies_for_every_name(tmp_path: Path) -> None:
    ensure_certificates(tmp_path, ["127.0.0.1", "localhost", "lj-runtimekit-webhook.kube-system.svc"])
    for name in ("127.0.0.1", "localhost", "lj-runtimekit-webhook.kube-system.svc"):
        handshake(tmp_path, name)
    assert (tmp_path / "tls.key").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "ca.key").stat().st_mode & 0o777 == 0o600


def test_the_ca_is_kept_and_the_certificate_made_again_only_for_new_names(tmp_path: Path) -> None:
    first = ensure_certificates(tmp_path, ["127.0.0.1"])
    ca, cert = first.ca_cert.read_bytes(), first.cert.read_bytes()
    again = ensure_certificates(tmp_path, ["127.0.0.1"])
    assert (again.ca_cert.read_bytes(), again.cert.read_bytes()) == (ca, cert)
    renamed = ensure_certificates(tmp_path, ["127.0.0.1", "localhost"])
    assert renamed.ca_cert.read_bytes() == ca
    assert renamed.cert.read_bytes() != cert
    handshake(tmp_path, "localhost")
