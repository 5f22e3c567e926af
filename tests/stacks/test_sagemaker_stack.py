"""The SageMaker stack as a whole: snapshot, outputs, determinism, and no synth warnings."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk.assertions import Annotations, Match, Template
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from sonic_deploy.config import Settings
from sonic_deploy.in_vpc.outputs import PROBE_OUTPUTS
from tests.snapshot import scrubbed


def test_snapshot(sagemaker_template: Template, snapshot: SnapshotAssertion) -> None:
    assert scrubbed(sagemaker_template.to_json()) == snapshot(extension_class=JSONSnapshotExtension)


def test_outputs(sagemaker_template: Template) -> None:
    outputs = sagemaker_template.to_json()["Outputs"]
    assert set(outputs) == {"EndpointName", "VariantName", "RuntimeVpcEndpointDns", "Region", *PROBE_OUTPUTS}
    assert outputs["VariantName"]["Value"] == "AllTraffic"
    assert outputs["Region"]["Value"] == "us-east-2"


def test_stack_is_named_for_environment_and_route(sagemaker_stack: Stack) -> None:
    assert sagemaker_stack.stack_name == "sonic-dev-sagemaker"
    assert sagemaker_stack.region == "us-east-2"


def test_no_errors_and_no_warnings_but_the_placeholders(
    sagemaker_stack: Stack, dev_settings: Settings
) -> None:
    """Synth of the shipped config goes on, warning once per placeholder with its file, field and fix."""
    annotations = Annotations.from_stack(sagemaker_stack)
    assert annotations.find_error("*", Match.any_value()) == []
    warnings = [str(w.entry.data) for w in annotations.find_warning("*", Match.any_value())]
    expected = [
        f"placeholder: {p} [ack: sonic-deploy:placeholder:{p.field}]"
        for p in dev_settings.placeholders["sagemaker"]
    ]
    assert expected and warnings == expected


def test_environment_tags_on_resources(sagemaker_template: Template) -> None:
    sagemaker_template.has_resource_properties(
        "AWS::SageMaker::Endpoint",
        {
            "Tags": Match.array_with([{"Key": "environment", "Value": "dev"}]),
        },
    )
