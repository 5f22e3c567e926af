"""What the speech-to-text clients (`ink`, `transcribe`) share: a stamped WebSocket, and their failures as
the typed errors of `errors`, named as the TTS client names them (`websocket.connect_error_kind`,
`websocket.closed_kind`)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from sonic_deploy.client.cartesia_ws import SocketClosedError, StampedConnection, open_connection
from sonic_deploy.client.errors import SonicError, error_for
from sonic_deploy.client.websocket import closed_kind, connect_error_kind


async def connect(
    url: str,
    headers: dict[str, str],
    timeout_s: float,
    ssl_context: ssl.SSLContext | None,
    *,
    service: str,
    credentials_fix: str,
) -> StampedConnection:
    """A socket to `url`; a refused handshake (401, 403) is an AccessError naming `credentials_fix`."""
    try:
        return await open_connection(url, headers, timeout_s, ssl_context)
    except InvalidStatus as error:
        status = error.response.status_code
        if status in (401, 403):
            raise error_for(
                "credentials", f"{service} refused the credentials (HTTP {status}). Fix: {credentials_fix}"
            ) from error
        raise error_for(connect_error_kind(error), f"{service}: {error}", status) from error
    except ssl.SSLCertVerificationError as error:
        raise error_for(
            "tls",
            f"{service}'s certificate is not trusted ({error.verify_message}). Fix: an ssl_context (or "
            "AWS_CA_BUNDLE for AWS) with the CA that signs it",
        ) from error
    except (OSError, TimeoutError, InvalidHandshake) as error:
        raise error_for(connect_error_kind(error), f"{service}: {error!r}") from error


def closed_error(error: ConnectionClosed, service: str) -> SonicError:
    """The socket closed under a session that had not closed it: `cut`, or `closed_1013` (over capacity)."""
    code = error.rcvd.code if error.rcvd is not None else None
    reason = (error.rcvd.reason if error.rcvd is not None else "") or "connection lost"
    closed = SocketClosedError(code, reason)
    return error_for(closed_kind(closed), f"{service} closed the session: {closed}")


async def close(connection: StampedConnection, timeout_s: float = 2.0) -> None:
    """Close the socket, or drop it if the close handshake does not complete in `timeout_s`."""
    try:
        await asyncio.wait_for(connection.close(), timeout_s)
    except (OSError, TimeoutError, ConnectionClosed):
        with contextlib.suppress(Exception):
            connection.transport.abort()
