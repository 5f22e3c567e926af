"""An image pinned by digest in `[ecs.services.*]`: the digest is checked whole, and a bad one is refused
with the field, the value and the form it must take."""

from __future__ import annotations

import pytest

from sonic_deploy.config import ConfigError, load_settings
from tests.conftest import CONFIG_DIR, EditConfig

DEV = "environments/dev.toml"
SHIPPED_DIGEST = 'digest = "sha256:f5680928b37cd5afacb5fd3de1b7ef7bfba57976f4f8b4227b49615467460cf2"'
DIGEST = "sha256:" + "ab" * 32


def test_a_digest_is_read_beside_the_tag(edit_config: EditConfig) -> None:
    config = edit_config(DEV, SHIPPED_DIGEST, f'digest = "{DIGEST}"')
    service = load_settings(config, "dev").ecs_services["cloudwatch_agent"]
    assert (service.tag, service.digest) == ("1.300071.0b1720-amd64", DIGEST)


def test_no_digest_when_none_is_written(edit_config: EditConfig) -> None:
    config = edit_config(DEV, SHIPPED_DIGEST, "")
    assert load_settings(config, "dev").ecs_services["cloudwatch_agent"].digest is None


def test_aws_published_images_are_pinned_by_digest_in_the_shipped_config() -> None:
    """AWS's own images on public.ecr.aws (not Docker Hub's library mirrored there: NATS, BusyBox): a tag
    can be moved, so the copy pulls what the digest names, or fails."""
    ecs = load_settings(CONFIG_DIR, "dev").environment.ecs
    assert ecs is not None
    published = {
        name: s
        for name, s in ecs.services.items()
        if s.source.startswith("public.ecr.aws/") and not s.source.startswith("public.ecr.aws/docker/")
    }
    assert published  # the CloudWatch agent at least
    for name, service in published.items():
        assert service.digest is not None and service.tag != "latest", name


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
    config = edit_config(DEV, SHIPPED_DIGEST, f'digest = "{digest}"')
    with pytest.raises(ConfigError) as caught:
        load_settings(config, "dev")
    message = str(caught.value)
    assert message.startswith(f"{config}/{DEV}: ecs.services.cloudwatch_agent.digest = ")
    problem = "holds the control character" if digest.endswith("\\n") else "not an image manifest digest"
    assert problem in message and ". Fix: " in message
    assert "\n" not in message  # one line: the value is shown as its repr
