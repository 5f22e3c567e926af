"""The rules of a self-hosted route's `[<route>.api]` table (ECS, EKS): TLS on the API's load balancer, and its
certificate. Each takes the route's table name, so its errors name the field the user wrote."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sonic_deploy.config.aws_limits import LONGEST_CERTIFICATE_NAME
from sonic_deploy.config.base import DEFAULT_ENVIRONMENT
from sonic_deploy.config.cartesia import ApiConfig
from sonic_deploy.config.errors import MISSING, Fail
from sonic_deploy.config.regions import partition

if TYPE_CHECKING:
    from sonic_deploy.config.schema import EnvironmentConfig

# "The connection idle timeout for TLS listeners is 350 seconds and can't be modified" (Elastic Load
# Balancing, "Update the TCP idle timeout for your Network Load Balancer listener").
TLS_IDLE_TIMEOUT_S = 350
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
# A DNS name as ACM takes it (labels of letters, digits and hyphens, at most 253 characters); a wildcard
# certificate's name is not something an agent dials, so not here.
DOMAIN_NAME = re.compile(
    r"(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]"
)


def check_api(
    fail: Fail, table: str, name: str, env: EnvironmentConfig, api: ApiConfig, deregistration_delay_s: int
) -> None:
    """TLS on the route's load balancer: on outside the default environment unless turned off, and then
    with a certificate that ACM can attach to a listener in this Region. ARNs are matched whole
    (`re.fullmatch`: a pasted trailing newline is refused, where `$` would let it through)."""
    tls = api.tls if api.tls is not None else name != DEFAULT_ENVIRONMENT
    arn_partition, region = partition(env.region), re.escape(env.region)
    certificate = rf"arn:{arn_partition}:acm:{region}:\d{{12}}:certificate/{UUID}"
    authority = rf"arn:{arn_partition}:acm-pca:{region}:\d{{12}}:certificate-authority/{UUID}"
    fix_source = (
        f'certificate_arn = "arn:{arn_partition}:acm:{env.region}:<account>:certificate/<id>" (imported into '
        f'or issued by ACM in {env.region}), or private_ca_arn = "arn:{arn_partition}:acm-pca:{env.region}:'
        '<account>:certificate-authority/<id>" and the stack has ACM issue one'
    )
    if api.certificate_arn is not None and not re.fullmatch(certificate, api.certificate_arn):
        fail(
            f"{table}.api.certificate_arn",
            api.certificate_arn,
            f"not an ACM certificate ARN in {env.region} (partition {arn_partition}): a listener takes only a "
            "certificate of its own Region",
            f'copy the ARN from ACM in {env.region}: "arn:{arn_partition}:acm:{env.region}:<account>:'
            'certificate/<id>"',
        )
    if api.private_ca_arn is not None and not re.fullmatch(authority, api.private_ca_arn):
        fail(
            f"{table}.api.private_ca_arn",
            api.private_ca_arn,
            f"not an AWS Private CA ARN in {env.region} (partition {arn_partition}): a private CA is Regional "
            "and issues ACM certificates in its own Region only",
            f'copy the ARN from AWS Private CA in {env.region}: "arn:{arn_partition}:acm-pca:{env.region}:'
            '<account>:certificate-authority/<id>"',
        )
    if api.certificate_arn is not None and api.private_ca_arn is not None:
        fail(
            f"{table}.api.private_ca_arn",
            api.private_ca_arn,
            "both certificate_arn and private_ca_arn are set: the listener takes one certificate",
            "keep certificate_arn (a certificate you have) or private_ca_arn (the stack has one issued)",
        )
    if api.domain_name is not None and not DOMAIN_NAME.fullmatch(api.domain_name):
        fail(
            f"{table}.api.domain_name",
            api.domain_name,
            "not a DNS name in lower case (labels of letters, digits and hyphens, separated by dots)",
            'write the name agents dial, e.g. "sonic.internal.example.com"',
        )
    # Plain text outside dev only when a second, deliberately named setting accepts it: a dev [<route>.api]
    # block copied elsewhere must not ship the API key in clear by accident.
    if not tls and name != DEFAULT_ENVIRONMENT and not api.allow_plaintext_outside_dev:
        fail(
            f"{table}.api.tls",
            False,
            f"outside the default environment ({DEFAULT_ENVIRONMENT}) a plain listener (ws://) would carry the "
            "API key, transcripts and audio in clear inside the VPC",
            f"remove tls = false and set domain_name and {fix_source}; or, to accept plain text here on "
            f"purpose, add allow_plaintext_outside_dev = true under [{table}.api]",
        )
    if api.allow_plaintext_outside_dev and (tls or name == DEFAULT_ENVIRONMENT):
        fail(
            f"{table}.api.allow_plaintext_outside_dev",
            True,
            "TLS is on here, so it accepts nothing"
            if tls
            else f"the default environment ({DEFAULT_ENVIRONMENT}) is plain unless tls = true: it accepts nothing",
            "remove it",
        )
    if not tls:
        return
    why = "TLS is on by default outside dev" if api.tls is None else f"{table}.api.tls = true"
    if api.certificate_arn is None and api.private_ca_arn is None:
        fail(
            f"{table}.api.certificate_arn",
            MISSING,
            f"{why}, and the listener has no certificate source",
            f"set {fix_source}; or, to serve ws:// in clear inside the VPC on purpose, `tls = false` and "
            f"`allow_plaintext_outside_dev = true` under [{table}.api]",
        )
    if deregistration_delay_s > TLS_IDLE_TIMEOUT_S:
        fail(
            f"{table}.deregistration_delay_s",
            deregistration_delay_s,
            f"{why}, and a TLS listener's idle timeout is fixed at {TLS_IDLE_TIMEOUT_S} s (nlb_idle_timeout_s "
            "applies to TCP listeners only): a call that pauses while its API server drains would be cut first",
            f"set it to {TLS_IDLE_TIMEOUT_S} or less",
        )
    if api.domain_name is None:
        fail(
            f"{table}.api.domain_name",
            MISSING,
            f"{why}: agents check the certificate against the host they dial, so the URL needs that name",
            'set domain_name = "<the name the certificate covers>" and point it (a private DNS record) at the '
            "stack output LoadBalancerDnsName",
        )
    # The probe task (canary, --in-vpc) trusts only the public CAs of its image's bundle, and an in-VPC run
    # cannot take --ca-bundle: a certificate of a private CA fails every canary run's TLS handshake.
    canary = env.canary.enabled if env.canary.enabled is not None else name != DEFAULT_ENVIRONMENT
    if canary and api.private_ca_arn is not None:
        fail(
            "canary.enabled",
            canary,
            f"the canary's probe task trusts only public CAs, and {table}.api.private_ca_arn issues the listener a "
            "certificate of a private one: every run would fail its TLS handshake",
            f"set enabled = false under [canary], or a publicly trusted {table}.api.certificate_arn instead of "
            "private_ca_arn",
        )


def check_api_limits(fail: Fail, table: str, api: ApiConfig) -> None:
    """The name ACM would issue the listener's certificate for (with private_ca_arn) fits its Common Name."""
    name = api.domain_name
    if api.private_ca_arn is not None and name is not None and len(name) > LONGEST_CERTIFICATE_NAME:
        fail(
            f"{table}.api.domain_name",
            name,
            f"{len(name)} characters: ACM issues a certificate whose first name (its Common Name) has at "
            f"most {LONGEST_CERTIFICATE_NAME}",
            f"use a name of {LONGEST_CERTIFICATE_NAME} characters or fewer (a shorter label or zone), or "
            "bring a certificate that names it (certificate_arn)",
        )
