"""Every shipped environment synthesizes offline: no context lookup is left for the CLI to make."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template

from sonic_deploy.config import environment_names, load_settings
from sonic_deploy.stacks import add_stacks
from tests.cdk_context import cli_context
from tests.conftest import CONFIG_DIR, EditConfig, synthesize_from


@pytest.mark.parametrize("env_name", environment_names(CONFIG_DIR))
def test_synthesizes_without_lookups(env_name: str) -> None:
    app = App(context=cli_context())
    stacks = add_stacks(app, load_settings(CONFIG_DIR, env_name))
    assembly = app.synth()
    manifest = json.loads((Path(assembly.directory) / "manifest.json").read_text())
    assert manifest.get("missing") is None, f"{env_name} needs AWS lookups at synth: {manifest['missing']}"
    zones = load_settings(CONFIG_DIR, env_name).environment.network.availability_zones
    assert all(stack.availability_zones == zones for stack in stacks.values())


def test_existing_vpc_synthesizes_both_routes_without_a_new_vpc(edit_config: EditConfig) -> None:
    existing = (
        '\n[network.existing_vpc]\nvpc_id = "vpc-0123456789abcdef0"\nvpc_cidr = "10.0.0.0/16"\n'
        'availability_zones = ["us-east-2a", "us-east-2b"]\n'
        'private_subnet_ids = ["subnet-0aaaaaaaaaaaaaaa0", "subnet-0bbbbbbbbbbbbbbb0"]\n'
        'private_route_table_ids = ["rtb-0aaaaaaaaaaaaaaa0", "rtb-0bbbbbbbbbbbbbbb0"]\n'
    )
    config = edit_config(
        "environments/dev.toml", "flow_log_retention_days = 30\n", "flow_log_retention_days = 30\n" + existing
    )
    stacks = synthesize_from(config)
    for stack in stacks.values():
        template = Template.from_stack(stack)
        template.resource_count_is("AWS::EC2::VPC", 0)
        template.has_resource_properties("AWS::EC2::FlowLog", {"ResourceId": "vpc-0123456789abcdef0"})
    Template.from_stack(stacks["ecs"]).has_resource_properties(
        "AWS::AutoScaling::AutoScalingGroup", {"VPCZoneIdentifier": ["subnet-0aaaaaaaaaaaaaaa0"]}
    )
