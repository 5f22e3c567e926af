"""Two synths of the same config give byte-identical templates: no timestamps, no random names."""

from __future__ import annotations

import json

from aws_cdk import App
from aws_cdk.assertions import Template

from sonic_deploy.config import Settings
from sonic_deploy.stacks import add_stacks
from tests.cdk_context import cli_context
from tests.conftest import template


def _canonical(template: Template) -> str:
    return json.dumps(template.to_json(), sort_keys=True)


def test_synthesizing_twice_gives_identical_templates(dev_settings: Settings) -> None:
    # The first synth is the session's (tests/conftest.py, shared with the other tests); this is the second.
    app = App(context=cli_context())
    stacks = add_stacks(app, dev_settings)
    assert set(stacks) == {"sagemaker", "ecs"}
    for route, stack in stacks.items():
        assert _canonical(Template.from_stack(stack)) == _canonical(template("dev", route)), route
