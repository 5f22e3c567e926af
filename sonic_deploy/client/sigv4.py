"""AWS Signature Version 4 for the probe's one kind of request (a POST to a fixed URL), at little CPU, and
presigned URLs (the query-string form, for a WebSocket handshake such as Amazon Transcribe's).

It computes what botocore's `SigV4Auth` computes (the tests compare the two, header for header), but works
out once what does not change between requests: the canonical path and host, the fixed headers, and the
signing key (four HMACs, derived again by botocore for every request, here once a day per secret). With
256 streams on a 2-core host, botocore's signing was about a tenth of the client's CPU, spent on the
event loop that every stream's timestamps share.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
from collections.abc import Mapping
from urllib.parse import quote, urlsplit, urlunsplit

from botocore.auth import SIGNED_HEADERS_BLACKLIST
from botocore.credentials import ReadOnlyCredentials
from botocore.utils import normalize_url_path

ALGORITHM = "AWS4-HMAC-SHA256"
_DEFAULT_PORTS = {"http": 80, "https": 443}
# Set by the signer or the HTTP client, or left unsigned by botocore: not for the caller to fix.
_NOT_FIXED = {"host", "authorization", "x-amz-date", "x-amz-security-token", *SIGNED_HEADERS_BLACKLIST}


def _trimmed(value: str) -> str:
    """SigV4's Trimall: no spaces at either end, runs of spaces as one."""
    return " ".join(value.split())


def signed_host(url: str) -> str:
    """The `host` the signature covers, as the HTTP client sends it: lower case, the port only if not the
    scheme's default, an IPv6 address in brackets."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port is not None and parts.port != _DEFAULT_PORTS.get(parts.scheme):
        host = f"{host}:{parts.port}"
    return host


class SigningKey:
    """The key for one scope (`region/service/aws4_request`), derived again only when the secret or the
    day changes: four HMACs, which botocore computes for every request."""

    def __init__(self, service: str, region: str) -> None:
        self.scope_tail = f"{region}/{service}/aws4_request"
        self._key_for: tuple[str, str] | None = None
        self._key = b""

    def key(self, secret: str, date: str) -> bytes:
        if self._key_for != (secret, date):
            key = f"AWS4{secret}".encode()
            for part in (date, *self.scope_tail.split("/")):
                key = hmac.digest(key, part.encode(), "sha256")
            self._key_for, self._key = (secret, date), key
        return self._key

    def signature(self, secret: str, stamp: str, canonical_request: str) -> str:
        """The hex signature of a canonical request made at `stamp` (`YYYYMMDDTHHMMSSZ`)."""
        scope = f"{stamp[:8]}/{self.scope_tail}"
        digest = hashlib.sha256(canonical_request.encode()).hexdigest()
        to_sign = f"{ALGORITHM}\n{stamp}\n{scope}\n{digest}"
        return hmac.new(self.key(secret, stamp[:8]), to_sign.encode(), hashlib.sha256).hexdigest()


def _keys(credentials: ReadOnlyCredentials) -> tuple[str, str]:
    access_key, secret_key = credentials.access_key, credentials.secret_key
    if access_key is None or secret_key is None:
        raise ValueError("credentials without an access key or a secret key cannot sign")
    return access_key, secret_key


def _stamp(now: datetime.datetime | None) -> str:
    if now is not None and now.tzinfo is None:
        raise ValueError("`now` must carry its time zone")
    moment = now.astimezone(datetime.UTC) if now is not None else datetime.datetime.now(datetime.UTC)
    return moment.strftime("%Y%m%dT%H%M%SZ")


def _encoded(value: str) -> str:
    """SigV4's URI encoding of a query name or value: everything but A-Z a-z 0-9 - _ . ~"""
    return quote(value, safe="-_.~")


def presign_url(
    url: str,
    params: Mapping[str, str],
    credentials: ReadOnlyCredentials,
    *,
    service: str,
    region: str,
    expires_s: int = 300,
    now: datetime.datetime | None = None,
    key: SigningKey | None = None,
) -> str:
    """`url` (no query string of its own) with `params` and the SigV4 query parameters, for a GET with no
    body that signs only `host`: the URL botocore's `SigV4QueryAuth` makes of the same inputs, byte for
    byte (the tests compare the two): the operation's parameters in the order given, then X-Amz-Algorithm,
    -Credential, -Date, -Expires, -SignedHeaders, -Security-Token (with temporary credentials) and
    -Signature. The host is signed as the HTTP client sends it (`signed_host`), so a `wss://` URL signs
    like its `https://` twin. `key`: one kept between calls, to derive the signing key once a day."""
    parts = urlsplit(url)
    if parts.query:
        raise ValueError(f"a URL with a query string is not supported here: {url}")
    access_key, secret_key = _keys(credentials)
    key = key or SigningKey(service, region)
    if key.scope_tail != f"{region}/{service}/aws4_request":
        raise ValueError(f"the signing key is for {key.scope_tail}, not {region}/{service}")
    stamp = _stamp(now)
    auth = {
        "X-Amz-Algorithm": ALGORITHM,
        "X-Amz-Credential": f"{access_key}/{stamp[:8]}/{key.scope_tail}",
        "X-Amz-Date": stamp,
        "X-Amz-Expires": str(expires_s),
        "X-Amz-SignedHeaders": "host",
    }
    if credentials.token is not None:
        auth["X-Amz-Security-Token"] = credentials.token
    pairs = [(_encoded(name), _encoded(value)) for name, value in (*params.items(), *auth.items())]
    query = "&".join(f"{name}={value}" for name, value in pairs)
    request = "\n".join(
        (
            "GET",
            quote(normalize_url_path(parts.path), safe="/~"),
            "&".join(f"{name}={value}" for name, value in sorted(pairs)),
            f"host:{signed_host(url)}",
            "",
            "host",
            hashlib.sha256(b"").hexdigest(),
        )
    )
    signature = key.signature(secret_key, stamp, request)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, f"{query}&X-Amz-Signature={signature}", ""))


class RequestSigner:
    """Signs POSTs of any body to `url` with `headers`, for `service` in `region`."""

    def __init__(self, url: str, headers: Mapping[str, str], service: str, region: str) -> None:
        parts = urlsplit(url)
        if parts.query:
            raise ValueError(f"a URL with a query string is not supported here: {url}")
        self._path = quote(normalize_url_path(parts.path), safe="/~")
        self._headers = dict(headers)
        self._canonical = {name.lower(): _trimmed(value) for name, value in headers.items()}
        refused = sorted(set(self._canonical) & _NOT_FIXED)
        if refused:
            raise ValueError(f"fixed headers {refused} are set by the signer or the HTTP client, or unsigned")
        if len(self._canonical) != len(self._headers):
            raise ValueError(f"fixed headers must be distinct, ignoring case: {sorted(headers)}")
        self._canonical["host"] = signed_host(url)
        self._key = SigningKey(service, region)

    def sign(
        self, payload: bytes, credentials: ReadOnlyCredentials, now: datetime.datetime | None = None
    ) -> dict[str, str]:
        """The headers to send with `payload`: the fixed ones, `X-Amz-Date`, `X-Amz-Security-Token` (with
        temporary credentials) and `Authorization` (the HTTP client adds `Host` itself, from the URL)."""
        access_key, secret_key = _keys(credentials)
        stamp = _stamp(now)
        headers = {**self._headers, "X-Amz-Date": stamp}
        canonical = {**self._canonical, "x-amz-date": stamp}
        if credentials.token:
            headers["X-Amz-Security-Token"] = credentials.token
            canonical["x-amz-security-token"] = _trimmed(credentials.token)
        names = sorted(canonical)
        signed_names = ";".join(names)
        request = "\n".join(
            (
                "POST",
                self._path,
                "",  # no query string
                *(f"{name}:{canonical[name]}" for name in names),
                "",
                signed_names,
                hashlib.sha256(payload).hexdigest(),
            )
        )
        signature = self._key.signature(secret_key, stamp, request)
        headers["Authorization"] = (
            f"{ALGORITHM} Credential={access_key}/{stamp[:8]}/{self._key.scope_tail}, "
            f"SignedHeaders={signed_names}, Signature={signature}"
        )
        return headers
