"""What every AWS call of the client shares: botocore's view of a service, its credentials, its TLS.

A botocore client of the service (one per process, service and place: building one loads the service
model) gives the endpoint URL, the signing name, the Region and the error parser; the credentials are
boto3's chain (environment, profile, SSO, container or instance role), refreshed in a thread before they
expire; the CA bundle is boto3's (`AWS_CA_BUNDLE` or `ca_bundle` in the config file). The requests are
signed by `sigv4.RequestSigner` and sent on the event loop (aiohttp), not in boto3's threads.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import aiohttp
import botocore.session
from botocore.awsrequest import HeadersDict
from botocore.config import Config
from botocore.credentials import ReadOnlyCredentials
from botocore.exceptions import BotoCoreError, NoRegionError
from botocore.parsers import create_parser
from botocore.utils import get_environ_proxies

from sonic_deploy.client.errors import AccessError, SonicError, error_for
from sonic_deploy.client.http import pooled_session

# Enough of an error body for its code and message; the rest is not read.
ERROR_BODY_BYTES = 64 * 1024
# How long the end of a finished stream's body may take before its connection is dropped, not reused.
DRAIN_S = 5.0


@dataclass(frozen=True)
class ServiceRuntime:
    """What a botocore client of one service works out once: where, how to sign, how to read errors."""

    session: botocore.session.Session
    endpoint_url: str
    region: str
    signing_name: str
    parser: Any
    service_model: Any


def service_runtime(
    session: botocore.session.Session, service: str, region: str | None, endpoint_url: str | None
) -> ServiceRuntime:
    """ValueError, naming the fix, when no Region can be found."""
    try:
        client = session.create_client(
            service,
            region_name=region,
            endpoint_url=endpoint_url,
            config=Config(retries={"total_max_attempts": 1}),
        )
    except NoRegionError:
        raise ValueError(
            f"no AWS Region for {service}. Fix: pass region= (the service's Region) or set AWS_REGION"
        ) from None
    return ServiceRuntime(
        session=session,
        endpoint_url=client.meta.endpoint_url.rstrip("/"),
        region=client.meta.region_name,
        signing_name=client.meta.service_model.signing_name,
        parser=create_parser(client.meta.service_model.metadata["protocol"]),
        service_model=client.meta.service_model,
    )


@functools.cache
def default_runtime(service: str, region: str | None, endpoint_url: str | None) -> ServiceRuntime:
    """A botocore session with the default chain (the environment, AWS_PROFILE, SSO, the container or
    instance role: what boto3's own default session finds, though not a profile set in code with
    `boto3.setup_default_session`, for which pass a session), once per process, service and place (a client
    loads tens of thousands of objects of service model, which a busy agent must not build again, nor leave
    behind as garbage)."""
    return service_runtime(botocore.session.get_session(), service, region, endpoint_url)


def tls_context(session: botocore.session.Session) -> ssl.SSLContext | None:
    """boto3's CA bundle (AWS_CA_BUNDLE or the config file's ca_bundle), or None for the system's."""
    ca_bundle = session.get_config_variable("ca_bundle")
    return ssl.create_default_context(cafile=ca_bundle) if ca_bundle else None


def environ_proxy(url: str) -> str | None:
    """As boto3 does: HTTP(S)_PROXY / NO_PROXY for `url`, by botocore's own rule (looked up once by a
    client, not on every request)."""
    proxy: str | None = get_environ_proxies(url).get(urllib.parse.urlsplit(url).scheme)
    return proxy


def request_error(error: Exception, what: str) -> SonicError | None:
    """The typed error for an aiohttp failure to reach `what` or to send to it, or None if it is not one."""
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        return error_for(
            "tls",
            f"{what}'s certificate is not trusted ({error.certificate_error}). Fix: AWS_CA_BUNDLE (or "
            "ca_bundle in the AWS config file) naming the CA that signs it",
        )
    if isinstance(error, aiohttp.ClientConnectorError):
        refused = isinstance(error.os_error, ConnectionRefusedError)
        return error_for("refused" if refused else "connect", repr(error))
    if isinstance(error, (TimeoutError, aiohttp.ServerTimeoutError)):
        return error_for("timeout", repr(error))
    if isinstance(error, aiohttp.ClientError):
        return error_for("cut", repr(error))
    return None


class Credentials:
    """The chain's credentials, read from botocore's own object on every request (cheap while they are
    fresh; botocore may also refresh them for another client sharing the session), and refreshed in a
    thread, one caller at a time, when botocore says they must be: a refresh may call STS, SSO or the
    instance metadata service, and must not stall the event loop (every stream's audio with it). Callers
    that arrive during a refresh wait for it, and get the new credentials, not the ones it replaces."""

    def __init__(self, session: botocore.session.Session) -> None:
        self._session = session
        self._source: Any = None
        self._lock = asyncio.Lock()

    def anew(self) -> Credentials:
        """The same credentials, with a lock for another event loop."""
        fresh = Credentials(self._session)
        fresh._source = self._source
        return fresh

    def _fresh(self) -> bool:
        """Loaded, and not due for a refresh (static credentials never are)."""
        if self._source is None:
            return False
        refresh_needed = getattr(self._source, "refresh_needed", None)
        return not (callable(refresh_needed) and refresh_needed())

    async def get(self) -> ReadOnlyCredentials:
        if not (self._fresh() and not self._lock.locked()):
            async with self._lock:
                if not self._fresh():
                    try:
                        await asyncio.to_thread(self._load_or_refresh)
                    except BotoCoreError as error:  # an expired SSO session, a failed role assumption...
                        raise AccessError("credentials", repr(error)) from error
        frozen: ReadOnlyCredentials = self._source.get_frozen_credentials()  # fresh: no I/O
        return frozen

    def _load_or_refresh(self) -> None:
        if self._source is None:
            self._source = self._session.get_credentials()
        if self._source is None:
            raise AccessError(
                "credentials",
                "no AWS credentials found. Fix: a task or instance role, or AWS_PROFILE on a laptop "
                "(aws sso login --profile NAME); against `sonic-deploy probe serve` any values do",
            )
        self._source.get_frozen_credentials()  # botocore refreshes them here, if they are due


def parsed_error(
    runtime: ServiceRuntime, output_shape: Any, status: int, headers: Iterable[tuple[str, str]], raw: bytes
) -> tuple[str, str, dict[str, Any]]:
    """An error response's code, message and modelled fields, parsed by botocore's own parser as boto3
    parses it (the error's own shape too, for fields such as SageMaker's `OriginalStatusCode`). A body that
    is not UTF-8 (a proxy's page, say) is named by its status."""
    answer = {"status_code": status, "headers": HeadersDict(headers), "body": raw}
    try:
        parsed: dict[str, Any] = runtime.parser.parse(answer, output_shape)
        code = str(parsed.get("Error", {}).get("Code") or status)
        shape = runtime.service_model.shape_for_error_code(code)
        if shape is not None:
            parsed.update(runtime.parser.parse(answer, shape))
    except ValueError:
        parsed, code = {}, str(status)
    message = str(parsed.get("Error", {}).get("Message") or raw[:200].decode(errors="replace"))
    return code, message, parsed


async def error_body(response: aiohttp.ClientResponse) -> bytes:
    """An error response's body, to its end or ERROR_BODY_BYTES (it may come in several reads)."""
    raw = b""
    while len(raw) < ERROR_BODY_BYTES and (part := await response.content.read(ERROR_BODY_BYTES - len(raw))):
        raw += part
    return raw


async def _drain(response: aiohttp.ClientResponse) -> None:
    try:
        async with asyncio.timeout(DRAIN_S):
            while await response.content.readany():
                pass
    except (TimeoutError, aiohttp.ClientError, OSError):
        response.close()
        return
    response.release()


class StreamingClient:
    """What a streaming client of one AWS service keeps per event loop: one pool of at most
    `max_connections` connections (made on first use, on the loop that uses it) and the credentials' lock;
    and the finished streams whose connections go back to the pool once their bodies end. Use it as an
    async context manager, or call `close()`."""

    def __init__(self, runtime: ServiceRuntime, max_connections: int, timeout: aiohttp.ClientTimeout) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, not {max_connections}")
        self._runtime = runtime
        self._credentials = Credentials(runtime.session)
        self._max_connections = max_connections
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining: set[asyncio.Future[None]] = set()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        for draining in list(self._draining):
            draining.cancel()
        await asyncio.gather(*self._draining, return_exceptions=True)
        if self._session is not None and self._loop is asyncio.get_running_loop():
            await self._session.close()
        self._session = None

    def _here(self) -> None:
        """The pool and the credentials' lock belong to one event loop: on another (a second
        `asyncio.run`), both are made anew. The old pool's sockets are its old loop's, closed with it."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop, self._session = loop, None
            self._credentials = self._credentials.anew()

    def _credentials_here(self) -> Credentials:
        self._here()
        return self._credentials

    def _pool(self) -> aiohttp.ClientSession:
        self._here()
        if self._session is None or self._session.closed:
            context = tls_context(self._runtime.session)
            self._session = pooled_session(self._max_connections, context, self._timeout)
        return self._session

    async def credentials(self) -> ReadOnlyCredentials:
        """The credentials the next request is signed with (refreshed first if they are about to expire)."""
        return await self._credentials_here().get()

    def _recycle(self, response: aiohttp.ClientResponse) -> None:
        """The connection of a finished stream back to the pool once its body has ended: at once as a rule
        (the end follows the last event in the same read), or in the background, so that the caller's
        stream ends with its last event and not when the server gets round to closing the body."""
        if response.content.at_eof():
            response.release()
            return
        draining = asyncio.ensure_future(_drain(response))
        self._draining.add(draining)
        draining.add_done_callback(self._draining.discard)
