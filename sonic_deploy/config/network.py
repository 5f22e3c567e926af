"""The `[network]` table's rules: each route's VPC range (its half of `network.cidr`, or a pinned range), room
for its subnets, and client ranges apart from the routes' own."""

from __future__ import annotations

import ipaddress
import re

from sonic_deploy.config.errors import MISSING, Fail
from sonic_deploy.config.schema import EnvironmentConfig
from sonic_deploy.routes import ROUTES

SUBNET_SIZE = 2 ** (32 - 20)  # the Network construct's private subnets are /20


def route_cidrs(cidr: str) -> dict[str, str]:
    """The VPC range within `network.cidr` (already checked) of each route that takes a half of it
    (`Route.network_half`: SageMaker the lower, ECS the upper). The two never overlap, so one client VPC can
    be peered with both; a route added later takes none, and its range from `network.route_cidrs`."""
    halves = list(ipaddress.IPv4Network(cidr).subnets(prefixlen_diff=1))
    return {
        route.name: str(halves[route.network_half])
        for route in ROUTES.values()
        if route.network_half is not None
    }


def _check_room(
    fail: Fail,
    field: str,
    cidr: str,
    network: ipaddress.IPv4Network,
    zones: list[str],
    *,
    public: bool,
    share: int,
) -> None:
    """`network` holds `share` VPCs, each a /20 private subnet per AZ and, with NAT, a /20's worth of /24
    public subnets."""
    needed = share * SUBNET_SIZE * (len(zones) + (1 if public else 0))
    if network.num_addresses < needed:
        prefix = 32 - (needed - 1).bit_length()
        what = f"a /20 private subnet in each of {len(zones)} AZs" + (
            " and the public subnets" if public else ""
        )
        fail(
            field,
            cidr,
            "too small: each route's VPC takes half of it, and a half needs " + what
            if share == 2
            else f"too small for {what}",
            f'use a /{prefix} or larger, e.g. "{network.network_address}/{min(prefix, 16)}"',
        )


# "The smallest VPC you can create uses a /28 netmask (16 IPv4 addresses), and the largest uses a /16 netmask
# (65,536 IPv4 addresses)" (Amazon EC2 API Reference, CreateVpc).
VPC_PREFIXES = range(16, 29)
CIDR = re.compile(r"(?:[0-9]{1,3}\.){3}[0-9]{1,3}/[0-9]{1,2}")


def _ipv4_network(
    fail: Fail, field: str, cidr: str, example: str = "10.60.0.0/16", *, vpc: bool = False
) -> ipaddress.IPv4Network:
    """`cidr` as a network: address/prefix in full (CloudFormation takes nothing shorter), host bits zero
    (the fix names the network meant), and for a VPC a /16 to /28."""
    if not CIDR.fullmatch(cidr):
        fail(
            field,
            cidr,
            "not an IPv4 network in CIDR notation (four numbers, a slash, a prefix length)",
            f'write one such as "{example}"',
        )
    try:
        network = ipaddress.IPv4Network(cidr)
    except ValueError as error:
        if "host bits set" in str(error):
            meant = ipaddress.IPv4Network(cidr, strict=False)
            fail(
                field,
                cidr,
                f"host bits set: the range /{meant.prefixlen} starts at {meant.network_address}",
                f'write "{meant}"',
            )
        fail(field, cidr, f"not an IPv4 network ({error})", f'write one such as "{example}"')
    if vpc and network.prefixlen not in VPC_PREFIXES:
        fail(
            field,
            cidr,
            "a VPC's range must be a /16 to a /28 (CreateVpc refuses any other size)",
            f'write one such as "{example}"',
        )
    return network


def check_cidr(fail: Fail, cidr: str, zones: list[str], *, public_subnets: bool) -> None:
    # Each route gets half (both halves the same size, though only the ECS route has public subnets). The
    # halves are the VPCs, so the whole may be a /15 (two /16 halves) down to a /27.
    network = _ipv4_network(fail, "network.cidr", cidr)
    if network.prefixlen + 1 not in VPC_PREFIXES:
        fail(
            "network.cidr",
            cidr,
            "each route's VPC takes half of this range, and a VPC must be a /16 to a /28",
            'write a /15 to a /27, e.g. "10.60.0.0/16"',
        )
    _check_room(fail, "network.cidr", cidr, network, zones, public=public_subnets, share=2)


def check_route_cidrs(fail: Fail, env: EnvironmentConfig, zones: list[str]) -> None:
    """Pinned route ranges: valid, large enough, and apart from the other route's (so both can be peered
    with one client VPC)."""
    net = env.network
    ranges = {route: ipaddress.IPv4Network(cidr) for route, cidr in route_cidrs(net.cidr).items()}
    for route, cidr in net.route_cidrs.items():
        field = f"network.route_cidrs.{route}"
        ranges[route] = _ipv4_network(fail, field, cidr, vpc=True)
        public = ROUTES[route].rules_module().public_subnets(env)
        _check_room(fail, field, cidr, ranges[route], zones, public=public, share=1)
    used = [route.name for route in ROUTES.values() if route.name in env.routes]
    for route in used:
        if route not in ranges:
            fail(
                f"network.route_cidrs.{route}",
                MISSING,
                "this route takes no half of network.cidr (the first two routes have both), so its VPC has no range",
                f'give it one apart from the other routes\', e.g. `{route} = "10.61.0.0/16"` under [network.route_cidrs]',
            )
    for i, first in enumerate(used):
        for second in used[i + 1 :]:
            if ranges[first].overlaps(ranges[second]):
                fail(
                    "network.route_cidrs",
                    {route: str(ranges[route]) for route in (first, second)},
                    "the two routes' VPCs overlap: one client VPC could not be peered with both",
                    "give one route another range (moving a deployed route's range replaces its VPC: see "
                    'docs/configuration.md, "Network ranges")',
                )


def check_client_cidrs(fail: Fail, env: EnvironmentConfig) -> None:
    net = env.network
    if net.existing_vpc:
        # An existing VPC's range is AWS's already: valid, but say so here rather than in a construct.
        _ipv4_network(fail, "network.existing_vpc.vpc_cidr", net.existing_vpc.vpc_cidr, vpc=True)
    own = [net.existing_vpc.vpc_cidr] if net.existing_vpc else [net.cidr, *net.route_cidrs.values()]
    workload = [ipaddress.IPv4Network(cidr) for cidr in own]
    for client in net.client_cidrs:
        network = _ipv4_network(fail, "network.client_cidrs", client, example="10.20.0.0/16")
        if any(network.overlaps(own) for own in workload):
            fail(
                "network.client_cidrs",
                client,
                f"overlaps the routes' own range {next(w for w in workload if network.overlaps(w))}: a VPC with "
                "that range cannot be peered or routed to them",
                "give the client VPC a range outside network.cidr, or move network.cidr",
            )
