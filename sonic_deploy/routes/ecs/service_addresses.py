"""Where the API server and the GPU workers find NATS and the licence proxy: the variable names are
Cartesia's (config, per service), the values the stack's Cloud Map addresses.

Cartesia's public pages name no variable for either address: its Helm chart (cartesia-kube, private) calls
the proxy's Kubernetes service `cartesia-license-proxy` (docs.cartesia.ai/self-hosted/air-gapped) and its
Compose files run on a bridge network. An image left to its default would dial a name that does not resolve
here, and the first create would roll back once the circuit breaker gives up, tens of minutes in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

from sonic_deploy.config.cartesia import ServiceConfig
from sonic_deploy.config.errors import MISSING
from sonic_deploy.config.placeholders import SHOWN
from sonic_deploy.routes.ecs.config import EcsConfig

# The services that dial the peers (the security groups open NATS and the licence proxy to them only).
DIALLERS = ("api_server", "gpu_worker")
# Field -> the peer (its service in config) whose address the variable holds, and the shipped placeholder.
ADDRESS_FIELDS = {
    "nats_url_variable": ("nats", "REPLACE-ME_NATS_URL"),
    "licence_proxy_url_variable": ("licence_proxy", "REPLACE-ME_LICENSE_PROXY_URL"),
}


def peer_variables(spec: ServiceConfig) -> dict[str, str]:
    """Peer -> the variable `spec`'s image reads its address from."""
    named = {peer: getattr(spec, field) for field, (peer, _) in ADDRESS_FIELDS.items()}
    return {peer: variable for peer, variable in named.items() if variable is not None}


def check_address_variables(fail: Callable[[str, object, str, str], NoReturn], ecs: EcsConfig) -> None:
    """Each dialler names both variables, once; no other service names one (nothing would let it dial)."""
    for name, spec in ecs.services.items():
        for field, (peer, placeholder) in ADDRESS_FIELDS.items():
            variable = getattr(spec, field)
            where = f"ecs.services.{name}.{field}"
            if name not in DIALLERS:
                if variable is not None:
                    fail(
                        where,
                        variable,
                        "only the API server and the GPU workers are given peers' addresses (the security "
                        "groups let nothing else reach NATS or the licence proxy)",
                        f"remove it from [ecs.services.{name}]",
                    )
                continue
            if variable is None:
                fail(
                    where,
                    MISSING,
                    f"{name} would not be told where {SHOWN[peer]} is: the image's default is not its Cloud Map name",
                    f'add {field} = "<the variable your bundle\'s {name} reads>" to [ecs.services.{name}] '
                    f'("{placeholder}" until you know it: make deploy refuses that)',
                )
            if variable in spec.environment or variable in spec.secrets:
                fail(
                    where,
                    variable,
                    "also set in this service's environment or secrets: the stack sets it to "
                    f"{SHOWN[peer]}'s address",
                    f"remove {variable} from environment and secrets in [ecs.services.{name}]",
                )
        if name in DIALLERS and spec.nats_url_variable == spec.licence_proxy_url_variable:
            fail(
                f"ecs.services.{name}.licence_proxy_url_variable",
                spec.licence_proxy_url_variable,
                "the same variable as nats_url_variable: one of the two addresses would be lost",
                "write the variable the image reads for the licence proxy's address",
            )
