"""A self-signed CA and a serving certificate it signs, for a webhook with no cert-manager or Secret:
`runtimekit up` (in its state folder) and anyone running `runtimekit webhook` by hand.

`ensure_certificates(folder, names)` keeps `ca.crt`/`ca.key` once made (so a webhook configuration's
`caBundle` stays valid across restarts of a kept state folder) and writes `tls.crt`/`tls.key` for
`names` (DNS names and IP addresses) unless the present ones name exactly those and are valid for more
than `RENEW_BEFORE` yet; keys are mode 0600, files are replaced atomically (a server reading them
sees the old pair or the new one). ECDSA P-256, as cert-manager and kubeadm default to.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from runtimekit.base.files import write_atomic

VALID_FOR = datetime.timedelta(days=365)
CA_VALID_FOR = datetime.timedelta(days=3650)
RENEW_BEFORE = datetime.timedelta(days=30)


@dataclass(frozen=True)
class CertificateFiles:
    ca_cert: Path
    cert: Path
    key: Path

    def ca_bundle(self) -> bytes:
        return self.ca_cert.read_bytes()


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    write_atomic(path, _pem_key(key))
    os.chmod(path, 0o600)


def _alternative_names(names: Sequence[str]) -> list[x509.GeneralName]:
    found: list[x509.GeneralName] = []
    for name in names:
        try:
            found.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            found.append(x509.DNSName(name))
    return found


def _ca(folder: Path, now: datetime.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert_path, key_path = folder / "ca.crt", folder / "ca.key"
    if cert_path.exists() and key_path.exists():
        key = serialization.load_pem_private_key(key_path.read_bytes(), None)
        if isinstance(key, ec.EllipticCurvePrivateKey):
            return x509.load_pem_x509_certificate(cert_path.read_bytes()), key
    key = _key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lj-runtimekit-webhook-ca")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + CA_VALID_FOR)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(key, hashes.SHA256())
    )
    _write_key(key_path, key)
    write_atomic(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return cert, key


def _current(path: Path, names: Sequence[str], now: datetime.datetime) -> bool:
    """Whether the serving certificate at `path` names exactly `names` and stays valid a while yet."""
    if not path.exists():
        return False
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    try:
        given = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    wanted = set(_alternative_names(names))
    return set(given) == wanted and cert.not_valid_after_utc - now > RENEW_BEFORE


def ensure_certificates(folder: str | os.PathLike[str], names: Sequence[str]) -> CertificateFiles:
    """The CA and a serving certificate for `names` in `folder` (see the module docstring)."""
    where = Path(folder)
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    files = CertificateFiles(where / "ca.crt", where / "tls.crt", where / "tls.key")
    now = datetime.datetime.now(datetime.UTC)
    ca_cert, ca_key = _ca(where, now)
    if _current(files.cert, names, now) and files.key.exists():
        return files
    key = _key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALID_FOR)
        .add_extension(x509.SubjectAlternativeName(_alternative_names(names)), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    _write_key(files.key, key)
    write_atomic(files.cert, cert.public_bytes(serialization.Encoding.PEM))
    return files
