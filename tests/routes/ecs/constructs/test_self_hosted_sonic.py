"""Cartesia's services on ECS, as dev synthesizes them: NATS is a cluster, reachable on its route port only
from its own servers."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Template

from sonic_deploy.routes.ecs.config import NATS_ROUTE_PORT
from tests.conftest import resources_of


def _one(template: Template, type_name: str, prefix: str) -> tuple[str, dict[str, Any]]:
    (found,) = [(i, r) for i, r in resources_of(template, type_name).items() if i.startswith(prefix)]
    return found


def test_nats_runs_as_a_cluster_of_three(ecs_template: Template) -> None:
    _, service = _one(ecs_template, "AWS::ECS::Service", "SonicNatsService")
    assert service["Properties"]["DesiredCount"] == 3
    _, task = _one(ecs_template, "AWS::ECS::TaskDefinition", "SonicNatsTask")
    (container,) = task["Properties"]["ContainerDefinitions"]
    command = container["Command"]
    assert command[command.index("--cluster") + 1] == f"nats://0.0.0.0:{NATS_ROUTE_PORT}"
    assert command[command.index("--routes") + 1] == f"nats://nats.sonic.internal:{NATS_ROUTE_PORT}"
    assert "--config" not in command  # the image's config file carries the published route password


def test_the_route_port_is_open_only_between_the_nats_servers(ecs_template: Template) -> None:
    group, _ = _one(ecs_template, "AWS::EC2::SecurityGroup", "SonicNatsSecurityGroup")
    own = {"Fn::GetAtt": [group, "GroupId"]}
    routes = [
        rule["Properties"]
        for rule in resources_of(ecs_template, "AWS::EC2::SecurityGroupIngress").values()
        if rule["Properties"].get("FromPort") == NATS_ROUTE_PORT
    ]
    assert [(rule["GroupId"], rule["SourceSecurityGroupId"], rule["ToPort"]) for rule in routes] == [
        (own, own, NATS_ROUTE_PORT)
    ]


def _environment(template: Template, prefix: str) -> dict[str, str]:
    _, task = _one(template, "AWS::ECS::TaskDefinition", prefix)
    (container,) = task["Properties"]["ContainerDefinitions"]
    return {variable["Name"]: variable["Value"] for variable in container.get("Environment", [])}


def test_the_api_server_and_workers_are_told_where_nats_and_the_licence_proxy_are(
    ecs_template: Template, air_gapped: Template
) -> None:
    """In the variables config names (shipped as placeholders), the Cloud Map addresses: never the image's
    own default, which would resolve to nothing and roll the first create back tens of minutes in."""
    told = {
        "REPLACE-ME_NATS_URL": "nats://nats.sonic.internal:4222",
        "REPLACE-ME_LICENSE_PROXY_URL": "http://licence-proxy.sonic.internal:8080",
    }
    assert _environment(ecs_template, "SonicApiServerTask") == told
    worker = _environment(ecs_template, "SonicGpuWorkerTask")
    assert worker.items() >= (told | {"WORKER_REPLICAS": "1"}).items()
    assert _environment(air_gapped, "SonicApiServerTask") == told
    for untold in ("SonicNatsTask", "SonicLicenceProxyTask"):
        assert not _environment(ecs_template, untold).keys() & told.keys()
