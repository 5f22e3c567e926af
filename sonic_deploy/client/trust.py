"""Trust for a private CA: the ECS route's API over TLS presents a certificate your own CA signed (AWS
Private CA, or one you imported into ACM), which the default trust store does not hold.

    context = ca_context("/etc/ssl/sonic/private-ca.pem")
    WebSocketClient(URL, api_key=KEY, model_id="sonic-3", ssl_context=context)

The context trusts the bundle's certificates only (no public roots): the API is reached inside the VPC,
under a name only your CA vouches for. Host names are checked, as `ssl.create_default_context` does."""

from __future__ import annotations

import argparse
import ssl
from pathlib import Path

from sonic_deploy.user_files import RefusedFileError, read_regular

PEM_CERTIFICATE = b"-----BEGIN CERTIFICATE-----"
# A system's whole trust store is under 1 MB; a larger file is not a CA bundle.
LARGEST_BUNDLE = 16 * 2**20


class CaBundleError(ValueError):
    """The file cannot serve as a CA bundle; the message says why and what to give instead."""


def ca_context(path: str | Path) -> ssl.SSLContext:
    """A client context that trusts the PEM certificates in `path`, or CaBundleError naming the file."""
    try:  # a regular file only: a FIFO would block here until a writer came
        data = read_regular(Path(path), limit=LARGEST_BUNDLE)
    except RefusedFileError as error:
        raise CaBundleError(
            f"cannot read {path}: {error.problem}. Fix: the PEM file of the CA that signed the "
            "API's certificate (e.g. `aws acm-pca get-certificate-authority-certificate` for a Private CA)"
        ) from None
    if PEM_CERTIFICATE not in data:
        raise CaBundleError(
            f"{path} holds no PEM certificate (no '-----BEGIN CERTIFICATE-----' line). Fix: give the CA "
            "certificate in PEM; convert a DER file with `openssl x509 -inform der -in CA.cer -out CA.pem`"
        )
    try:
        # With a cafile, the default context loads that file alone, not the default store.
        context = ssl.create_default_context(cafile=str(path))
    except ssl.SSLError as error:
        raise CaBundleError(
            f"{path}: OpenSSL cannot load its certificates ({error.reason or error}). Fix: give the CA "
            "certificate in PEM, as `openssl x509 -in FILE -noout -subject` reads it"
        ) from None
    # A subordinate Private CA's certificate alone is a trust anchor too (Python 3.13 sets this by default;
    # 3.11 and 3.12 would otherwise ask for the chain up to a self-signed root).
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    return context


def ca_bundle_argument(text: str) -> str:
    """argparse's `type=` for a `--ca-bundle FILE` option: the path once it loads, else argparse's one-line
    error naming the option, the file and the fix (the file is loaded again where it is used)."""
    try:
        ca_context(text)
    except CaBundleError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text
