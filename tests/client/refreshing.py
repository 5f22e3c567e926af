"""A botocore session whose credentials expire on a clock the test moves: what a role's credentials do."""

from __future__ import annotations

import datetime
import threading

import botocore.session
from botocore.credentials import RefreshableCredentials


class Clock:
    def __init__(self) -> None:
        self.now = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)

    def __call__(self) -> datetime.datetime:
        return self.now


def refreshing_session(
    clock: Clock, keys: list[str], fetched_in: list[threading.Thread] | None = None
) -> botocore.session.Session:
    """A botocore session whose first provider in the chain gives credentials that expire in an hour and
    are refreshed (each time with the next key) when botocore says they must be: 55 minutes on the clock
    is inside botocore's mandatory refresh window. `fetched_in` gets the thread of each fetch."""
    issued = iter(keys)

    def fetch() -> dict[str, str]:
        if fetched_in is not None:
            fetched_in.append(threading.current_thread())
        expiry = clock.now + datetime.timedelta(hours=1)
        return {
            "access_key": next(issued),
            "secret_key": "s",
            "token": "t",
            "expiry_time": expiry.isoformat(),
        }

    class Provider:
        METHOD = "test-refreshing"
        CANONICAL_NAME = "TestRefreshing"

        def load(self) -> RefreshableCredentials:
            first = fetch()
            return RefreshableCredentials(
                first["access_key"],
                first["secret_key"],
                first["token"],
                datetime.datetime.fromisoformat(first["expiry_time"]),
                fetch,
                self.METHOD,
                time_fetcher=clock,
            )

    session = botocore.session.Session()
    session.get_component("credential_provider").insert_before("env", Provider())
    return session
