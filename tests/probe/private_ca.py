"""A private certificate authority and a server certificate it signed for 127.0.0.1, as PEM files: what an
internal TLS endpoint presents, and the CA file its clients are told to trust."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

HOST = "127.0.0.1"


@dataclass(frozen=True)
class PrivateCa:
    ca: Path  # the CA certificate a client trusts
    cert: Path  # the server's certificate (for 127.0.0.1), signed by the CA
    key: Path  # the server's private key, unencrypted


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey
) -> x509.CertificateBuilder:
    """Valid from an hour ago for a day: a clock a little off on a busy machine does not matter."""
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
    )


def _ca_certificate(
    name: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
) -> x509.Certificate:
    return (
        _certificate(name, issuer, key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False
        )
        .sign(issuer_key, hashes.SHA256())
    )


def make_private_ca(folder: Path, *, subordinate: bool = False) -> PrivateCa:
    """`subordinate`: the server's certificate is signed by a CA under a root, as AWS Private CA's subordinate
    CAs are; the server presents it with that CA's certificate, and `ca` is that CA alone (not the root)."""
    root_key = ec.generate_private_key(ec.SECP256R1())
    root_name = _name("sonic-deploy test root CA" if subordinate else "sonic-deploy test private CA")
    root = _ca_certificate(root_name, root_key, root_name, root_key)
    ca, ca_key, ca_name = root, root_key, root_name
    if subordinate:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = _name("sonic-deploy test subordinate CA")
        ca = _ca_certificate(ca_name, ca_key, root_name, root_key)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = (
        _certificate(_name(HOST), ca_name, server_key)
        # Clients check the address they dialled against the subject alternative names, not the CN.
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(HOST))]), critical=False
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    files = PrivateCa(folder / "private-ca.pem", folder / "server.pem", folder / "server-key.pem")
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    chain = [server, ca] if subordinate else [server]
    files.cert.write_bytes(b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain))
    files.key.write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return files
