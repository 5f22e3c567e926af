"""An image pinned by digest in `[ecs.services.*]`: the digest is checked whole, and a bad one is refused
with the field, the value and the form it must take."""

from __future__ import annotations

import pytest

from sonic_deploy.config import ConfigError, load_settings
from tests.conftest import EditConfig

DEV = "environments/dev.toml"
AGENT_TAG = 'tag = "latest"'
DIGEST = "sha256:" + "ab" * 32


def test_a_digest_is_read_beside_the_tag(edit_config: EditConfig) -> None:
    config = edit_config(DEV, AGENT_TAG, f'{AGENT_TAG}\ndigest = "{DIGEST}"')
    service = load_settings(config, "dev").ecs_services["cloudwatch_agent"]
    assert (service.tag, service.digest) == ("latest", DIGEST)


def test_no_digest_by_default(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "", "")
    assert load_settings(config, "dev").ecs_services["cloudwatch_agent"].digest is None


@pytest.mark.parametrize(
    "digest",
    [
        "ab" * 32,  # no algorithm
        "sha256:" + "AB" * 32,  # upper case: not how registries write digests
        "sha256:" + "ab" * 31,  # too short
        "sha512:" + "ab" * 32,
        "sha256:" + "ab" * 32 + "\\n",  # a trailing newline, which a `$` anchor would let through
        "latest",
    ],
)
def test_a_bad_digest_is_refused(edit_config: EditConfig, digest: str) -> None:
    config = edit_config(DEV, AGENT_TAG, f'{AGENT_TAG}\ndigest = "{digest}"')
    with pytest.raises(ConfigError) as caught:
        load_settings(config, "dev")
    message = str(caught.value)
    assert message.startswith(f"{config}/{DEV}: ecs.services.cloudwatch_agent.digest = ")
    problem = "holds the control character" if digest.endswith("\\n") else "not an image manifest digest"
    assert problem in message and ". Fix: " in message
    assert "\n" not in message  # one line: the value is shown as its repr
