"""SonicEndpoint: model, endpoint config, endpoint, execution role."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aws_cdk import App, Duration, Stack, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Capture, Match, Template
from cdk_nag import AwsSolutionsChecks, NIST80053R5Checks

from sonic_deploy.config import Settings
from sonic_deploy.routes.sagemaker.constructs.sonic_endpoint import SonicEndpoint
from tests.conftest import resources_of

ARN = "arn:aws:sagemaker:us-east-2:570011132906:model-package/Sonic3-Sagemaker-V5"


def test_model_uses_package_with_network_isolation_in_two_azs(sagemaker_template: Template) -> None:
    subnets = Capture()
    sagemaker_template.has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "PrimaryContainer": {"ModelPackageName": ARN},
            "EnableNetworkIsolation": True,
            "VpcConfig": {"Subnets": subnets, "SecurityGroupIds": Match.any_value()},
        },
    )
    refs = [s["Ref"] for s in subnets.as_array()]
    zones = {
        resources_of(sagemaker_template, "AWS::EC2::Subnet")[r]["Properties"]["AvailabilityZone"]
        for r in refs
    }
    assert zones == {"us-east-2a", "us-east-2b"}


def test_endpoint_config_variant(sagemaker_template: Template) -> None:
    sagemaker_template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [
                Match.object_like(
                    {
                        "VariantName": "AllTraffic",
                        "InstanceType": "ml.g6e.xlarge",
                        "InitialInstanceCount": 2,
                        "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
                        "ContainerStartupHealthCheckTimeoutInSeconds": 900,
                    }
                )
            ],
        },
    )


def test_no_volume_key_for_local_nvme_instance(sagemaker_template: Template) -> None:
    # ml.g6e.xlarge has local NVMe storage: SageMaker refuses a KmsKeyId for it.
    config = next(iter(resources_of(sagemaker_template, "AWS::SageMaker::EndpointConfig").values()))
    assert "KmsKeyId" not in config["Properties"]


def _endpoint_stack(*, volume_key: bool) -> Template:
    return Template.from_stack(_endpoint(App(), volume_key=volume_key, instance_type="ml.p3.2xlarge"))


def _endpoint(app: App, *, volume_key: bool, instance_type: str, **options: Any) -> Stack:
    """SonicEndpoint in a bare stack; `options`: its optional props (fallback types, a reservation)."""
    stack = Stack(app, "Test")
    vpc = ec2.Vpc(
        stack,
        "Vpc",
        availability_zones=["us-east-2a", "us-east-2b"],
        nat_gateways=0,
        subnet_configuration=[ec2.SubnetConfiguration(name="P", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)],
    )
    key = kms.Key(stack, "Key")
    SonicEndpoint(
        stack,
        "Sonic",
        model_package_arn=ARN,
        endpoint_name="sonic-test",
        instance_type=instance_type,
        instance_count=2,
        vpc=vpc,
        subnets=vpc.isolated_subnets,
        log_key=key,
        log_retention=logs.RetentionDays.ONE_WEEK,
        volume_key=key if volume_key else None,
        startup_health_check_timeout=Duration.minutes(10),
        model_data_download_timeout=Duration.minutes(20),
        **options,
    )
    return stack


def test_volume_key_when_instance_has_no_local_storage() -> None:
    template = _endpoint_stack(volume_key=True)
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "KmsKeyId": {"Fn::GetAtt": [Match.string_like_regexp("^Key"), "Arn"]},
        },
    )
    statements = json.dumps(template.find_resources("AWS::IAM::Policy"))
    assert "kms:CreateGrant" in statements
    [key] = template.find_resources("AWS::KMS::Key").values()
    key_policy = {s.get("Sid"): s for s in key["Properties"]["KeyPolicy"]["Statement"]}
    assert "UseThroughSagemaker" in key_policy
    # The key policy names the endpoint's role itself, as CreateEndpointConfig's KmsKeyId asks.
    named = key_policy["TheEndpointRoleForItsVolume"]
    assert named["Principal"]["AWS"]["Fn::GetAtt"][0].startswith("SonicExecutionRole")
    assert "kms:CreateGrant" in named["Action"]


def test_security_group_has_no_ingress(sagemaker_template: Template) -> None:
    groups = resources_of(sagemaker_template, "AWS::EC2::SecurityGroup")
    endpoint_group = next(g for k, g in groups.items() if k.startswith("SonicSecurityGroup"))
    assert "SecurityGroupIngress" not in endpoint_group["Properties"]
    assert resources_of(sagemaker_template, "AWS::EC2::SecurityGroupIngress") == {}


def test_no_ingress_from_outside_the_vpc(sagemaker_template: Template, dev_settings: Settings) -> None:
    for group in resources_of(sagemaker_template, "AWS::EC2::SecurityGroup").values():
        for rule in group["Properties"].get("SecurityGroupIngress", []):
            assert "CidrIp" not in rule or rule["CidrIp"] == dev_settings.route_cidr("sagemaker")


def test_execution_role_is_least_privilege(sagemaker_template: Template) -> None:
    roles = resources_of(sagemaker_template, "AWS::IAM::Role")
    execution = next(r for k, r in roles.items() if k.startswith("SonicExecutionRole"))
    assert "ManagedPolicyArns" not in execution["Properties"]  # no AmazonSageMakerFullAccess
    policies = resources_of(sagemaker_template, "AWS::IAM::Policy")
    policy = next(p for k, p in policies.items() if k.startswith("SonicExecutionRoleDefaultPolicy"))
    actions = {
        a
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert not any(a.endswith("*") and ":" in a and a.split(":")[1] == "*" for a in actions)
    assert "logs:CreateLogGroup" not in actions  # the stack makes the group, encrypted
    assert {"ec2:CreateNetworkInterface", "logs:PutLogEvents"} <= actions


def test_model_waits_for_role_policy(sagemaker_template: Template) -> None:
    model = next(iter(resources_of(sagemaker_template, "AWS::SageMaker::Model").values()))
    assert any(d.startswith("SonicExecutionRoleDefaultPolicy") for d in model["DependsOn"])
    # Not on the role as well: its ARN already orders that (cfn-lint W3005).
    roles = [d for d in model["DependsOn"] if d.startswith("SonicExecutionRole")]
    assert all(d.startswith("SonicExecutionRoleDefaultPolicy") for d in roles)


def test_endpoint_log_group_encrypted_with_retention(sagemaker_template: Template) -> None:
    sagemaker_template.has_resource_properties(
        "AWS::Logs::LogGroup",
        {
            "LogGroupName": "/aws/sagemaker/Endpoints/sonic-dev",
            "KmsKeyId": Match.any_value(),
            "RetentionInDays": 30,
        },
    )


def test_endpoint_can_reach_s3_for_model_data(sagemaker_template: Template) -> None:
    groups = resources_of(sagemaker_template, "AWS::EC2::SecurityGroup")
    endpoint_group = next(g for k, g in groups.items() if k.startswith("SonicSecurityGroup"))
    assert endpoint_group["Properties"]["SecurityGroupEgress"] == [
        {
            "CidrIp": "0.0.0.0/0",
            "Description": "model data from S3",
            "FromPort": 443,
            "IpProtocol": "tcp",
            "ToPort": 443,
        }
    ]


def test_endpoint_keeps_autoscaled_instance_count_on_update(sagemaker_template: Template) -> None:
    sagemaker_template.has_resource_properties(
        "AWS::SageMaker::Endpoint", {"RetainAllVariantProperties": True}
    )


def _execution_statements(template: Template) -> dict[str, dict[str, Any]]:
    policies = resources_of(template, "AWS::IAM::Policy")
    policy = next(p for k, p in policies.items() if k.startswith("SonicExecutionRoleDefaultPolicy"))
    return {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}


def test_eni_actions_only_in_the_models_subnets(sagemaker_template: Template) -> None:
    statements = _execution_statements(sagemaker_template)
    create = json.dumps(statements["CreateEnisInTheModelsSubnets"]["Resource"])
    assert create.count(":subnet/") == 2 and create.count(":security-group/") == 1
    assert ":network-interface/*" in create and '"*"' not in create
    manage = statements["ManageEnisInTheModelsSubnets"]
    assert json.dumps(manage["Resource"]).endswith(':network-interface/*"]]}')
    assert set(manage["Condition"]["ArnEquals"]) == {"ec2:Vpc", "ec2:Subnet"}
    # Only the Describe calls and PutMetricData (namespace-bound) are on every resource.
    on_everything = {sid for sid, s in statements.items() if s["Resource"] == "*"}
    assert on_everything == {
        "DescribeTheVpcNoResourceLevelPermissions",
        "PutMetricsInSageMakerNamespacesOnly",
    }
    describe = statements["DescribeTheVpcNoResourceLevelPermissions"]["Action"]
    assert all(a.startswith("ec2:Describe") for a in describe)


def _nag_findings(tmp_path: Path, *, volume_key: bool, instance_type: str) -> list[str]:
    app = App(outdir=str(tmp_path))
    Validations.of(app).add_plugins(AwsSolutionsChecks(app), NIST80053R5Checks(app))
    _endpoint(app, volume_key=volume_key, instance_type=instance_type)
    try:
        app.synth()
    except RuntimeError as error:
        if "ValidationFailed" not in str(error):
            raise
    report = json.loads((tmp_path / "validation-report.json").read_text())
    return [
        f"{violation['ruleName']} {construct['constructPath']}"
        for plugin in report["pluginReports"]
        for violation in plugin["violations"]
        for construct in violation["violatingConstructs"]
        if construct["constructPath"].startswith("Test/Sonic/")
    ]


def test_no_volume_key_is_acknowledged_for_local_nvme_and_no_iam_wildcard_left(tmp_path: Path) -> None:
    findings = _nag_findings(tmp_path, volume_key=False, instance_type="ml.g6e.xlarge")
    assert not [f for f in findings if "KMSKeyConfigured" in f or "IAM5" in f], findings


def test_volume_key_satisfies_the_kms_rule(tmp_path: Path) -> None:
    findings = _nag_findings(tmp_path, volume_key=True, instance_type="ml.p3.2xlarge")
    assert not [f for f in findings if "KMSKeyConfigured" in f or "IAM5" in f], findings
