"""Counts and lengths AWS refuses at deploy time though each value alone is valid: checked at load so that
the mistake is one line, not a failed (and rolled back) stack."""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

from sonic_deploy.config.schema import EnvironmentConfig

Fail = Callable[[str, object, str, str], NoReturn]

# Amazon VPC quotas ("Security groups", https://docs.aws.amazon.com/vpc/latest/userguide/amazon-vpc-limits.html):
# inbound rules per security group default to 60 (adjustable), and that quota times security groups per network
# interface may not pass 1,000, so one group never holds more than 1,000 inbound rules.
MOST_RULES_PER_GROUP = 1000
DEFAULT_RULES_PER_GROUP = 60
# Besides one rule per client range, the groups that admit them hold the VPC's own range, and the interface
# endpoints' group one more port for Transcribe streaming (sonic_deploy/constructs/network.py).
OTHER_INBOUND_RULES = 2
MOST_CLIENT_CIDRS = MOST_RULES_PER_GROUP - OTHER_INBOUND_RULES
# ACM's RequestCertificate, DomainName: as the certificate's Common Name it "cannot exceed 64 octets" (RFC 5280);
# the stack has ACM issue the listener's certificate for domain_name when private_ca_arn is set.
LONGEST_CERTIFICATE_NAME = 64


def check_aws_limits(fail: Fail, env: EnvironmentConfig) -> None:
    clients = env.network.client_cidrs
    if len(clients) > MOST_CLIENT_CIDRS:
        fail(
            "network.client_cidrs",
            f"({len(clients)} ranges)",
            f"more than {MOST_CLIENT_CIDRS}: with the {OTHER_INBOUND_RULES} other rules of its security group "
            f"past the {MOST_RULES_PER_GROUP} inbound rules EC2 allows one group (the default quota is "
            f"{DEFAULT_RULES_PER_GROUP})",
            "merge ranges into wider ones (a transit gateway's summary route), or list fewer client VPCs",
        )
