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
from typing import Any

import aiohttp
import botocore.session
from botocore.awsrequest import HeadersDict
from botocore.config import Config
from botocore.credentials import ReadOnlyCredentials
from botocore.exceptions import BotoCoreError, NoRegionError
from botocore.parsers import create_parser
from botocore.utils import get_environ_proxies

from sonic_deploy.client.errors import AccessError
from sonic_deploy.client.http import PooledClient


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
            f"no AWS Region for {service}. Fix: pass region= (the service's Region) or set AWS_DEFAULT_REGION"
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


class StreamingClient(PooledClient):
    """What a streaming client of one AWS service keeps per event loop: the pool (`http.PooledClient`),
    with boto3's CA bundle, and the credentials' lock."""

    def __init__(self, runtime: ServiceRuntime, max_connections: int, timeout: aiohttp.ClientTimeout) -> None:
        super().__init__(max_connections, timeout)
        self._runtime = runtime
        self._credentials = Credentials(runtime.session)

    def _here(self) -> None:
        """The credentials' lock belongs to one event loop too: on another, it is made anew."""
        if self._loop is not asyncio.get_running_loop():
            self._credentials = self._credentials.anew()
        super()._here()

    def _ssl_context(self) -> ssl.SSLContext | None:
        return tls_context(self._runtime.session)

    def _credentials_here(self) -> Credentials:
        self._here()
        return self._credentials

    async def credentials(self) -> ReadOnlyCredentials:
        """The credentials the next request is signed with (refreshed first if they are about to expire)."""
        return await self._credentials_here().get()
