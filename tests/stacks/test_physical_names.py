"""Two environments deploy side by side in one account and Region: no name the templates set themselves is the
same in both (a second environment would fail to create, or overwrite the first's, as an account-level Logs
resource policy is overwritten by a policy of the same name)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from aws_cdk.assertions import Template

from tests.conftest import CONFIG_DIR, synthesize_from, template

# A property that names the resource it is on: what CloudFormation creates it as.
NAMING_PROPERTY = re.compile(r"(Name|^Family)$")
# Names that are not account-and-Region-wide, or not the resource's own name.
NOT_ACCOUNT_WIDE = {
    ("AWS::IAM::Policy", "PolicyName"),  # an inline policy: unique per role
    ("AWS::ApplicationAutoScaling::ScalingPolicy", "PolicyName"),  # unique per scalable target
    ("AWS::ServiceDiscovery::Service", "Name"),  # unique per namespace
    # One per VPC, as a private hosted zone (UNVERIFIED on AWS: docs/deploy.md, "Before the first deploy").
    ("AWS::ServiceDiscovery::PrivateDnsNamespace", "Name"),
    ("AWS::EC2::VPCEndpoint", "ServiceName"),  # AWS's service the endpoint reaches
    ("AWS::CertificateManager::Certificate", "DomainName"),  # the name agents dial
    ("AWS::CloudWatch::Alarm", "MetricName"),
}
# A second environment with the ECS route (prod deploys SageMaker only): dev's, under another name.
STAGING = "staging"


def _literal(value: Any) -> str | None:
    """The name as written, when the template writes it (pseudo parameters kept as such); None when it takes
    a resource's Ref or attribute (a name CloudFormation generates)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Ref" and str(argument).startswith("AWS::"):
            return f"<{argument}>"
        if function == "Fn::Join":
            parts = [_literal(part) for part in argument[1]]
            return None if None in parts else str(argument[0]).join(str(part) for part in parts)
    return None


def explicit_names(resources: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(type, property, name) of every name the template sets itself."""
    for resource in resources.values():
        kind = resource["Type"]
        for key, value in resource.get("Properties", {}).items():
            name = _literal(value)
            if NAMING_PROPERTY.search(key) and (kind, key) not in NOT_ACCOUNT_WIDE and name is not None:
                yield kind, key, name


@pytest.fixture(scope="module")
def staging_ecs(tmp_path_factory: pytest.TempPathFactory) -> Template:
    """dev's ECS route as a second environment (account, on-call address, its plain listener accepted: what
    outside dev must name)."""
    config = tmp_path_factory.mktemp("two-environments") / "config"
    shutil.copytree(CONFIG_DIR, config)
    dev = (config / "environments/dev.toml").read_text(encoding="utf-8")
    staging = re.sub(r"(?m)^routes = .*$", 'account = "123456789012"\nroutes = ["ecs"]', dev, count=1)
    staging = staging.replace('environment = "dev"', f'environment = "{STAGING}"')
    staging = staging.replace("tls = false\n", "tls = false\nallow_plaintext_outside_dev = true\n", 1)
    staging += '\n[ecs.alarms]\nemail = ["oncall@sonic.test"]\n'
    (config / f"environments/{STAGING}.toml").write_text(staging, encoding="utf-8")
    return Template.from_stack(synthesize_from(config, STAGING, routes=["ecs"])["ecs"])


def _names(template: Template) -> set[tuple[str, str, str]]:
    return set(explicit_names(template.to_json()["Resources"]))


def test_two_environments_share_no_explicit_name(staging_ecs: Template) -> None:
    """dev and prod (both deploy SageMaker), and dev and staging (ECS)."""
    pairs = {
        "sagemaker": (template("dev", "sagemaker"), template("prod", "sagemaker")),
        "ecs": (template("dev", "ecs"), staging_ecs),
    }
    shared = {}
    for route, (first, second) in pairs.items():
        names = _names(first)
        # The kinds this must see, so that it cannot pass by finding nothing.
        kinds = {(kind, key) for kind, key, _ in names}
        assert {
            ("AWS::CloudWatch::CompositeAlarm", "AlarmName"),
            ("AWS::ECS::TaskDefinition", "Family"),
            ("AWS::KMS::Alias", "AliasName"),
            ("AWS::CloudWatch::Dashboard", "DashboardName"),
        } <= kinds, route
        others = {other for _, _, other in _names(second)}
        shared[route] = sorted(name for name in names if name[2] in others)
    assert shared == {"sagemaker": [], "ecs": []}
    assert ("AWS::Logs::ResourcePolicy", "PolicyName") in {(k, p) for k, p, _ in _names(staging_ecs)}


def test_names_carry_the_stack_name() -> None:
    names = _names(template("dev", "ecs"))
    assert ("AWS::CloudWatch::CompositeAlarm", "AlarmName", "sonic-dev-ecs-Page") in names
    assert ("AWS::Logs::ResourcePolicy", "PolicyName", "sonic-dev-ecs-capacity-events") in names
    assert ("AWS::ECS::TaskDefinition", "Family", "sonic-dev-ecs-gpu-worker") in names


def test_a_name_from_a_resource_is_not_explicit() -> None:
    resources = {
        "A": {"Type": "AWS::Logs::LogGroup", "Properties": {"LogGroupName": {"Ref": "Fn"}}},
        "B": {
            "Type": "AWS::Logs::LogGroup",
            "Properties": {"LogGroupName": {"Fn::Join": ["", ["/x/", {"Ref": "Fn"}]]}},
        },
        "C": {
            "Type": "AWS::S3::Bucket",
            "Properties": {"BucketName": {"Fn::Join": ["-", ["b", {"Ref": "AWS::Region"}]]}},
        },
    }
    assert list(explicit_names(resources)) == [("AWS::S3::Bucket", "BucketName", "b-<AWS::Region>")]


def test_the_second_environment_is_another_environment(staging_ecs: Template) -> None:
    dashboards = [
        r["Properties"]["DashboardName"]
        for r in staging_ecs.to_json()["Resources"].values()
        if r["Type"] == "AWS::CloudWatch::Dashboard"
    ]
    assert dashboards == [f"sonic-{STAGING}-ecs"]
