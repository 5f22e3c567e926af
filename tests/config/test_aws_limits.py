"""Counts and lengths AWS would refuse at deploy time, refused at load in one line: more client ranges than
one security group holds, a domain name longer than ACM's 64-character first name for a certificate the
stack has issued."""

from __future__ import annotations

import pytest

from sonic_deploy.config import ConfigError, load_settings
from sonic_deploy.config.aws_limits import LONGEST_CERTIFICATE_NAME, MOST_CLIENT_CIDRS
from tests.config.test_ecs_config import CA, CERT, stage_config
from tests.conftest import EditConfig

DEV = "environments/dev.toml"


def client_ranges(count: int) -> str:
    """`count` distinct /32s in 172.16.0.0/12, outside the shipped config's 10.60.0.0/16."""
    return ", ".join(f'"172.16.{n // 256}.{n % 256}/32"' for n in range(count))


@pytest.mark.parametrize("count", [MOST_CLIENT_CIDRS + 1, 1000])
def test_more_client_ranges_than_a_security_group_holds(edit_config: EditConfig, count: int) -> None:
    config = edit_config(
        DEV, 'cidr = "10.60.0.0/16"', f'cidr = "10.60.0.0/16"\nclient_cidrs = [{client_ranges(count)}]'
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(config, "dev")
    message = str(caught.value)
    assert f"network.client_cidrs = '({count} ranges)': more than {MOST_CLIENT_CIDRS}: " in message, message
    assert "the default quota is 60" in message and "Fix: merge ranges" in message


def test_as_many_client_ranges_as_fit_load(edit_config: EditConfig) -> None:
    config = edit_config(
        DEV,
        'cidr = "10.60.0.0/16"',
        f'cidr = "10.60.0.0/16"\nclient_cidrs = [{client_ranges(MOST_CLIENT_CIDRS)}]',
    )
    assert len(load_settings(config, "dev").environment.network.client_cidrs) == MOST_CLIENT_CIDRS


def name_of(length: int) -> str:
    """A valid DNS name of `length` characters."""
    tail = ".internal.example.com"
    head = length - len(tail)
    if head <= 63:  # a DNS label's most
        return "a" * head + tail
    return "a" * (head // 2) + "." + "b" * (head - head // 2 - 1) + tail


def test_a_domain_name_acm_cannot_issue_a_certificate_for(edit_config: EditConfig) -> None:
    name = name_of(100)
    table = f'[ecs.api]\nprivate_ca_arn = "{CA}"\ndomain_name = "{name}"\n'
    with pytest.raises(ConfigError) as caught:
        load_settings(stage_config(edit_config, table), "stage")
    message = str(caught.value)
    assert (
        f"ecs.api.domain_name = '{name}': 100 characters: ACM issues a certificate whose first name"
        in message
    )
    assert "Fix: use a name of 64 characters or fewer" in message


@pytest.mark.parametrize(
    ("source", "length"),
    [(f'private_ca_arn = "{CA}"', LONGEST_CERTIFICATE_NAME), (f'certificate_arn = "{CERT}"', 100)],
    ids=["issued-64", "brought-100"],
)
def test_a_name_acm_takes_or_a_certificate_brought_loads(
    edit_config: EditConfig, source: str, length: int
) -> None:
    """A certificate you bring may name a long name among its alternative names: only ACM's own issue has
    the 64-character Common Name."""
    table = f'[ecs.api]\n{source}\ndomain_name = "{name_of(length)}"\n'
    settings = load_settings(stage_config(edit_config, table), "stage")
    assert settings.environment.ecs is not None and settings.environment.ecs.api.domain_name == name_of(
        length
    )
