"""Certificates and keys for a test control plane, made with the `cryptography` package.

Owns the PKI of one throw-away cluster: a self-signed CA, serving certificates (the API server's, the
process kubelet's) for 127.0.0.1/localhost and the in-cluster names, client certificates whose subject is
the Kubernetes identity (CN = user, O = groups; e.g. the admin in `system:masters`), and the
service-account signing key. Elliptic-curve P-256 keys throughout: generated in milliseconds, accepted by
kube-apiserver for TLS and for signing service-account tokens (ES256). Files are PEM, keys unencrypted.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=7)  # outlives any test session; nothing here is kept


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its key, as PEM files."""

    cert: Path
    key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> Path:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)
    return path


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


class CertificateAuthority:
    """A self-signed CA in `directory` (ca.crt, ca.key) that signs the cluster's certificates."""

    def __init__(self, directory: Path, name: str = "weir-test-ca") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = _key()
        self.name = _name(name)
        now = datetime.datetime.now(datetime.UTC)
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.cert = directory / "ca.crt"
        self.cert.write_bytes(self.certificate.public_bytes(serialization.Encoding.PEM))
        self.key = _write_key(self._key, directory / "ca.key")

    def issue(self, stem: str, common_name: str, *, organizations: tuple[str, ...] = (),
              hosts: tuple[str, ...] = (), server: bool = False, client: bool = False) -> KeyPair:
        """`<stem>.crt` and `<stem>.key`: a leaf certificate for a server (with `hosts`: IPs or DNS names)
        and/or a client (its user is `common_name`, its groups `organizations`)."""
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        usages = [ExtendedKeyUsageOID.SERVER_AUTH] * server + [ExtendedKeyUsageOID.CLIENT_AUTH] * client
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organizations))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        if hosts:
            names: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        cert = self.directory / f"{stem}.crt"
        cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        return KeyPair(cert, _write_key(key, self.directory / f"{stem}.key"))


def signing_key(directory: Path, stem: str = "service-account") -> KeyPair:
    """The service-account token signing key (`<stem>.key`) and its public key (`<stem>.pub`, in the
    `cert` slot: what kube-apiserver's --service-account-key-file verifies tokens with)."""
    key = _key()
    public = directory / f"{stem}.pub"
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return KeyPair(public, _write_key(key, directory / f"{stem}.key"))
