"""SonicService, SonicSecrets, ApiLoadBalancer, ImageRegistry as the ECS stack uses them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk.assertions import Match, Template
from constructs import IConstruct

from sonic_deploy.config import ConfigError, load_settings
from sonic_deploy.constructs.probe_image import COPY_MEMORY_MIB as PROBE_COPY_MEMORY_MIB
from sonic_deploy.constructs.registry import COPY_SINGLETON_UUID
from sonic_deploy.routes.ecs.constructs.sonic_service import plain_variables_reason
from tests.conftest import EditConfig, resources_of, synthesize_from


def _task(template: Template, container: str) -> dict[str, Any]:
    for task in resources_of(template, "AWS::ECS::TaskDefinition").values():
        for definition in task["Properties"]["ContainerDefinitions"]:
            if definition["Name"] == container:
                return dict(task["Properties"]) | {"container": definition}
    raise AssertionError(f"no container {container}")


def _service_of(template: Template, prefix: str) -> dict[str, Any]:
    return next(
        s["Properties"]
        for k, s in resources_of(template, "AWS::ECS::Service").items()
        if k.startswith(prefix)
    )


def test_gpu_worker_one_gpu_per_task_one_task_per_instance(ecs_template: Template) -> None:
    worker = _task(ecs_template, "gpu-worker")
    assert worker["container"]["ResourceRequirements"] == [{"Type": "GPU", "Value": "1"}]
    assert worker["RequiresCompatibilities"] == ["EC2"]
    service = _service_of(ecs_template, "SonicGpuWorker")
    assert service["PlacementConstraints"] == [{"Type": "distinctInstance"}]
    assert "DesiredCount" not in service  # its scalable target's: test_gpu_supply
    assert service["CapacityProviderStrategy"][0]["CapacityProvider"]["Ref"].startswith(
        "GpuCapacityCapacityProvider"
    )


def test_worker_health_check_waits_for_model_load(ecs_template: Template) -> None:
    check = _task(ecs_template, "gpu-worker")["container"]["HealthCheck"]
    assert "inferno_worker_capacity" in check["Command"][1]
    assert (check["StartPeriod"], check["Retries"], check["Interval"]) == (300, 10, 30)


def test_api_server_two_tasks_same_az_as_workers(ecs_template: Template) -> None:
    api, worker = _service_of(ecs_template, "SonicApiServer"), _service_of(ecs_template, "SonicGpuWorker")
    assert api["DesiredCount"] == 2
    subnets = api["NetworkConfiguration"]["AwsvpcConfiguration"]["Subnets"]
    assert subnets == worker["NetworkConfiguration"]["AwsvpcConfiguration"]["Subnets"]
    assert len(subnets) == 1


def test_rolling_deployments_with_circuit_breaker_and_alarms(ecs_template: Template) -> None:
    for prefix in ("SonicApiServer", "SonicGpuWorker", "SonicNats", "SonicLicenceProxy"):
        config = _service_of(ecs_template, prefix)["DeploymentConfiguration"]
        assert config["DeploymentCircuitBreaker"] == {"Enable": True, "Rollback": True}
        assert config["MinimumHealthyPercent"] == 100
    alarms = _service_of(ecs_template, "SonicGpuWorker")["DeploymentConfiguration"]["Alarms"]
    assert alarms["Enable"] is True and alarms["Rollback"] is True and len(alarms["AlarmNames"]) == 2


def test_secrets_injected_not_in_environment(ecs_template: Template) -> None:
    for task in resources_of(ecs_template, "AWS::ECS::TaskDefinition").values():
        for definition in task["Properties"]["ContainerDefinitions"]:
            names = {e["Name"] for e in definition.get("Environment", [])}
            assert not names & {"CARTESIA_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS_JSON"}
    worker = _task(ecs_template, "gpu-worker")["container"]
    assert {s["Name"] for s in worker["Secrets"]} == {
        "CARTESIA_API_KEY",
        "GOOGLE_APPLICATION_CREDENTIALS_JSON",
    }
    # Imported by name; nothing secret is written into the template.
    ecs_template.resource_count_is("AWS::SecretsManager::Secret", 0)
    assert "sonic/dev/cartesia-api-key" in json.dumps(worker["Secrets"])


def test_no_public_ingress(ecs_template: Template) -> None:
    rules = [
        rule
        for group in resources_of(ecs_template, "AWS::EC2::SecurityGroup").values()
        for rule in group["Properties"].get("SecurityGroupIngress", [])
    ]
    rules += [r["Properties"] for r in resources_of(ecs_template, "AWS::EC2::SecurityGroupIngress").values()]
    assert rules
    for rule in rules:
        assert rule.get("CidrIp") not in ("0.0.0.0/0",) and rule.get("CidrIpv6") != "::/0"
    ecs_template.has_resource_properties(
        "AWS::ElasticLoadBalancingV2::LoadBalancer",
        {
            "Scheme": "internal",
            "Type": "network",
        },
    )


def test_nlb_single_az_tcp_to_api_with_stream_friendly_timeouts(ecs_template: Template) -> None:
    lb = next(iter(resources_of(ecs_template, "AWS::ElasticLoadBalancingV2::LoadBalancer").values()))[
        "Properties"
    ]
    assert len(lb["Subnets"]) == 1
    ecs_template.has_resource_properties(
        "AWS::ElasticLoadBalancingV2::Listener",
        {
            "Protocol": "TCP",
            "Port": 80,
            "ListenerAttributes": [{"Key": "tcp.idle_timeout.seconds", "Value": "3600"}],
        },
    )
    ecs_template.has_resource_properties(
        "AWS::ElasticLoadBalancingV2::TargetGroup",
        {
            "Port": 5000,
            "Protocol": "TCP",
            "TargetType": "ip",
            "HealthCheckProtocol": "HTTP",
            "HealthCheckPath": "/status",
            "TargetGroupAttributes": Match.array_with(
                [{"Key": "deregistration_delay.timeout_seconds", "Value": "300"}]
            ),
        },
    )


def _not_the_probes(template: Template, type_name: str) -> dict[str, Any]:
    """The stack's resources of that type but the probe task's (its image's repository, copy and copying
    Lambda, its log group: probe_task.py, probe_image.py)."""
    probe_copier = f"{COPY_SINGLETON_UUID}{PROBE_COPY_MEMORY_MIB}MiB"
    return {
        i: r
        for i, r in resources_of(template, type_name).items()
        if not i.startswith("Probe") and probe_copier not in i
    }


def test_ecr_repositories(ecs_template: Template) -> None:
    repositories = _not_the_probes(ecs_template, "AWS::ECR::Repository")
    assert {r["Properties"]["RepositoryName"] for r in repositories.values()} == {
        f"sonic-dev/{n}" for n in ("api-server", "gpu-worker", "licence-proxy", "nats", "cloudwatch-agent")
    }
    for repository in repositories.values():
        props = repository["Properties"]
        assert repository["DeletionPolicy"] == "RetainExceptOnCreate"
        assert props["ImageTagMutability"] == "IMMUTABLE"
        assert props["ImageScanningConfiguration"] == {"ScanOnPush": True}
        assert props["EncryptionConfiguration"]["EncryptionType"] == "KMS"
        assert "LifecyclePolicy" in props


def test_images_copied_with_registry_credentials_before_services(ecs_template: Template) -> None:
    copies = _not_the_probes(ecs_template, "Custom::CDKECRDeployment")
    assert len(copies) == 5
    worker_copy = next(c for k, c in copies.items() if k.startswith("RegistryGpuWorkerCopy"))
    assert "REPLACE-ME.pkg.dev/cartesia/self-hosted/gpu-worker:REPLACE-ME" in json.dumps(worker_copy)
    assert "cartesia-registry" in json.dumps(worker_copy["Properties"].get("SrcCreds", ""))
    worker = next(
        s
        for k, s in resources_of(ecs_template, "AWS::ECS::Service").items()
        if k.startswith("SonicGpuWorker")
    )
    assert any(d.startswith("RegistryGpuWorkerCopy") for d in worker["DependsOn"])


def test_logs_encrypted_with_retention_and_container_insights(ecs_template: Template) -> None:
    groups = _not_the_probes(ecs_template, "AWS::Logs::LogGroup").values()
    # The image-copy Lambda's own group is made by cdk-ecr-deployment; every service's group is ours.
    ours = [g for g in groups if "/aws/lambda/" not in json.dumps(g["Properties"].get("LogGroupName", ""))]
    # Flow logs, 4 services, 2 agent groups, failed GPU launches and placements, the S3 prefix-list lookup.
    assert len(ours) == 9
    for group in ours:
        assert "KmsKeyId" in group["Properties"] and "RetentionInDays" in group["Properties"]
    ecs_template.has_resource_properties(
        "AWS::ECS::Cluster",
        {
            "ClusterSettings": [{"Name": "containerInsights", "Value": "enabled"}],
        },
    )
    worker = _task(ecs_template, "gpu-worker")["container"]
    assert worker["LogConfiguration"]["LogDriver"] == "awslogs"


def test_connected_mode_has_nat_egress(ecs_template: Template) -> None:
    ecs_template.resource_count_is("AWS::EC2::NatGateway", 1)


def test_scraper_reaches_each_metrics_port(edit_config: EditConfig) -> None:
    config = edit_config("environments/dev.toml", "metrics_port = 5000 ", "metrics_port = 9100 ")
    template = Template.from_stack(synthesize_from(config, routes=["ecs"])["ecs"])
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {
            "FromPort": 9100,
            "ToPort": 9100,
            "Description": "Prometheus scrape",
            "GroupId": {"Fn::GetAtt": [Match.string_like_regexp("^SonicApiServerSecurityGroup"), "GroupId"]},
        },
    )


def test_reusing_repositories_left_by_an_earlier_deploy(edit_config: EditConfig) -> None:
    config = edit_config(
        "environments/dev.toml", "copy_images = true", "copy_images = false\nreuse_repositories = true"
    )
    template = Template.from_stack(synthesize_from(config, routes=["ecs"])["ecs"])
    assert _not_the_probes(template, "AWS::ECR::Repository") == {}
    assert _not_the_probes(template, "Custom::CDKECRDeployment") == {}
    worker = next(
        d
        for t in resources_of(template, "AWS::ECS::TaskDefinition").values()
        for d in t["Properties"]["ContainerDefinitions"]
        if d["Name"] == "gpu-worker"
    )
    assert "/sonic-dev/gpu-worker:REPLACE-ME" in json.dumps(worker["Image"])


def test_image_copy_has_room_for_multi_gigabyte_images_and_its_logs_expire(ecs_template: Template) -> None:
    (copier,) = [
        f["Properties"]
        for key, f in _not_the_probes(ecs_template, "AWS::Lambda::Function").items()
        if key.startswith("CustomCDKECRDeployment")
    ]
    assert (copier["MemorySize"], copier["Timeout"]) == (3008, 900)
    (copy_logs,) = [
        group
        for key, group in _not_the_probes(ecs_template, "AWS::Logs::LogGroup").items()
        if key.startswith("CustomCDKECRDeployment")
    ]
    assert copy_logs["Properties"]["RetentionInDays"] == 30
    assert copy_logs["DeletionPolicy"] == "RetainExceptOnCreate"


def test_every_timer_on_a_calls_path_is_set(ecs_template: Template) -> None:
    """docs/operate.md, "What a deploy does to a live call": drain, then SIGTERM with time to finish."""
    containers = {
        d["Name"]: d
        for t in resources_of(ecs_template, "AWS::ECS::TaskDefinition").values()
        for d in t["Properties"]["ContainerDefinitions"]
    }
    assert containers["api-server"]["StopTimeout"] == 120
    assert containers["gpu-worker"]["StopTimeout"] == 120
    (group,) = resources_of(ecs_template, "AWS::ElasticLoadBalancingV2::TargetGroup").values()
    attributes = {a["Key"]: a["Value"] for a in group["Properties"]["TargetGroupAttributes"]}
    assert attributes["deregistration_delay.timeout_seconds"] == "300"
    (listener,) = resources_of(ecs_template, "AWS::ElasticLoadBalancingV2::Listener").values()
    listener_attributes = {a["Key"]: a["Value"] for a in listener["Properties"]["ListenerAttributes"]}
    assert int(listener_attributes["tcp.idle_timeout.seconds"]) >= 300


def test_an_idle_timeout_shorter_than_the_drain_is_refused(edit_config: EditConfig) -> None:
    config = edit_config("environments/dev.toml", "nlb_idle_timeout_s = 3600", "nlb_idle_timeout_s = 120")
    with pytest.raises(
        ConfigError, match=r"ecs.nlb_idle_timeout_s = 120: shorter than deregistration_delay_s"
    ):
        load_settings(config, "dev")


def test_the_load_balancer_may_reach_only_the_api_server(ecs_template: Template) -> None:
    """No default allow-all egress on the NLB's group: one rule, to the API server's group on its port."""
    ((lb_group_id, lb_group),) = [
        (key, group)
        for key, group in resources_of(ecs_template, "AWS::EC2::SecurityGroup").items()
        if group["Properties"]["GroupDescription"].startswith("Sonic API load balancer")
    ]
    assert "SecurityGroupEgress" not in lb_group["Properties"]
    egress = [
        rule["Properties"]
        for rule in resources_of(ecs_template, "AWS::EC2::SecurityGroupEgress").values()
        if rule["Properties"]["GroupId"] == {"Fn::GetAtt": [lb_group_id, "GroupId"]}
    ]
    (rule,) = egress
    assert (rule["IpProtocol"], rule["FromPort"], rule["ToPort"]) == ("tcp", 5000, 5000)
    assert rule["DestinationSecurityGroupId"]["Fn::GetAtt"][0].startswith("SonicApiServerSecurityGroup")
    assert "CidrIp" not in rule


def _acknowledged(construct: IConstruct) -> dict[str, str]:
    reasons: dict[str, str] = {}
    for entry in construct.node.metadata:
        if entry.type == "aws:cdk:acknowledged-rules":
            reasons |= entry.data
    return reasons


def test_plain_variables_acknowledged_by_name_only_where_there_are_some(ecs_stack: Stack) -> None:
    sonic = ecs_stack.node.find_child("Sonic")
    worker = _acknowledged(sonic.node.find_child("GpuWorker").node.find_child("Task"))
    addresses = (
        "REPLACE-ME_LICENSE_PROXY_URL (a peer's Cloud Map address), REPLACE-ME_NATS_URL (a peer's Cloud Map "
        "address)"
    )
    assert worker["AwsSolutions::AwsSolutions-ECS2"].startswith(
        f"plain variables {addresses}, WORKER_REPLICAS (a replica count (workers per GPU)): not secrets;"
    )
    api = _acknowledged(sonic.node.find_child("ApiServer").node.find_child("Task"))
    assert api["AwsSolutions::AwsSolutions-ECS2"].startswith(f"plain variables {addresses}: not secrets;")
    for bare in ("Nats", "LicenceProxy"):
        assert "AwsSolutions::AwsSolutions-ECS2" not in _acknowledged(
            sonic.node.find_child(bare).node.find_child("Task")
        )


def test_plain_variables_reason_names_what_config_declares_no_secret() -> None:
    reason = plain_variables_reason({"AUTH_ENABLED": "false"}, ["AUTH_ENABLED"])
    assert reason.startswith("plain variables AUTH_ENABLED (named like a secret, declared none in config")


def test_plain_variables_reason_lists_each() -> None:
    reason = plain_variables_reason({"WORKER_REPLICAS": "1", "LOG_LEVEL": "info"})
    assert reason.startswith(
        "plain variables LOG_LEVEL (a setting from config), WORKER_REPLICAS (a replica count (workers per GPU)):"
    )
