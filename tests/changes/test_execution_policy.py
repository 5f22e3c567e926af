"""config/bootstrap/cloudformation-execution-policy.json, the policy `make bootstrap` gives CloudFormation's
execution role in place of AdministratorAccess: it grants what every resource type that any environment's
stacks (and the closed variants the compliance gate scans) synthesize needs, as the type's CloudFormation resource schema lists
it (handler permissions, from the schemas cfn-lint ships), and nothing account-wide in IAM.

A new resource type in a stack fails here until the policy covers it."""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path
from typing import Any

import pytest
from cfnlint.schema.manager import PROVIDER_SCHEMA_MANAGER  # type: ignore[import-untyped]

from sonic_deploy.changes.execution_policy import MAX_POLICY_CHARACTERS, policy_size, split_document
from sonic_deploy.compliance.variants import BRANCHES
from tests.compliance.conftest import VARIANTS
from tests.compliance.conftest import templates as variant_templates
from tests.conftest import EKS_ENV

REPO = Path(__file__).resolve().parents[2]
POLICY = json.loads((REPO / "config/bootstrap/cloudformation-execution-policy.json").read_text())
SCHEMA_REGION = "us-east-1"
# CloudFormation's service name -> the IAM action prefix, for every service the stacks use.
SERVICE_PREFIXES = {
    "ApplicationAutoScaling": "application-autoscaling",
    "AutoScaling": "autoscaling",
    "CertificateManager": "acm",
    "CloudWatch": "cloudwatch",
    "EC2": "ec2",
    "ECR": "ecr",
    "ECS": "ecs",
    "EFS": "elasticfilesystem",
    "EKS": "eks",
    "Events": "events",
    "FIS": "fis",
    "ElasticLoadBalancingV2": "elasticloadbalancing",
    "IAM": "iam",
    "KMS": "kms",
    "Lambda": "lambda",
    "Logs": "logs",
    "S3": "s3",
    "SNS": "sns",
    "SQS": "sqs",
    "SSM": "ssm",
    "SageMaker": "sagemaker",
    "Scheduler": "scheduler",
    "SecretsManager": "secretsmanager",
    "ServiceDiscovery": "servicediscovery",
}
# Handler permissions the policy leaves out on purpose: each serves a feature these stacks do not use.
NOT_NEEDED = {
    "ec2:AcceptAddressTransfer": "Elastic IPs transferred from another account (the stacks allocate theirs)",
    "ec2:*PrivateNatGatewayAddress": "secondary private addresses on a NAT gateway (none: tested)",
    "ec2:*SubnetCidrBlock": "IPv6 CIDR blocks on subnets (IPv4 only: tested)",
    "ec2:*VpnGateway": "VPN gateways (only an internet gateway is attached: tested)",
    "ec2:CreateVpcEncryptionControl": "VPC encryption controls (none set: tested)",
    "ec2:ModifyVpcTenancy": "changing a VPC's tenancy (default tenancy: tested)",
    "iam:DeleteRolePermissionsBoundary": "denied on purpose: a role of the stacks never loses its boundary",
    "iam:TagInstanceProfile": "the instance profiles EKS Auto Mode makes for a new cluster (Auto Mode off: tested)",
    "cognito-idp:DescribeUserPoolClient": "listener actions that authenticate with Cognito (the NLB forwards)",
    "firehose:TagDeliveryStream": "log groups that deliver to Firehose",
    "iam:*GroupPolicy": "inline policies on IAM groups (every AWS::IAM::Policy here is on roles: tested)",
    "iam:*UserPolicy": "inline policies on IAM users (likewise)",
    "managed-fleets:*": "Auto Scaling groups in a managed fleet",
    "s3:GetBucketPolicy": "flow logs delivered to S3 (these go to CloudWatch Logs: tested)",
    "s3:PutBucketPolicy": "flow logs delivered to S3",
    "s3:REST.PUT.OBJECT": "not an IAM action (an S3 access-log operation name in the Logs schema)",
    "s3tables:*": "S3 table buckets (the access-log bucket is a general purpose bucket)",
    "s3files:*": "Lambda functions with an S3 Files mount",
    "ssm:Get*": "granted only as GetParameter(s) on /cdk-bootstrap/, the public /aws/service/ AMI names and the "
    "EKS cluster's ready barrier (CFN-...)",
    "vpc-lattice:*": "VPC Lattice targets and service-network endpoints",
    "vpce:AllowMultiRegion": "cross-Region interface endpoints",
}
# Roles and instance profiles CloudFormation names after the stack, `sonic-<env>-<route>-...`
# (sonic_deploy.config.cloudformation_stack_name); the stacks name none themselves (tested).
IAM_RESOURCES = {
    "arn:*:iam::*:role/sonic-*",
    "arn:*:iam::*:instance-profile/sonic-*",
    "arn:*:iam::*:role/aws-service-role/*",
    # Customer-managed policies the stacks make (the image copy's): no more than the inline policies the
    # execution role may already put on a sonic- role.
    "arn:*:iam::*:policy/sonic-*",
}


# The EKS route on a cluster named in config (the gate's variant, routes/eks/rules.py), beside dev-eks's own.
EKS_EXISTING = f"{EKS_ENV}-existing"


@pytest.fixture(scope="module")
def templates() -> dict[str, dict[str, Any]]:
    """Every variant the compliance gate scans (each environment; the closed variants the routes offer: ECS
    air-gapped with TLS from a Private CA, the fallback AZ, turn hops and the FIS experiments, EKS air-gapped
    and on an existing cluster) and the branches variant (secrets created, Spot, the canary on ECS, TLS from a
    certificate ARN): every resource type any config can make. The gate's own synth of each, shared with
    tests/compliance/."""
    return {
        f"{variant.slug}/{stack}": body
        for variant in [*VARIANTS, BRANCHES]
        for stack, body in variant_templates(variant).items()
    }


def resources(templates: dict[str, dict[str, Any]], slug: str, resource_type: str) -> list[dict[str, Any]]:
    return [
        resource
        for name, body in templates.items()
        if name.startswith(f"{slug}/")
        for resource in body["Resources"].values()
        if resource["Type"] == resource_type
    ]


def test_the_variants_switch_on_every_branch(templates: dict[str, dict[str, Any]]) -> None:
    """Each branch that changes resource types or actions is on in one variant and off in another."""
    created = resources(templates, "dev-branches", "AWS::SecretsManager::Secret")
    assert len(created) == 2 and not resources(templates, "dev", "AWS::SecretsManager::Secret")
    copies = [len(resources(templates, slug, "Custom::CDKECRDeployment")) for slug in ("dev-branches", "dev")]
    assert copies[0] < copies[1]  # the branches variant copies no service image (only the probe's)
    for slug, spot in (("dev-branches", True), ("dev", False)):
        groups = json.dumps(resources(templates, slug, "AWS::AutoScaling::AutoScalingGroup"))
        assert ("SpotAllocationStrategy" in groups) == spot, slug
    listeners = json.dumps(resources(templates, "dev-branches", "AWS::ElasticLoadBalancingV2::Listener"))
    assert ":certificate/" in listeners and "TLS" in listeners
    assert resources(templates, "dev-closed", "AWS::CertificateManager::Certificate")
    assert resources(templates, "dev-closed", "AWS::FIS::ExperimentTemplate")
    assert resources(templates, "dev-closed", "AWS::EFS::FileSystem")  # air-gapped
    assert not resources(templates, "dev", "AWS::FIS::ExperimentTemplate")
    canaries = {
        name.split("/")[0]
        for name, body in templates.items()
        if name.endswith("/SonicEcs")
        and any(r["Type"] == "AWS::Scheduler::Schedule" for r in body["Resources"].values())
    }
    assert canaries == {"dev-branches"}
    assert len(resources(templates, "dev-closed", "AWS::AutoScaling::AutoScalingGroup")) == 2  # fallback
    # The EKS route makes its cluster in dev-eks, and only adds to the one named in config in the other.
    assert resources(templates, EKS_ENV, "AWS::EKS::Cluster")
    assert not resources(templates, EKS_EXISTING, "AWS::EKS::Cluster")
    assert resources(templates, EKS_EXISTING, "AWS::EKS::AccessEntry")
    # Air-gapped, the EKS route has no NAT gateway and reaches EKS and Lambda through endpoints.
    assert resources(templates, EKS_ENV, "AWS::EC2::NatGateway")
    assert not resources(templates, f"{EKS_ENV}-air-gapped", "AWS::EC2::NatGateway")
    endpoints = json.dumps(resources(templates, f"{EKS_ENV}-air-gapped", "AWS::EC2::VPCEndpoint"))
    assert ".eks-auth" in endpoints and ".lambda" in endpoints


def statements() -> list[dict[str, Any]]:
    return list(POLICY["Statement"])


def listed(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def granted_patterns() -> list[str]:
    return [a.lower() for s in statements() if s["Effect"] == "Allow" for a in listed(s["Action"])]


def is_granted(action: str) -> bool:
    """An action (or a wildcard a schema asks for, e.g. ec2:Describe*) falls under an allowed pattern."""
    return any(fnmatch.fnmatchcase(action.lower(), pattern) for pattern in granted_patterns())


def resource_types(templates: dict[str, dict[str, Any]]) -> dict[str, set[str]]:
    types: dict[str, set[str]] = {}
    for stack, body in templates.items():
        for resource in body["Resources"].values():
            types.setdefault(resource["Type"], set()).add(stack)
    return types


def handler_permissions(resource_type: str) -> set[str]:
    handlers = PROVIDER_SCHEMA_MANAGER.get_resource_schema(SCHEMA_REGION, resource_type).schema["handlers"]
    return {p for handler in handlers.values() for p in handler.get("permissions", [])}


def not_needed(action: str) -> bool:
    return any(fnmatch.fnmatchcase(action, pattern) for pattern in NOT_NEEDED)


def test_every_service_the_stacks_use_is_known(templates: dict[str, dict[str, Any]]) -> None:
    for resource_type, stacks in resource_types(templates).items():
        if resource_type.startswith("Custom::"):
            continue
        service = resource_type.split("::")[1]
        assert service in SERVICE_PREFIXES, (
            f"{resource_type} (in {', '.join(sorted(stacks))}) is new: add its IAM prefix to SERVICE_PREFIXES "
            "here and what its schema's handlers need to config/bootstrap/cloudformation-execution-policy.json"
        )
        assert any(p.startswith(SERVICE_PREFIXES[service] + ":") for p in granted_patterns()), resource_type


def test_the_policy_grants_every_handler_permission_of_every_resource_type(
    templates: dict[str, dict[str, Any]],
) -> None:
    missing: dict[str, set[str]] = {}
    for resource_type in resource_types(templates):
        if resource_type.startswith("Custom::"):
            continue
        for action in handler_permissions(resource_type):
            if not is_granted(action) and not not_needed(action):
                missing.setdefault(action, set()).add(resource_type)
    assert not missing, (
        "config/bootstrap/cloudformation-execution-policy.json lacks what CloudFormation needs to create, "
        f"update and delete these resources: {dict(sorted(missing.items()))}"
    )


def test_every_exception_is_still_asked_for(templates: dict[str, dict[str, Any]]) -> None:
    asked = {
        a for t in resource_types(templates) if not t.startswith("Custom::") for a in handler_permissions(t)
    }
    for pattern in NOT_NEEDED:
        assert any(fnmatch.fnmatchcase(a, pattern) for a in asked), f"NOT_NEEDED[{pattern!r}] is stale"


def test_custom_resources_can_be_invoked(templates: dict[str, dict[str, Any]]) -> None:
    assert any(t.startswith("Custom::") for t in resource_types(templates))
    assert is_granted("lambda:InvokeFunction")


def test_no_action_or_resource_is_everything_in_iam() -> None:
    for statement in statements():
        actions = listed(statement["Action"])
        assert "*" not in actions and "NotAction" not in statement and "NotResource" not in statement
        iam_actions = [a for a in actions if a.startswith("iam:")]
        if statement["Effect"] == "Deny":  # the explicit denies are IAM's (test_execution_policy_scope.py)
            assert iam_actions == actions, statement["Sid"]
            continue
        assert statement["Effect"] == "Allow"
        if not iam_actions:
            continue
        assert all(a.split(":")[1].lower() != "*" for a in iam_actions)
        resources = set(listed(statement["Resource"]))
        if resources == {"*"}:
            assert all(a.startswith("iam:List") for a in iam_actions), statement["Sid"]
        else:
            assert resources <= IAM_RESOURCES, statement["Sid"]


def test_the_stacks_leave_iam_names_to_cloudformation(templates: dict[str, dict[str, Any]]) -> None:
    """So every role and instance profile starts with the stack name, `sonic-`, as the policy's IAM
    statements require; inline policies sit on roles only; and no EC2 or EKS feature NOT_NEEDED leaves out is
    used."""
    for stack, body in templates.items():
        for logical_id, resource in body["Resources"].items():
            properties = resource.get("Properties", {})
            for name_property in ("RoleName", "InstanceProfileName"):
                name = properties.get(name_property)
                assert name is None or (isinstance(name, str) and name.startswith("sonic-")), (
                    stack,
                    logical_id,
                )
            if resource["Type"] == "AWS::IAM::Policy":
                assert "Users" not in properties and "Groups" not in properties, (stack, logical_id)
            if resource["Type"] in ("AWS::EC2::Subnet", "AWS::EC2::VPC", "AWS::EC2::NatGateway"):
                named = set(properties) & {
                    "Ipv6CidrBlock",
                    "AssignIpv6AddressOnCreation",
                    "VpcEncryptionControl",
                    "SecondaryPrivateIpAddresses",
                    "SecondaryPrivateIpAddressCount",
                }
                assert not named, (stack, logical_id, named)
            assert properties.get("InstanceTenancy", "default") == "default", (stack, logical_id)
            if resource["Type"] == "AWS::EC2::VPCGatewayAttachment":
                assert "VpnGatewayId" not in properties, (stack, logical_id)
            if resource["Type"] == "AWS::EKS::Cluster":
                assert properties["ComputeConfig"]["Enabled"] is False, (stack, logical_id)
            if resource["Type"] == "AWS::EC2::FlowLog":
                assert properties.get("LogDestinationType", "cloud-watch-logs") == "cloud-watch-logs"


def test_roles_attach_only_the_managed_policies_the_condition_lists(
    templates: dict[str, dict[str, Any]],
) -> None:
    [statement] = [
        s for s in statements() if listed(s["Action"]) == ["iam:AttachRolePolicy"] and s["Effect"] == "Allow"
    ]
    allowed = statement["Condition"]["ArnLike"]["iam:PolicyARN"]
    attached = {
        match
        for body in templates.values()
        for resource in body["Resources"].values()
        if resource["Type"] == "AWS::IAM::Role"
        for match in re.findall(r"iam::aws:policy/[\w/+=,.@-]+", json.dumps(resource["Properties"]))
    }
    assert attached, "expected the stacks to attach AWS managed policies"
    for policy in attached:
        assert any(fnmatch.fnmatchcase(f"arn:aws:{policy}", pattern) for pattern in allowed), policy
    assert not is_granted("iam:AttachUserPolicy")
    assert resources_granted("iam:CreatePolicy") == ["arn:*:iam::*:policy/sonic-*"]


def test_the_check_fails_for_a_type_the_policy_does_not_cover() -> None:
    tables = handler_permissions("AWS::DynamoDB::Table")
    assert tables and not all(is_granted(a) or not_needed(a) for a in tables)
    assert "DynamoDB" not in SERVICE_PREFIXES


def test_the_policy_fits_the_managed_policies_a_role_may_have() -> None:
    """IAM's quotas: 6,144 characters a managed policy, whitespace not counted; 10 managed policies a role
    (by default). `make bootstrap` splits the file across as few policies as fit."""
    path = REPO / "config/bootstrap/cloudformation-execution-policy.json"
    parts = split_document(POLICY, path)
    assert 1 <= len(parts) <= 3
    assert all(policy_size(part) <= MAX_POLICY_CHARACTERS for part in parts)
    assert [s for part in parts for s in part["Statement"]] == POLICY["Statement"]


def resources_granted(action: str) -> list[str]:
    return [
        resource
        for s in statements()
        if s["Effect"] == "Allow"
        and any(fnmatch.fnmatchcase(action.lower(), a.lower()) for a in listed(s["Action"]))
        for resource in listed(s["Resource"])
    ]


def test_cloudformation_can_read_every_ssm_parameter_the_stacks_take(
    templates: dict[str, dict[str, Any]],
) -> None:
    """The bootstrap version check and the ECS-optimized AMI are SSM-typed parameters, which CloudFormation
    resolves with the execution role."""
    paths = {
        parameter["Default"]
        for body in templates.values()
        for parameter in body.get("Parameters", {}).values()
        if parameter["Type"].startswith("AWS::SSM::Parameter::")
    }
    assert "/cdk-bootstrap/hnb659fds/version" in paths
    for path in paths:
        arn = f"arn:aws:ssm:us-east-2:{'' if path.startswith('/aws/') else '210987654321'}:parameter{path}"
        assert any(fnmatch.fnmatchcase(arn, r) for r in resources_granted("ssm:GetParameters")), path


def test_lambda_code_comes_from_the_bucket_the_policy_can_read(templates: dict[str, dict[str, Any]]) -> None:
    buckets = {
        json.dumps(resource["Properties"]["Code"]["S3Bucket"])
        for body in templates.values()
        for resource in body["Resources"].values()
        if resource["Type"] == "AWS::Lambda::Function"
    }
    assert buckets
    for bucket in buckets:
        value = json.loads(bucket)
        name = re.sub(r"\$\{[^}]+\}", "x", value if isinstance(value, str) else value["Fn::Sub"])
        key = f"arn:aws:s3:::{name}/asset.zip"
        assert any(fnmatch.fnmatchcase(key, r) for r in resources_granted("s3:GetObject")), bucket
