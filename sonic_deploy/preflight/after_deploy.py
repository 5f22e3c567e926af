"""`sonic-deploy preflight --after-deploy ROUTE`: what only the deployed route shows, asked once it has served
traffic (docs/preflight.md, "After a deploy"). The credentials first (another account's stack would look
undeployed), then the route's own checks (its preflight module's `after_deploy`)."""

from __future__ import annotations

from sonic_deploy.config import Settings
from sonic_deploy.preflight.account_checks import check_identity
from sonic_deploy.preflight.results import CheckResult, skipped
from sonic_deploy.preflight.runner import AwsClients
from sonic_deploy.routes import ROUTES


def after_deploy(clients: AwsClients, settings: Settings, route: str) -> list[CheckResult]:
    identity, account = check_identity(clients.sts, settings)
    if account is None:
        return [identity, skipped("all other checks", "they need working credentials for the right account")]
    results: list[CheckResult] = ROUTES[route].preflight_module().after_deploy(clients, settings)
    return [identity, *results]
