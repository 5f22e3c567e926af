"""Two synths of the same config give byte-identical templates: no timestamps, no random names."""

from __future__ import annotations

import json

from aws_cdk import App
from aws_cdk.assertions import Template

from sonic_deploy.config import Settings
from sonic_deploy.stacks import add_stacks
from tests.cdk_context import cli_context


def _templates(settings: Settings) -> dict[str, str]:
    app = App(context=cli_context())
    stacks = add_stacks(app, settings)
    return {
        route: json.dumps(Template.from_stack(stack).to_json(), sort_keys=True)
        for route, stack in stacks.items()
    }


def test_synthesizing_twice_gives_identical_templates(dev_settings: Settings) -> None:
    first, second = _templates(dev_settings), _templates(dev_settings)
    assert set(first) == {"sagemaker", "ecs"}
    assert first == second
