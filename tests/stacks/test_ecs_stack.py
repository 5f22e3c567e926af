"""The ECS stack as a whole: snapshot, outputs, no warnings; and the air-gapped variant."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk.assertions import Annotations, Match, Template
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from sonic_deploy.config import Settings
from tests.conftest import EditConfig, resources_of, synthesize_from
from tests.snapshot import scrubbed


def test_snapshot(ecs_template: Template, snapshot: SnapshotAssertion) -> None:
    assert scrubbed(ecs_template.to_json()) == snapshot(extension_class=JSONSnapshotExtension)


def test_no_errors_and_no_warnings_but_the_placeholders(ecs_stack: Stack, dev_settings: Settings) -> None:
    """Synth of the shipped config goes on, warning once per placeholder with its file, field and fix."""
    annotations = Annotations.from_stack(ecs_stack)
    assert annotations.find_error("*", Match.any_value()) == []
    warnings = [str(w.entry.data) for w in annotations.find_warning("*", Match.any_value())]
    expected = [
        f"placeholder: {p} [ack: sonic-deploy:placeholder:{p.field}]"
        for p in dev_settings.placeholders["ecs"]
    ]
    assert expected and warnings == expected


def test_outputs(ecs_template: Template) -> None:
    outputs = ecs_template.to_json()["Outputs"]
    assert {"ApiUrl", "ClusterName", "AvailabilityZone", "GpuWorkerRepository"} <= set(outputs)
    assert outputs["AvailabilityZone"]["Value"] == "us-east-2a"


def test_air_gapped_has_no_egress_and_keeps_the_licence(edit_config: EditConfig) -> None:
    edit_config("environments/dev.toml", 'licence_mode = "connected"', 'licence_mode = "air-gapped"')
    config = edit_config("environments/dev.toml", "nat_gateways = 1", "nat_gateways = 0")
    template = Template.from_stack(synthesize_from(config)["ecs"])
    template.resource_count_is("AWS::EC2::NatGateway", 0)
    template.resource_count_is("AWS::EC2::InternetGateway", 0)
    template.has_resource(
        "AWS::EFS::FileSystem",
        {
            "Properties": Match.object_like({"Encrypted": True, "KmsKeyId": Match.any_value()}),
            "DeletionPolicy": "RetainExceptOnCreate",
        },
    )
    licence = next(
        t["Properties"]
        for k, t in resources_of(template, "AWS::ECS::TaskDefinition").items()
        if k.startswith("SonicLicenceProxy")
    )
    efs_volume = licence["Volumes"][0]["EFSVolumeConfiguration"]
    assert efs_volume["TransitEncryption"] == "ENABLED"
    assert efs_volume["AuthorizationConfig"] == {"IAM": "ENABLED"}  # the file system refuses anonymous mounts
    role = licence["TaskRoleArn"]["Fn::GetAtt"][0]
    grants = [
        p
        for p in resources_of(template, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
    ]
    assert "elasticfilesystem:ClientWrite" in str(grants)
    assert licence["ContainerDefinitions"][0]["MountPoints"] == [
        {"ContainerPath": "/data", "ReadOnly": False, "SourceVolume": "licence"}
    ]
    # Without NAT, AWS services are reached through endpoints only.
    services = {
        str(e["Properties"]["ServiceName"]) for e in resources_of(template, "AWS::EC2::VPCEndpoint").values()
    }
    assert any("ecr.dkr" in s for s in services) and any("secretsmanager" in s for s in services)
    assert "com.amazonaws.us-east-2.ec2" in services  # the GPU agent's DescribeTags
